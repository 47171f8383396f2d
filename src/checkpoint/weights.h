// ModelWeights: every parameter of a DeepSeek-V4 model as a typed field named after the
// official reference implementation's modules (layers.L.attn.wq_a -> layers[L].attn.wq_a).
// The loader (checkpoint/loader.h) fills it from any naming convention; nothing after the
// loader sees a checkpoint string.
//
// Host reference form: dense weights are f32 (dequantized at load from bf16 / fp8+scale /
// fp4+scale); routed experts stay NVFP4 when the checkpoint is NVFP4, else dense f32.
//
// Dimension letters: D model width, H heads, Dh head dim, Q q_lora_rank, G o_groups,
// R o_lora_rank, E routed experts, F expert width, V vocab, M hc_mult, HI/DI indexer heads/dim,
// m compress ratio, c = 2 (CSA overlap) or 1 (HCA).
#pragma once

#include <optional>
#include <vector>

#include "base/buffer.h"
#include "checkpoint/config.h"
#include "format/nvfp4.h"

namespace dsv4::checkpoint {

// One mHC site: mixes the M residual streams into the block input and back.
struct HyperConnectionWeights {
  Tensor fn;     // f32 [(2+M)·M, M·D]  (hc_head: [M, M·D])
  Tensor base;   // f32 [(2+M)·M]       (hc_head: [M])
  Tensor scale;  // f32 [3] = (pre, post, comb)  (hc_head: [1])
};

struct CompressorWeights {
  Tensor wkv;    // f32 [c·Dh, D]
  Tensor wgate;  // f32 [c·Dh, D]
  Tensor ape;    // f32 [m, c·Dh]   absolute position bias of the gate
  Tensor norm;   // f32 [Dh]
};

struct IndexerWeights {
  Tensor wq_b;                   // f32 [HI·DI, Q]
  Tensor weights_proj;           // f32 [HI, D]
  CompressorWeights compressor;  // at width DI
};

struct AttentionWeights {
  Tensor attn_sink;                             // f32 [H]
  Tensor wq_a;                                  // f32 [Q, D]
  Tensor q_norm;                                // f32 [Q]
  Tensor wq_b;                                  // f32 [H·Dh, Q]
  Tensor wkv;                                   // f32 [Dh, D]
  Tensor kv_norm;                               // f32 [Dh]
  Tensor wo_a;                                  // f32 [G·R, H/G·Dh]
  Tensor wo_b;                                  // f32 [D, G·R]
  std::optional<CompressorWeights> compressor;  // CSA and HCA layers
  std::optional<IndexerWeights> indexer;        // CSA layers
};

struct DenseExpertWeights {
  Tensor w1;  // f32 [F, D]  gate
  Tensor w3;  // f32 [F, D]  up
  Tensor w2;  // f32 [D, F]  down
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
  Tensor e_proj;  // f32 [D, D]
  Tensor h_proj;  // f32 [D, D]
  Tensor enorm;   // f32 [D]
  Tensor hnorm;   // f32 [D]
  Tensor norm;    // f32 [D]
  HyperConnectionWeights hc_head;
  LayerWeights block;  // runs as layer n_layer + i (config.schedule)
};

struct ModelWeights {
  ModelConfig config;
  Tensor embed;  // f32 [V, D]
  Tensor head;   // f32 [V, D]
  Tensor norm;   // f32 [D]
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
