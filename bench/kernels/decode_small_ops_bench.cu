// decode_small_ops_bench: the small ops of a decode layer (docs/decode_graph.md, "The small ops
// of a layer") at V4-Flash's shapes on T rows: the hyper-connection ops
// (kernels/cuda/ops/hyper_connections.cu; M = 4 streams, D = 4096, 20 Sinkhorn iterations), the
// FFN site's expand of the MoE's two halves (routed + shared as hc_expand's f_addend, beside the
// add then expand it replaced), the attention site's stream norm, the q_norm (1024 wide) and the
// per-head norm and RoPE of q (64 heads of 512) and kv (one row of 512)
// (kernels/cuda/ops/rms_norm.cu, rope.cu); the FP8 activation quantizer on the four inputs of
// the fast profile's FP8 linears it runs before (the block input [T, 4096], q_latent [T, 1024],
// the shared expert's hidden [T, 2048], the attention output [T, 64·512]) and the producers that
// make those inputs quantized in their own launch (hc_pre_norm_fp8, rms_norm_fp8, swiglu_fp8,
// rope_fp8; kernels/ops.h, "FP8"), beside the plain ops they replace. A program, not a test: each
// op is first checked against the CPU reference (the stream ops and rms_norm to the bit;
// hc_pre_norm's mixes and y and rms_norm_rope within kCudaF32OpRelTol: the device expf's and
// cosf's ulps), each fused producer against the device's plain op then the quantizer (to the
// byte), then timed: kBatch calls captured in one CUDA graph, the median of kRepeats
// replays over kBatch (host launch cost not counted). At decode sizes the ops are latency-bound:
// the floor column (the bytes they move at the copy bandwidth measured in the same run) says how
// far.
//   usage: decode_small_ops_bench [T,T,...]   (default 1,8,32)
//
// Dimension letters: T tokens, M streams, D model width, H heads, Dh head dim.
#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "bench_harness.h"
#include "kernels/ops.h"
#include "testing/compare.h"
#include "testing/device.h"
#include "testing/tolerance.h"

