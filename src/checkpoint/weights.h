// ModelWeights: every parameter of a DeepSeek-V4 model as a typed field named after the
// official reference implementation's modules (layers.L.attn.wq_a -> layers[L].attn.wq_a).
// The loader (checkpoint/loader.h) fills it from any naming convention; nothing after the
// loader sees a checkpoint string.
//
// Host reference form: dense weights are f32 (dequantized at load from bf16 / fp8+scale /
// fp4+scale); routed experts stay NVFP4 when the checkpoint is NVFP4, else dense f32. A load for
// a GPU keeps a dense linear stored in FP8 as FP8 (LinearWeight, LoadOptions::keep_fp8).
//
// Dimension letters: D model width, H heads, Dh head dim, Q q_lora_rank, G o_groups,
// R o_lora_rank, E routed experts, F expert width, V vocab, M hc_mult, HI/DI indexer heads/dim,
// m compress ratio, c = 2 (CSA overlap) or 1 (HCA).
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "checkpoint/config.h"
#include "format/fp8_block.h"
#include "format/nvfp4.h"

namespace dsv4::checkpoint {

// A dense linear's weight [N, K]: the Tensor is its values, f32 on the host (bf16 on a GPU when
// every value is one, checkpoint/to_device.h), or, for a weight the checkpoint stores in FP8 and
// the load kept so (LoadOptions::keep_fp8), e4m3 codes with their f32 128 × 128 block scales in
// block_scales (format/fp8_block.h): one byte a value where bf16 takes two. kernels/ops.h's
// linear takes either form (as_linear_operand).
struct LinearWeight : Tensor {
  LinearWeight() = default;
  LinearWeight(Tensor values) : Tensor(std::move(values)) {}  // NOLINT: a dense weight as it is
  Tensor block_scales;  // f32 [ceil(N/128), ceil(K/128)] when the values are e4m3, else empty
  bool is_fp8() const { return dtype() == DType::kF8E4M3; }
  format::Fp8BlockView fp8_view() const {
    return {data_as<const uint8_t>(),
            block_scales.data_as<const float>(),
            shape()[0],
            shape()[1],
            shape()[1],
            device()};
  }
};

// One mHC site: mixes the M residual streams into the block input and back.
struct HyperConnectionWeights {
  Tensor fn;     // f32 [(2+M)·M, M·D]  (hc_head: [M, M·D])
  Tensor base;   // f32 [(2+M)·M]       (hc_head: [M])
  Tensor scale;  // f32 [3] = (pre, post, comb)  (hc_head: [1])
};

struct CompressorWeights {
  LinearWeight wkv;    // [c·Dh, D]
  LinearWeight wgate;  // [c·Dh, D]
  Tensor ape;          // f32 [m, c·Dh]   absolute position bias of the gate
  Tensor norm;         // f32 [Dh]
};

struct IndexerWeights {
  LinearWeight wq_b;             // [HI·DI, Q]
  LinearWeight weights_proj;     // [HI, D]
  CompressorWeights compressor;  // at width DI
};

struct AttentionWeights {
  Tensor attn_sink;                             // f32 [H]
  LinearWeight wq_a;                            // [Q, D]
  Tensor q_norm;                                // f32 [Q]
  LinearWeight wq_b;                            // [H·Dh, Q]
  LinearWeight wkv;                             // [Dh, D]
  Tensor kv_norm;                               // f32 [Dh]
  LinearWeight wo_a;                            // [G·R, H/G·Dh]
  LinearWeight wo_b;                            // [D, G·R]
  std::optional<CompressorWeights> compressor;  // CSA and HCA layers
  std::optional<IndexerWeights> indexer;        // CSA layers
};

struct DenseExpertWeights {
  LinearWeight w1;  // [F, D]  gate
  LinearWeight w3;  // [F, D]  up
  LinearWeight w2;  // [D, F]  down
};

// All routed experts of a layer, stacked; exactly one of the two forms is filled.
struct RoutedExpertWeights {
  Tensor w13;  // f32 [E, 2F, D]  gate rows then up rows (not interleaved)
  Tensor w2;   // f32 [E, D, F]
  std::optional<format::Nvfp4Tensor> w13_nvfp4;  // [E, 2F, D]; w1 and w3 share global_scale
  std::optional<format::Nvfp4Tensor> w2_nvfp4;   // [E, D, F]
  // W4A4's static activation decode scales of the two stacks, f32 [1]: the largest calibrated
  // per-expert input_scale, so no expert's rows saturate (vLLM's choice), set once at load so
  // the forward never reads scales back from the device; empty without calibration (dynamic).
  Tensor w13_input_scale, w2_input_scale;
  // The NVFP4 stacks' codes and block scales are in mapped host memory (expert offload,
  // expert_offload.h): the kernels may read them in place over PCIe, or the model copies them.
  bool in_host_memory = false;
  bool is_nvfp4() const { return w13_nvfp4.has_value(); }
};

struct MoeWeights {
  Tensor gate;     // f32 [E, D]  router
  Tensor bias;     // f32 [E]     selection bias (score-routed layers)
  Tensor tid2eid;  // i64 [V, K]  expert ids per token (hash-routed layers)
  RoutedExpertWeights experts;
  DenseExpertWeights shared_expert;
};

struct LayerWeights {
  HyperConnectionWeights hc_attn;
  HyperConnectionWeights hc_ffn;
  Tensor attn_norm;  // f32 [D]
  Tensor ffn_norm;   // f32 [D]
  AttentionWeights attn;
  MoeWeights ffn;
};

// One MTP draft block (../shared/docs/deepseek_v4.md §2.7; the reference's MTPBlock): the next
// token's embedding and the trunk's last streams, each normed and projected, summed, through a
// full V4 block, then its own hc_head and norm before the model's shared head.
struct MtpWeights {
  LinearWeight e_proj;  // [D, D]
  LinearWeight h_proj;  // [D, D]
  Tensor enorm;         // f32 [D]
  Tensor hnorm;         // f32 [D]
  Tensor norm;          // f32 [D]
  HyperConnectionWeights hc_head;
  LayerWeights block;  // runs as layer n_layer + i (config.schedule)
};

struct ModelWeights {
  ModelConfig config;
  Tensor embed;       // f32 [V, D]
  LinearWeight head;  // [V, D]
  Tensor norm;        // f32 [D]
  HyperConnectionWeights hc_head;
  std::vector<LayerWeights> layers;
  // config.n_mtp_layers blocks when the checkpoint holds them, else empty (no speculation).
  std::vector<MtpWeights> mtp;

  // The weights of block `layer`: a main layer, or MTP block layer - n_layer.
  LayerWeights& block(int64_t layer) {
    return layer < config.n_layer ? layers[static_cast<size_t>(layer)]
                                  : mtp[static_cast<size_t>(layer - config.n_layer)].block;
  }
};

}  // namespace dsv4::checkpoint