namespace dsv4::bench {
namespace {

constexpr int64_t kM = 4, kD = 4096, kSinkhornIters = 20;
constexpr int64_t kQLora = 1024, kHeads = 64, kHeadDim = 512, kRopePairs = 32, kF = 2048;
constexpr float kHcEps = 1e-6f, kNormEps = 1e-6f, kSwigluLimit = 10.0f;

// A host tensor and its device copy; `uniform` fills both, `empty` allocates both unfilled.
struct Pair {
  Tensor host, device;
  static Pair uniform(std::mt19937_64& rng, Shape shape, float lo, float hi) {
    Tensor h = Tensor::host(DType::kF32, shape);
    std::uniform_real_distribution<float> u(lo, hi);
    for (int64_t i = 0; i < h.numel(); ++i) h.data_as<float>()[i] = u(rng);
    Tensor d = testing::to_device(h.view());
    return {std::move(h), std::move(d)};
  }
  static Pair empty(Shape shape) {
    return {Tensor::host(DType::kF32, shape), device_tensor(DType::kF32, shape)};
  }
  TensorView v(bool on_device) const { return on_device ? device.view() : host.view(); }
  bool same_bits() const {
    return testing::same_bytes(testing::to_host(device.view()).view(), host.view());
  }
  double rel_error() const {
    const Tensor got = testing::to_host(device.view());
    const int64_t rows = host.shape()[0];
    return max_row_rel_error(got.data_as<float>(), host.data_as<float>(), rows,
                             host.numel() / rows);
  }
};

// Device room for an activation [T, K] in FP8 (codes and scales).
struct Fp8Room {
  Tensor values, scales;
  explicit Fp8Room(Shape shape)
      : values(device_tensor(DType::kF8E4M3, shape)),
        scales(device_tensor(DType::kF32, {shape[0], (shape[1] + 127) / 128})) {}
  kernels::Fp8Activation view() const { return {values.view(), scales.view()}; }
  bool same_bits(const Fp8Room& other) const {
    return testing::same_bytes(testing::to_host(values.view()).view(),
                               testing::to_host(other.values.view()).view()) &&
           testing::same_bytes(testing::to_host(scales.view()).view(),
                               testing::to_host(other.scales.view()).view());
  }
};

// One layer's operands at T rows.
struct Layer {
  Pair mixes, scale, base, streams, weight, pre, post, comb, y, block_out, shared_out, sum, out,
      normed;
  Pair q_latent, q_norm, q_normed, q, kv, kv_norm, inv_freq, gate_up, hidden, o;
  Tensor positions_host, positions;  // i64 [T]
  // The quantized inputs: by the fused producer, and by the quantizer after the plain op.
  Fp8Room y_fp8, y_parts, q_fp8, q_parts, hidden_fp8, hidden_parts, o_fp8, o_parts;
  Layer(std::mt19937_64& rng, int64_t t)
      : mixes(Pair::uniform(rng, {t, (2 + kM) * kM}, -2.0f, 2.0f)),
        scale(Pair::uniform(rng, {3}, 0.1f, 2.0f)),
        base(Pair::uniform(rng, {(2 + kM) * kM}, -1.0f, 1.0f)),
        streams(Pair::uniform(rng, {t, kM, kD}, -3.0f, 3.0f)),
        weight(Pair::uniform(rng, {kD}, -1.0f, 1.0f)),
        pre(Pair::empty({t, kM})),
        post(Pair::empty({t, kM})),
        comb(Pair::empty({t, kM, kM})),
        y(Pair::empty({t, kD})),
        block_out(Pair::uniform(rng, {t, kD}, -1.0f, 1.0f)),
        shared_out(Pair::uniform(rng, {t, kD}, -1.0f, 1.0f)),
        sum(Pair::empty({t, kD})),
        out(Pair::empty({t, kM, kD})),
        normed(Pair::empty({t, kM * kD})),
        q_latent(Pair::uniform(rng, {t, kQLora}, -3.0f, 3.0f)),
        q_norm(Pair::uniform(rng, {kQLora}, -1.0f, 1.0f)),
        q_normed(Pair::empty({t, kQLora})),
        q(Pair::uniform(rng, {t, kHeads, kHeadDim}, -3.0f, 3.0f)),
        kv(Pair::uniform(rng, {t, kHeadDim}, -3.0f, 3.0f)),
        kv_norm(Pair::uniform(rng, {kHeadDim}, -1.0f, 1.0f)),
        inv_freq(Pair::uniform(rng, {kRopePairs}, 1e-4f, 1.0f)),
        gate_up(Pair::uniform(rng, {t, 2 * kF}, -12.0f, 12.0f)),
        hidden(Pair::empty({t, kF})),
        o(Pair::uniform(rng, {t, kHeads, kHeadDim}, -3.0f, 3.0f)),
        positions_host(Tensor::host(DType::kI64, {t})),
        y_fp8({t, kD}),
        y_parts({t, kD}),
        q_fp8({t, kQLora}),
        q_parts({t, kQLora}),
        hidden_fp8({t, kF}),
        hidden_parts({t, kF}),
        o_fp8({t, kHeads * kHeadDim}),
        o_parts({t, kHeads * kHeadDim}) {
    // A decode step at a context of ~257 tokens (the ncu step of docs/decode_graph.md).
    for (int64_t i = 0; i < t; ++i) positions_host.data_as<int64_t>()[i] = 257 + i;
    positions = testing::to_device(positions_host.view());
  }
  TensorView positions_on(bool d) const { return d ? positions.view() : positions_host.view(); }

  kernels::HcPreNormParams pre_norm_params(bool d) const {
    return {mixes.v(d),     scale.v(d),  base.v(d),
            kSinkhornIters, kHcEps,      {pre.v(d), post.v(d), comb.v(d)},
            streams.v(d),   weight.v(d), kNormEps,
            y.v(d)};
  }
  Status pre_norm(bool d) const { return kernels::hc_pre_norm(pre_norm_params(d)); }
  Status expand_norm(bool d) const {
    return kernels::hc_expand_norm(block_out.v(d), TensorView{}, streams.v(d), post.v(d), comb.v(d),
                                   kNormEps, out.v(d), normed.v(d));
  }
  Status expand(bool d) const {
    return kernels::hc_expand(block_out.v(d), TensorView{}, streams.v(d), post.v(d), comb.v(d),
                              out.v(d));
  }
  // The FFN site: the MoE's routed and shared halves summed in the expand (the layer's path),
  // and the add then the expand it replaced.
  Status expand_halves(bool d) const {
    return kernels::hc_expand(block_out.v(d), shared_out.v(d), streams.v(d), post.v(d), comb.v(d),
                              out.v(d));
  }
  Status add_then_expand(bool d) const {
    DSV4_RETURN_IF_ERROR(kernels::add(block_out.v(d), shared_out.v(d), sum.v(d)));
    return kernels::hc_expand(sum.v(d), TensorView{}, streams.v(d), post.v(d), comb.v(d),
                              out.v(d));
  }
  Status q_latent_norm(bool d) const {
    return kernels::rms_norm(q_latent.v(d), q_norm.v(d), kNormEps, q_normed.v(d));
  }
  Status q_norm_rope(bool d) const {
    return kernels::rms_norm_rope(q.v(d), TensorView{}, kNormEps, positions_on(d), inv_freq.v(d));
  }
  Status kv_norm_rope(bool d) const {
    return kernels::rms_norm_rope(kv.v(d), kv_norm.v(d), kNormEps, positions_on(d), inv_freq.v(d));
  }
  // The fast profile's FP8 inputs (device only): the quantizer alone, and each fused producer.
  Status quantize_block_input(bool) const {
    return kernels::quantize_activation_fp8(y.device.view(), y_parts.view());
  }
  Status quantize_q_latent(bool) const {
    return kernels::quantize_activation_fp8(q_normed.device.view(), q_parts.view());
  }
  Status quantize_hidden(bool) const {
    return kernels::quantize_activation_fp8(hidden.device.view(), hidden_parts.view());
  }
  Status quantize_output(bool) const {
    const int64_t t = o.host.shape()[0];
    return kernels::quantize_activation_fp8(o.device.view().reshaped({t, kHeads * kHeadDim}),
                                            o_parts.view());
  }
  Status output_rope(bool) const {
    return kernels::rope(o.device.view(), positions.view(), inv_freq.device.view(),
                         kernels::RopeDirection::kInverse);
  }
  Status output_rope_fp8(bool) const {
    return kernels::rope_fp8(o.device.view(), positions.view(), inv_freq.device.view(),
                             kernels::RopeDirection::kInverse, o_fp8.view());
  }
  Status pre_norm_fp8(bool) const {
    return kernels::hc_pre_norm_fp8(pre_norm_params(true), y_fp8.view());
  }
  Status q_latent_norm_fp8(bool) const {
    return kernels::rms_norm_fp8(q_latent.device.view(), q_norm.device.view(), kNormEps,
                                 q_normed.device.view(), q_fp8.view());
  }
  Status swiglu(bool) const {
    return kernels::swiglu(gate_up.device.view(), kSwigluLimit, hidden.device.view());
  }
  Status swiglu_fp8(bool) const {
    return kernels::swiglu_fp8(gate_up.device.view(), kSwigluLimit, hidden.device.view(),
                               hidden_fp8.view());
  }
  Status stream_norm(bool d) const {
    const int64_t t = streams.host.shape()[0];
    return kernels::rms_norm(streams.v(d).reshaped({t, kM * kD}), TensorView{}, kNormEps,
                             normed.v(d));
  }
};

void check_ok(const Status& s, const char* what) {
  DSV4_CHECK(s.ok(), "%s: %s", what, s.message().c_str());
}

// Runs every op on both devices and compares; the device mixes are replaced by the host's first
// so that the stream ops see the same inputs.
void check(Layer& l, int64_t t) {
  check_ok(l.pre_norm(false), "cpu hc_pre_norm");
  check_ok(l.pre_norm(true), "cuda hc_pre_norm");
  DSV4_CHECK(
      l.y.rel_error() < testing::kCudaF32OpRelTol && l.comb.rel_error() < testing::kCudaF32OpRelTol,
      "T=%lld: hc_pre_norm off the CPU's (y %.1e, comb %.1e)", (long long)t, l.y.rel_error(),
      l.comb.rel_error());
  for (const Pair* mix : {&l.post, &l.comb}) {
    DSV4_CUDA_CHECK(cudaMemcpy(mix->device.view().data, mix->host.view().data,
                               mix->host.numel() * sizeof(float), cudaMemcpyHostToDevice));
  }
  for (const auto& [name, op, result] :
       {std::tuple{"hc_expand_norm", &Layer::expand_norm, &l.normed},
        {"hc_expand_norm", &Layer::expand_norm, &l.out},
        {"hc_expand", &Layer::expand, &l.out},
        {"hc_expand + f_addend", &Layer::expand_halves, &l.out},
        {"add, hc_expand", &Layer::add_then_expand, &l.out},
        {"rms_norm", &Layer::stream_norm, &l.normed},
        {"q_norm", &Layer::q_latent_norm, &l.q_normed}}) {
    check_ok((l.*op)(false), name);
    check_ok((l.*op)(true), name);
    DSV4_CHECK(result->same_bits(), "T=%lld: %s differs from the CPU's bits", (long long)t, name);
  }
  for (const auto& [name, op, result] : {std::tuple{"rms_norm_rope q", &Layer::q_norm_rope, &l.q},
                                         {"rms_norm_rope kv", &Layer::kv_norm_rope, &l.kv}}) {
    check_ok((l.*op)(false), name);
    check_ok((l.*op)(true), name);
    DSV4_CHECK(result->rel_error() < testing::kCudaF32OpRelTol, "T=%lld: %s off the CPU's (%.1e)",
               (long long)t, name, result->rel_error());
  }
  // Each fused producer against its plain op, then the quantizer, on the device.
  for (const auto& [name, plain, quantize, fused, parts, all] :
       {std::tuple{"hc_pre_norm_fp8", &Layer::pre_norm, &Layer::quantize_block_input,
                   &Layer::pre_norm_fp8, &l.y_parts, &l.y_fp8},
        {"rms_norm_fp8", &Layer::q_latent_norm, &Layer::quantize_q_latent,
         &Layer::q_latent_norm_fp8, &l.q_parts, &l.q_fp8},
        {"swiglu_fp8", &Layer::swiglu, &Layer::quantize_hidden, &Layer::swiglu_fp8, &l.hidden_parts,
         &l.hidden_fp8}}) {
    check_ok((l.*plain)(true), name);
    check_ok((l.*quantize)(true), name);
    check_ok((l.*fused)(true), name);
    DSV4_CHECK(all->same_bits(*parts), "T=%lld: %s differs from its parts' bytes", (long long)t,
               name);
  }
  // rope turns o in place: the fused op starts again from the same o (the host's copy).
  check_ok(l.output_rope(true), "rope");
  check_ok(l.quantize_output(true), "rope");
  const Tensor turned = testing::to_host(l.o.device.view());
  DSV4_CUDA_CHECK(cudaMemcpy(l.o.device.view().data, l.o.host.view().data, l.o.host.view().bytes(),
                             cudaMemcpyHostToDevice));
  check_ok(l.output_rope_fp8(true), "rope_fp8");
  DSV4_CHECK(l.o_fp8.same_bits(l.o_parts) &&
                 testing::same_bytes(testing::to_host(l.o.device.view()).view(), turned.view()),
             "T=%lld: rope_fp8 differs from its parts' bytes", (long long)t);
}

// Bytes the quantizer moves for [T, K]: the f32 rows in, codes and scales out.
double fp8_bytes(int64_t t, int64_t k) { return t * (4.0 * k + k + 4.0 * ((k + 127) / 128)); }

void run(int64_t t, double bandwidth) {
  std::mt19937_64 rng(static_cast<uint64_t>(t));
  Layer l(rng, t);
  check(l, t);
  const double stream_bytes = 4.0 * t * kM * kD, row_bytes = 4.0 * t * kD;
  struct Op {
    const char* name;
    Status (Layer::*run)(bool) const;
    double bytes;
  };
  const Op ops[] = {
      {"hc_pre_norm", &Layer::pre_norm, stream_bytes + 2.0 * row_bytes},
      {"hc_expand_norm", &Layer::expand_norm, 3.0 * stream_bytes + row_bytes},
      {"hc_expand", &Layer::expand, 2.0 * stream_bytes + row_bytes},
      {"hc_expand + f_addend (FFN site)", &Layer::expand_halves,
       2.0 * stream_bytes + 2.0 * row_bytes},
      {"add, hc_expand (before)", &Layer::add_then_expand, 2.0 * stream_bytes + 2.0 * row_bytes},
      {"rms_norm [T, M·D]", &Layer::stream_norm, 2.0 * stream_bytes},
      {"rms_norm q_latent [T, 1024]", &Layer::q_latent_norm, 4.0 * (2 * t + 1) * kQLora},
      {"rms_norm_rope q [T, 64, 512]", &Layer::q_norm_rope, 8.0 * t * kHeads * kHeadDim},
      {"rms_norm_rope kv [T, 512]", &Layer::kv_norm_rope, 4.0 * (2 * t + 1) * kHeadDim},
      // The FP8 inputs: codes 1 byte and scales 4 bytes a 128 columns a row.
      {"quantize_activation_fp8 [T, 4096]", &Layer::quantize_block_input, fp8_bytes(t, kD)},
      {"quantize_activation_fp8 [T, 1024]", &Layer::quantize_q_latent, fp8_bytes(t, kQLora)},
      {"quantize_activation_fp8 [T, 2048]", &Layer::quantize_hidden, fp8_bytes(t, kF)},
      {"hc_pre_norm_fp8", &Layer::pre_norm_fp8,
       stream_bytes + 2.0 * row_bytes + fp8_bytes(t, kD) - row_bytes},
      {"rms_norm_fp8 q_latent [T, 1024]", &Layer::q_latent_norm_fp8,
       4.0 * (2 * t + 1) * kQLora + fp8_bytes(t, kQLora) - 4.0 * t * kQLora},
      {"swiglu [T, 2048]", &Layer::swiglu, 12.0 * t * kF},
      {"swiglu_fp8 [T, 2048]", &Layer::swiglu_fp8, 12.0 * t * kF + fp8_bytes(t, kF) - 4.0 * t * kF},
      {"quantize_activation_fp8 [T, 64·512]", &Layer::quantize_output,
       fp8_bytes(t, kHeads * kHeadDim)},
      // rope moves the rope dims only (64 of 512 a head, read and written); rope_fp8 the row.
      {"rope [T, 64, 512] (inverse)", &Layer::output_rope, 8.0 * t * kHeads * 2 * kRopePairs},
      {"rope_fp8 [T, 64, 512] (inverse)", &Layer::output_rope_fp8,
       fp8_bytes(t, kHeads * kHeadDim) + 4.0 * t * kHeads * 2 * kRopePairs},
  };
  for (const Op& op : ops) {
    const double us = graph_us_per_call([&](int) { check_ok((l.*op.run)(true), op.name); });
    const double floor = op.bytes / bandwidth * 1e6;
    std::printf("| %s | %lld | %.2f | %.0f | %.2f | %.0f%% |\n", op.name, (long long)t, us,
                op.bytes / 1e3, floor, 100.0 * floor / us);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace dsv4::bench

int main(int argc, char** argv) {
  using namespace dsv4::bench;
  const std::vector<int64_t> rows = argc > 1 ? parse_list(argv[1]) : std::vector<int64_t>{1, 8, 32};
  cudaDeviceProp prop;
  DSV4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double bandwidth = measure_copy_bandwidth();
  std::printf("device: %s, %d SMs; copy bandwidth %.2f TB/s (read+write)\n\n", prop.name,
              prop.multiProcessorCount, bandwidth / 1e12);
  std::printf(
      "| op | T | µs | kB moved | floor µs | %% of floor |\n|---|---:|---:|---:|---:|---:|\n");
  for (const int64_t t : rows) run(t, bandwidth);
  return 0;
}
