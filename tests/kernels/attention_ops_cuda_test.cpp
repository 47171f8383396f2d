// The CUDA attention ops against the CPU reference (label cuda: needs the GPU), through
// kernels/ops.h on host and device copies of the same random inputs: RoPE (both directions, long
// positions; and after a per-head norm, fused), sparse attention (missing candidates, with and
// without the extra source), compressor pooling (HCA and overlapping CSA with a −inf block),
// indexer scores, and top-k, which must pick exactly the CPU's indices in the CPU's order, ties and
// short rows included, and say resource_exhausted for a long row on a device without memory.
//
// Dimension letters: T tokens, H heads, Dh head dim, P rope pairs, N kv rows, K candidates,
// S compressor rows, m ratio, d entry width, HI / DI indexer heads / dim.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda_op_pair.h"
#include "kernels/decode_rows_checks.h"
#include "kernels/ops.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using testing::device_equals_host;
using testing::device_vs_host_error;
using testing::kCudaF32OpRelTol;
using testing::OpPair;
using testing::SeededRng;

std::vector<int64_t> random_positions(SeededRng& rng, int64_t n) {
  std::vector<int64_t> positions(n);
  for (int64_t& p : positions) p = rng.uniform_int(0, 70000);
  return positions;
}

// P RoPE frequencies θ_i = 10000^(−2i / 2P).
OpPair rope_frequencies(int64_t p) {
  std::vector<float> freq(p);
  for (int64_t i = 0; i < p; ++i)
    freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / (2 * p)));
  return OpPair::values(DType::kF32, {p}, freq);
}

TEST(AttentionOpsCuda, RopeMatchesCpu) {
  SeededRng rng;
  for (const auto& [t, h, dh, p] : {std::tuple{1, 1, 2, 1}, {7, 3, 24, 5}, {33, 8, 64, 32}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(h) + "x" + std::to_string(dh));
    const OpPair positions = OpPair::values(DType::kI64, {t}, random_positions(rng, t));
    const OpPair inv_freq = rope_frequencies(p);
    for (const RopeDirection dir : {RopeDirection::kForward, RopeDirection::kInverse}) {
      const OpPair x = OpPair::uniform(rng, {t, h, dh});
      ASSERT_TRUE(rope(x.h(), positions.h(), inv_freq.h(), dir).ok());
      ASSERT_TRUE(rope(x.d(), positions.d(), inv_freq.d(), dir).ok());
      EXPECT_LT(device_vs_host_error(x), kCudaF32OpRelTol);
    }
    const OpPair single = OpPair::uniform(rng, {t, dh});  // [T, Dh]: one head
    ASSERT_TRUE(rope(single.h(), positions.h(), inv_freq.h(), RopeDirection::kForward).ok());
    ASSERT_TRUE(rope(single.d(), positions.d(), inv_freq.d(), RopeDirection::kForward).ok());
    EXPECT_LT(device_vs_host_error(single), kCudaF32OpRelTol);
  }
}

// The fused per-head norm and rotation, weighted or not, on heads and on single rows.
TEST(AttentionOpsCuda, RmsNormRopeMatchesCpu) {
  SeededRng rng;
  for (const auto& [t, h, dh, p] :
       {std::tuple{1, 1, 2, 1}, {7, 3, 24, 5}, {5, 64, 512, 32}, {64, 64, 512, 32}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(h) + "x" + std::to_string(dh));
    const OpPair positions = OpPair::values(DType::kI64, {t}, random_positions(rng, t));
    const OpPair inv_freq = rope_frequencies(p);
    const OpPair weight = OpPair::uniform(rng, {dh});
    for (const bool weighted : {false, true}) {
      const TensorView w_h = weighted ? weight.h() : TensorView{};
      const TensorView w_d = weighted ? weight.d() : TensorView{};
      for (const Shape& shape : {Shape{t, h, dh}, Shape{t, dh}}) {
        const OpPair x = OpPair::uniform(rng, shape);
        ASSERT_TRUE(rms_norm_rope(x.h(), w_h, 1e-6f, positions.h(), inv_freq.h()).ok());
        ASSERT_TRUE(rms_norm_rope(x.d(), w_d, 1e-6f, positions.d(), inv_freq.d()).ok());
        EXPECT_LT(device_vs_host_error(x), kCudaF32OpRelTol);
      }
    }
  }
}

// On the device rms_norm_rope is rms_norm of each head row, then rope: the same lane tree, the
// same angle, cosf and sinf, the same rounded rotation, so the same bits. Head rows of up to
// 1024 with their pairs starting at an even dim run from registers (cuda/ops/rope_row.cuh), the
// others (an odd first pair, a row past the lanes) stream: both against the parts. From 4096 rows
// (a prompt's heads) a warp takes a row, 2, 4, 8 or 16 lanes a thread by Dh in vectors of 2 or 4
// (the last four shapes but one): the same tree, so the same bits; a Dh of no whole vectors (70)
// keeps a block a row.
TEST(AttentionOpsCuda, RmsNormRopeIsItsPartsBits) {
  SeededRng rng;
  for (const auto& [t, h, dh, p] : {std::tuple{1, 1, 512, 32},
                                    {1, 64, 512, 32},
                                    {3, 2, 24, 5},
                                    {2, 3, 25, 4},
                                    {1, 2, 1100, 8},
                                    {64, 64, 512, 32},
                                    {33, 128, 128, 32},
                                    {4100, 1, 40, 8},
                                    {4096, 1, 200, 16},
                                    {4096, 1, 70, 8}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(h) + "x" + std::to_string(dh));
    const OpPair positions = OpPair::values(DType::kI64, {t}, random_positions(rng, t));
    const OpPair inv_freq = rope_frequencies(p);
    const OpPair weight = OpPair::uniform(rng, {dh});
    for (const bool weighted : {false, true}) {
      const TensorView w = weighted ? weight.d() : TensorView{};
      const OpPair x = OpPair::uniform(rng, {t, h, dh});
      const OpPair parts = OpPair::of(testing::to_host(x.d()));
      ASSERT_TRUE(rms_norm_rope(x.d(), w, 1e-6f, positions.d(), inv_freq.d()).ok());
      const TensorView rows = parts.d().reshaped({t * h, dh});
      ASSERT_TRUE(rms_norm(rows, w, 1e-6f, rows).ok());
      ASSERT_TRUE(rope(parts.d(), positions.d(), inv_freq.d(), RopeDirection::kForward).ok());
      EXPECT_TRUE(testing::same_bytes(x.result().view(), parts.result().view()));
    }
  }
}

// Indices into n rows, about a fifth of them −1.
OpPair random_indices(SeededRng& rng, int64_t t, int64_t k, int64_t n) {
  std::vector<int32_t> idx(t * k);
  for (int32_t& i : idx)
    i = rng.uniform_int(0, 4) == 0 ? -1 : static_cast<int32_t>(rng.uniform_int(0, n - 1));
  return OpPair::values(DType::kI32, {t, k}, idx);
}

// The extra source per query ([T, Kc] lists), or as causal compressed entries: one list of
// every entry [1, Kc] and the queries' positions (ratio 3).
enum class Extra { kNone, kPerQuery, kCausal };

// One draw of sparse attention inputs on both devices: T queries of H heads over Kw window and
// Kc extra candidates (missing ones among them), the extra source as `extra` says.
struct AttentionDraw {
  Extra extra;
  OpPair q, kv, indices, extra_kv, extra_indices, shared_list, extra_positions, sinks, out;
  float scale;

  AttentionDraw(SeededRng& rng, Extra mode, int64_t t, int64_t h, int64_t dh, int64_t kw,
                int64_t kc)
      : extra(mode),
        q(OpPair::uniform(rng, {t, h, dh})),
        kv(OpPair::uniform(rng, {kw + 3, dh})),
        indices(random_indices(rng, t, kw, kw + 3)),
        extra_kv(OpPair::uniform(rng, {2 * kc + 1, dh})),
        extra_indices(random_indices(rng, t, kc, 2 * kc + 1)),
        shared_list(every_entry(kc)),
        extra_positions(causal_positions(rng, t, kc)),
        sinks(OpPair::uniform(rng, {h}, -2.0, 2.0)),
        out(OpPair::poisoned(DType::kF32, {t, h, dh})),
        scale(1.0f / std::sqrt(static_cast<float>(dh)) * 4.0f) {}

  static constexpr int64_t kRatio = 3;
  static OpPair every_entry(int64_t kc) {
    std::vector<int32_t> ids(kc);
    std::iota(ids.begin(), ids.end(), 0);
    return OpPair::values(DType::kI32, {1, kc}, ids);
  }
  // From no entry visible to past the last one.
  static OpPair causal_positions(SeededRng& rng, int64_t t, int64_t kc) {
    std::vector<int64_t> positions(t);
    for (int64_t& p : positions) p = rng.uniform_int(0, kRatio * (kc + 2));
    return OpPair::values(DType::kI64, {t}, positions);
  }

  // The call on one device's copies, writing into `output` (out's copy on that device).
  SparseAttentionParams params(bool device, const TensorView& output) const {
    auto pick = [&](const OpPair& pair) { return device ? pair.d() : pair.h(); };
    SparseAttentionParams p;
    p.q = pick(q);
    p.kv = pick(kv);
    p.indices = pick(indices);
    p.sinks = pick(sinks);
    p.scale = scale;
    p.out = output;
    if (extra != Extra::kNone) p.extra_kv = pick(extra_kv);
    if (extra == Extra::kPerQuery) p.extra_indices = pick(extra_indices);
    if (extra == Extra::kCausal) {
      p.extra_indices = pick(shared_list);
      p.extra_positions = pick(extra_positions);
      p.extra_ratio = kRatio;
    }
    return p;
  }
  SparseAttentionParams params(bool device) const {
    return params(device, device ? out.d() : out.h());
  }
};

std::string describe(int64_t t, int64_t h, int64_t kw, int64_t kc, Extra extra) {
  return std::to_string(t) + " queries × " + std::to_string(h) + " heads, " + std::to_string(kw) +
         "+" + std::to_string(kc) + " candidates, extra mode " +
         std::to_string(static_cast<int>(extra));
}

TEST(AttentionOpsCuda, SparseAttentionMatchesCpu) {
  SeededRng rng;
  for (const Extra extra : {Extra::kNone, Extra::kPerQuery, Extra::kCausal}) {
    for (const auto& [t, h, dh, kw, kc] : {std::tuple{1, 1, 8, 1, 1},
                                           {5, 3, 40, 17, 9},
                                           {21, 8, 128, 128, 300},
                                           {2, 4, 512, 128, 40},  // V4's head dim and window
                                           // ≥ 64 queries: the kernel by groups of 16 heads
                                           // (a partial group; a head dim of 9 quads)
                                           {70, 20, 512, 128, 300},
                                           {64, 5, 36, 17, 9}}) {
      SCOPED_TRACE(describe(t, h, kw, kc, extra));
      const AttentionDraw draw(rng, extra, t, h, dh, kw, kc);
      ASSERT_TRUE(sparse_attention(draw.params(false)).ok());
      ASSERT_TRUE(sparse_attention(draw.params(true)).ok());
      EXPECT_LT(device_vs_host_error(draw.out), kCudaF32OpRelTol);
    }
  }
}

// The fast profile's tensor-core attention against its CPU reference (kBf16AttentionRelTol) and
// against the exact op on the GPU (kBf16AttentionVsExactRelTol). Shapes cross its blocks' edges:
// 64 heads a block (20, 65, 128 heads), 32 candidates a tile (counts 2 … 1152, never a multiple
// of 32 but one), and the decode split (one to a few queries: their candidates over several
// blocks, combined) as well as one block a query (70 queries).
TEST(AttentionOpsCuda, SparseAttentionBf16MatchesItsReferenceAndTheExactOp) {
  SeededRng rng;
  double worst_vs_reference = 0.0, worst_vs_exact = 0.0;
  for (const Extra extra : {Extra::kNone, Extra::kPerQuery, Extra::kCausal}) {
    for (const auto& [t, h, dh, kw, kc] : {std::tuple{1, 1, 8, 1, 1},
                                           {5, 3, 40, 17, 9},
                                           {1, 64, 512, 128, 512},  // a V4-Flash decode row
                                           {3, 65, 512, 128, 1024},
                                           {70, 20, 512, 128, 300},
                                           {8, 128, 256, 100, 31}}) {
      SCOPED_TRACE(describe(t, h, kw, kc, extra));
      const AttentionDraw draw(rng, extra, t, h, dh, kw, kc);
      ASSERT_TRUE(sparse_attention_bf16(draw.params(false)).ok());
      ASSERT_TRUE(sparse_attention_bf16(draw.params(true)).ok());
      const double vs_reference = device_vs_host_error(draw.out);
      EXPECT_LT(vs_reference, testing::kBf16AttentionRelTol);
      const OpPair exact = OpPair::poisoned(DType::kF32, {t, h, dh});
      ASSERT_TRUE(sparse_attention(draw.params(true, exact.d())).ok());
      const Tensor fast = draw.out.result(), exact_out = exact.result();
      const double vs_exact =
          testing::max_row_rel_error(fast.data_as<float>(), exact_out.data_as<float>(), t * h, dh);
      EXPECT_LT(vs_exact, testing::kBf16AttentionVsExactRelTol);
      worst_vs_reference = std::max(worst_vs_reference, vs_reference);
      worst_vs_exact = std::max(worst_vs_exact, vs_exact);
    }
  }
  std::printf("sparse_attention_bf16: worst row vs its reference %.3g, vs the exact op %.3g\n",
              worst_vs_reference, worst_vs_exact);
}

// n rows whose first ones are `rows`' (the rest drawn, never a candidate).
OpPair padded(SeededRng& rng, const OpPair& rows, int64_t n) {
  const Tensor head = rows.result();
  Tensor all = OpPair::uniform(rng, {n, head.shape()[1]}).result();
  std::copy_n(head.data_as<float>(), head.numel(), all.data_as<float>());
  return OpPair::of(std::move(all));
}

// A prompt's fast attention reads a bf16 copy of its rows where its queries read each row
// several times (the first call of each shape below), else the f32 rows (the second: the same
// candidates, with the window source padded by rows no query reads until each row is read less
// than three times): both round the rows to bf16 as they reach the tensor cores, so every
// output bit is the same. Shapes: 64 heads a block over a V4 prompt's rows, a partial head
// block, a head dim of 36 (the copy's rows padded to 40), and few queries split into runs on
// blocks of 64 and 16 heads.
TEST(AttentionOpsCuda, FastSparseAttentionGivesTheSameBitsFromACopyOfItsRows) {
  SeededRng rng;
  for (const Extra extra : {Extra::kNone, Extra::kPerQuery, Extra::kCausal}) {
    for (const auto& [t, h, dh, kw, kc] : {std::tuple{40, 64, 512, 128, 512},
                                           {70, 20, 512, 128, 300},
                                           {33, 64, 36, 17, 9},
                                           {8, 128, 256, 100, 31},
                                           {6, 16, 256, 100, 31}}) {
      SCOPED_TRACE(describe(t, h, kw, kc, extra));
      const AttentionDraw draw(rng, extra, t, h, dh, kw, kc);
      const int64_t extra_rows = extra == Extra::kNone ? 0 : 2 * kc + 1;
      const int64_t candidates = extra == Extra::kNone ? kw : kw + kc;
      ASSERT_GE(t * candidates, 3 * (kw + 3 + extra_rows));  // the first call copies
      const OpPair window = padded(rng, draw.kv, t * candidates / 3 + 1);
      ASSERT_TRUE(sparse_attention_bf16(draw.params(true)).ok());
      const OpPair from_f32 = OpPair::poisoned(DType::kF32, {t, h, dh});
      SparseAttentionParams p = draw.params(true, from_f32.d());
      p.kv = window.d();
      ASSERT_TRUE(sparse_attention_bf16(p).ok());
      EXPECT_TRUE(testing::same_bytes(draw.out.result().view(), from_f32.result().view()));
    }
  }
}

// With out_fp8 the fast attention hands back its rows as rope_fp8 leaves them (each head's 32
// rope pairs turned back at its query's position, then quantized for wo_a) from its own launch:
// the same bytes as the plain call and rope_fp8 after it, from both of the kernel's epilogues
// (one run a query: 40 and 70 queries, a partial head block; runs combined: 2 and 8 queries),
// at head dims of 512 and 256.
TEST(AttentionOpsCuda, FastSparseAttentionMakesWoAsInputAsRopeFp8Does) {
  SeededRng rng;
  const int64_t pairs = 32;
  const OpPair inv_freq = rope_frequencies(pairs);
  for (const Extra extra : {Extra::kNone, Extra::kPerQuery, Extra::kCausal}) {
    for (const auto& [t, h, dh, kw, kc] : {std::tuple{40, 64, 512, 128, 512},
                                           {70, 20, 512, 128, 300},
                                           {2, 64, 512, 128, 40},
                                           {8, 128, 256, 100, 31}}) {
      SCOPED_TRACE(describe(t, h, kw, kc, extra));
      const AttentionDraw draw(rng, extra, t, h, dh, kw, kc);
      const OpPair positions = OpPair::values(DType::kI64, {t}, random_positions(rng, t));
      const int64_t n_cols = h * dh, n_groups = n_cols / 128;
      const auto fp8_room = [&] {
        return std::pair{OpPair::poisoned(DType::kF8E4M3, {t, n_cols}),
                         OpPair::poisoned(DType::kF32, {t, n_groups})};
      };
      const auto [codes, scales] = fp8_room();
      ASSERT_TRUE(sparse_attention_bf16(draw.params(true)).ok());
      ASSERT_TRUE(rope_fp8(draw.out.d(), positions.d(), inv_freq.d(), RopeDirection::kInverse,
                           {codes.d(), scales.d()})
                      .ok());
      const auto [fused_codes, fused_scales] = fp8_room();
      const OpPair fused = OpPair::poisoned(DType::kF32, {t, h, dh});
      SparseAttentionParams p = draw.params(true, fused.d());
      p.out_fp8 = {fused_codes.d(), fused_scales.d()};
      p.rope_positions = positions.d();
      p.rope_inv_freq = inv_freq.d();
      ASSERT_TRUE(sparse_attention_bf16(p).ok());
      EXPECT_TRUE(testing::same_bytes(fused.result().view(), draw.out.result().view()));
      EXPECT_TRUE(testing::same_bytes(fused_codes.result().view(), codes.result().view()));
      EXPECT_TRUE(testing::same_bytes(fused_scales.result().view(), scales.result().view()));
    }
  }
}

TEST(AttentionOpsCuda, CompressorPoolMatchesCpu) {
  SeededRng rng;
  for (const bool overlap : {false, true}) {
    for (const auto& [ratio, d, n_entries] : {std::tuple{1, 1, 1}, {4, 24, 5}, {128, 40, 3}}) {
      SCOPED_TRACE(std::to_string(ratio) + " ratio, " + std::to_string(d) + " wide" +
                   (overlap ? ", CSA" : ", HCA"));
      const int64_t c = overlap ? 2 : 1, s = (n_entries + c - 1) * ratio + ratio / 2;
      const OpPair kv = OpPair::uniform(rng, {s, c * d});
      Tensor gate = Tensor::host(DType::kF32, {s, c * d});
      for (int64_t i = 0; i < gate.numel(); ++i)
        gate.data_as<float>()[i] = static_cast<float>(rng.uniform(-5, 5));
      if (overlap) {  // the "previous block" before the first: its A halves weigh nothing
        for (int64_t r = 0; r < ratio; ++r) {
          for (int64_t i = 0; i < d; ++i)
            gate.data_as<float>()[r * c * d + i] = -std::numeric_limits<float>::infinity();
        }
      }
      const OpPair gates = OpPair::of(std::move(gate));
      const OpPair ape = OpPair::uniform(rng, {ratio, c * d});
      const OpPair out = OpPair::poisoned(DType::kF32, {n_entries, d});
      ASSERT_TRUE(compressor_pool({kv.h(), gates.h(), ape.h(), overlap, out.h()}).ok());
      ASSERT_TRUE(compressor_pool({kv.d(), gates.d(), ape.d(), overlap, out.d()}).ok());
      EXPECT_LT(device_vs_host_error(out), kCudaF32OpRelTol);
    }
  }
}

TEST(AttentionOpsCuda, IndexerScoresMatchCpu) {
  SeededRng rng;
  // The last two are V4's indexer (64 heads of 128: two heads a lane) at a decode step and over
  // several blocks of entries, the last one partial.
  for (const auto& [t, hi, di, n] : {std::tuple{1, 1, 1, 1},
                                     {6, 4, 32, 13},
                                     {19, 16, 64, 130},
                                     {1, 64, 128, 5},
                                     {2, 64, 128, 300}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(n));
    const OpPair q = OpPair::uniform(rng, {t, hi, di});
    const OpPair keys = OpPair::uniform(rng, {n, di});
    const OpPair weights = OpPair::uniform(rng, {t, hi});
    const OpPair scores = OpPair::poisoned(DType::kF32, {t, n});
    ASSERT_TRUE(indexer_scores({q.h(), keys.h(), weights.h(), 0.125f, 0.5f, scores.h()}).ok());
    ASSERT_TRUE(indexer_scores({q.d(), keys.d(), weights.d(), 0.125f, 0.5f, scores.d()}).ok());
    EXPECT_LT(device_vs_host_error(scores), kCudaF32OpRelTol);
  }
}

// The fast profile's FP8 indexer against its CPU reference (kFp8IndexerRelTol: the same E4M3
// bits) and against the exact op on the GPU (kFp8IndexerVsExactRelTol, at V4's head dim and head
// counts, where its estimate holds; the worst of all shapes printed): head counts across the
// 64-head passes (3, 64, 70), head dims below the 128 it pads to, entries across its 16- and
// 64-entry tiles (on a 132-SM H100 the first, fourth, fifth and sixth shapes take 16-entry
// tiles: T · N / 16 ≤ 132), decode steps of V4's indexer (one and two rows, 1000 and 512
// entries), and grids past ~8 blocks an SM, where a block takes several tiles (its queries
// quantized once, or with 70 heads once a pass and tile).
TEST(AttentionOpsCuda, IndexerScoresFp8MatchItsReferenceAndTheExactOp) {
  SeededRng rng;
  double worst_vs_reference = 0.0, worst_vs_exact = 0.0;
  for (const auto& [t, hi, di, n] : {std::tuple{1, 1, 4, 1},
                                     {6, 3, 16, 65},
                                     {19, 70, 32, 130},
                                     {1, 64, 128, 1000},
                                     {2, 64, 128, 512},
                                     {2, 70, 128, 100},
                                     {37, 64, 128, 300},
                                     {4, 64, 128, 20000},
                                     {2, 70, 32, 40000}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(hi) + "x" + std::to_string(n));
    const OpPair q = OpPair::uniform(rng, {t, hi, di});
    const OpPair keys = OpPair::uniform(rng, {n, di});
    const OpPair weights = OpPair::uniform(rng, {t, hi});
    const OpPair scores = OpPair::poisoned(DType::kF32, {t, n});
    const OpPair exact = OpPair::poisoned(DType::kF32, {t, n});
    ASSERT_TRUE(indexer_scores_fp8({q.h(), keys.h(), weights.h(), 0.125f, 0.5f, scores.h()}).ok());
    ASSERT_TRUE(indexer_scores_fp8({q.d(), keys.d(), weights.d(), 0.125f, 0.5f, scores.d()}).ok());
    ASSERT_TRUE(indexer_scores({q.d(), keys.d(), weights.d(), 0.125f, 0.5f, exact.d()}).ok());
    const double vs_reference = device_vs_host_error(scores);
    EXPECT_LT(vs_reference, testing::kFp8IndexerRelTol);
    const Tensor fast = scores.result(), exact_scores = exact.result();
    const double vs_exact =
        testing::max_row_rel_error(fast.data_as<float>(), exact_scores.data_as<float>(), t, n);
    // The bound's estimate averages the rounding over 128 dims and 64 heads; a row of one head
    // over 4 dims can cancel to near zero, where E4M3's rounding is any share of it.
    if (di == 128 && hi >= 64) {
      EXPECT_LT(vs_exact, testing::kFp8IndexerVsExactRelTol);
    }
    worst_vs_reference = std::max(worst_vs_reference, vs_reference);
    worst_vs_exact = std::max(worst_vs_exact, vs_exact);
  }
  std::printf("indexer_scores_fp8: worst row vs its reference %.3g, vs the exact op %.3g\n",
              worst_vs_reference, worst_vs_exact);
}

// An entry's FP8 score is the same sum over its heads in a 16-entry tile (few rows) as from
// keys and queries quantized once a call (shared keys past one wave): rows of a 40-row call
// (40 × 300 entries: past a wave on any GPU of up to 760 SMs) against each row's call alone (19
// 16-entry tiles), bit for bit, at 64 and 70 heads.
TEST(AttentionOpsCuda, IndexerScoresFp8KeepTheirBitsAcrossTileWidths) {
  SeededRng rng;
  const int64_t t = 40, di = 128, n = 300;
  for (const int64_t hi : {64, 70}) {
    SCOPED_TRACE(std::to_string(hi) + " heads");
    const OpPair q = OpPair::uniform(rng, {t, hi, di});
    const OpPair keys = OpPair::uniform(rng, {n, di});
    const OpPair weights = OpPair::uniform(rng, {t, hi});
    const OpPair scores = OpPair::poisoned(DType::kF32, {t, n});
    ASSERT_TRUE(indexer_scores_fp8({q.d(), keys.d(), weights.d(), 0.125f, 0.5f, scores.d()}).ok());
    for (const int64_t row : {int64_t{0}, int64_t{17}, t - 1}) {
      SCOPED_TRACE("row " + std::to_string(row));
      const OpPair alone = OpPair::poisoned(DType::kF32, {1, n});
      ASSERT_TRUE(indexer_scores_fp8({q.d().rows(row, row + 1), keys.d(),
                                      weights.d().rows(row, row + 1), 0.125f, 0.5f, alone.d()})
                      .ok());
      EXPECT_TRUE(testing::same_bits(alone.d(), scores.d().rows(row, row + 1)));
    }
  }
}

// The same keys shared by a call's rows and through per-row address tables (the decode rows'
// way, which scores from 64-entry tiles quantized a block at a time) give the same bits: 40
// rows × 300 entries (a tile a block, groups of one query), and 300 rows × 4100 entries (eight
// tiles a block; groups of 16 queries, the last one short), at 64 and 70 heads.
TEST(AttentionOpsCuda, IndexerScoresFp8GiveTheSameBitsFromSharedAndPerRowKeys) {
  SeededRng rng;
  for (const auto& [t, n] : {std::pair{40, 300}, std::pair{300, 4100}}) {
    for (const int64_t hi : {64, 70}) {
      SCOPED_TRACE(std::to_string(t) + " rows × " + std::to_string(n) + " entries, " +
                   std::to_string(hi) + " heads");
      const int64_t di = 128;
      const OpPair q = OpPair::uniform(rng, {t, hi, di});
      const OpPair keys = OpPair::uniform(rng, {n, di});
      const OpPair weights = OpPair::uniform(rng, {t, hi});
      const OpPair shared = OpPair::poisoned(DType::kF32, {t, n});
      const OpPair per_row = OpPair::poisoned(DType::kF32, {t, n});
      ASSERT_TRUE(
          indexer_scores_fp8({q.d(), keys.d(), weights.d(), 0.125f, 0.5f, shared.d()}).ok());
      const OpPair addresses =
          OpPair::values(DType::kI64, {t},
                         std::vector<int64_t>(
                             t, static_cast<int64_t>(reinterpret_cast<uintptr_t>(keys.d().data))));
      const OpPair positions =
          OpPair::values(DType::kI64, {t}, std::vector<int64_t>(t, n - 1));  // all n visible
      IndexerScoreParams p{q.d(), keys.d(), weights.d(), 0.125f, 0.5f, per_row.d()};
      p.key_addresses = addresses.d();
      p.key_positions = positions.d();
      p.key_ratio = 1;
      ASSERT_TRUE(indexer_scores_fp8(p).ok());
      EXPECT_TRUE(testing::same_bits(shared.d(), per_row.d()));
    }
  }
}

TEST(AttentionOpsCuda, TopkPicksTheCpuIndicesInOrder) {
  SeededRng rng;
  // The radix select (K ≤ 4096; a 20000-candidate row is a 80k-token context's CSA indexer), over
  // slices of 32 K candidates a block where a row holds two or more (5000 top 64: 3 slices; 70000
  // top 512, a 280k-token context: 5), and the rank kernel (K = 4097).
  for (const auto& [t, n, k] : {std::tuple{1, 1, 1},
                                {7, 50, 8},
                                {13, 700, 64},
                                {3, 5, 9},
                                {2, 20000, 512},
                                {2, 5000, 64},
                                {3, 70000, 512},
                                {1, 300, 4096},
                                {2, 5000, 4097}}) {
    for (const bool coarse : {true, false}) {
      SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(n) + " top " + std::to_string(k) +
                   (coarse ? ", coarse" : ", continuous"));
      // Scores on a coarse grid, so ties are common (-0 among the zeros: equal to +0 for the CPU),
      // or continuous, so the radix select stops after its first passes (the K-th key alone in its
      // bin); rows with fewer candidates than K.
      Tensor scores = Tensor::host(DType::kF32, {t, n});
      for (int64_t i = 0; i < scores.numel(); ++i) {
        const float v = coarse ? static_cast<float>(rng.uniform_int(-20, 20)) * 0.25f
                               : static_cast<float>(rng.uniform(-5.0, 5.0));
        scores.data_as<float>()[i] = v == 0.0f && i % 2 == 1 ? -0.0f : v;
      }
      std::vector<int32_t> limits(t);
      for (int32_t& l : limits) l = static_cast<int32_t>(rng.uniform_int(0, n + 2));
      const OpPair s = OpPair::of(std::move(scores));
      const OpPair n_candidates = OpPair::values(DType::kI32, {t}, limits);
      const OpPair indices = OpPair::poisoned(DType::kI32, {t, k});
      ASSERT_TRUE(topk(s.h(), n_candidates.h(), indices.h()).ok());
      ASSERT_TRUE(topk(s.d(), n_candidates.d(), indices.d()).ok());
      EXPECT_TRUE(device_equals_host(indices));
      // No counts: every row's candidates are all N (decode rows).
      const OpPair all = OpPair::poisoned(DType::kI32, {t, k});
      ASSERT_TRUE(topk(s.h(), TensorView{}, all.h()).ok());
      ASSERT_TRUE(topk(s.d(), TensorView{}, all.d()).ok());
      EXPECT_TRUE(device_equals_host(all));
    }
  }
}

// Every byte of device memory this process can still get, held until destroyed: the default pool
// trimmed first (it keeps what earlier calls freed), then cudaMalloc of ever smaller pieces, then
// the pool's own pieces down to 256 bytes: the chunks its live allocations (an earlier test's
// kept scratch) hold have room that a small cudaMallocAsync would otherwise still get.
class DeviceMemoryTaken {
 public:
  DeviceMemoryTaken() {
    int device = 0;
    cudaMemPool_t pool = nullptr;
    EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool, device), cudaSuccess);
    EXPECT_EQ(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    for (size_t piece = size_t{1} << 30; piece >= size_t{1} << 20; piece /= 2) {
      void* memory = nullptr;
      while (cudaMalloc(&memory, piece) == cudaSuccess) held_.push_back(memory);
    }
    for (size_t piece = size_t{1} << 20; piece >= 256; piece /= 2) {
      void* memory = nullptr;
      while (cudaMallocAsync(&memory, piece, cudaStreamPerThread) == cudaSuccess) {
        pooled_.push_back(memory);
      }
    }
    (void)cudaGetLastError();  // the last allocation's failure is this test's, not an op's
    EXPECT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
  }
  ~DeviceMemoryTaken() {
    for (void* memory : held_) EXPECT_EQ(cudaFree(memory), cudaSuccess);
    for (void* memory : pooled_) EXPECT_EQ(cudaFreeAsync(memory, cudaStreamPerThread), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
  }
  DeviceMemoryTaken(const DeviceMemoryTaken&) = delete;
  DeviceMemoryTaken& operator=(const DeviceMemoryTaken&) = delete;

 private:
  std::vector<void*> held_, pooled_;
};

// A long row's slices keep their candidates in the call's scratch (topk.cu): with the device's
// memory taken, the call is resource_exhausted and writes nothing, as is an activation's
// allocation; neither failure is left for the next launch's error check to abort on, so once the
// memory is back the same call picks the CPU's indices.
TEST(AttentionOpsCuda, TopkOfALongRowWithoutDeviceMemoryIsResourceExhausted) {
  SeededRng rng;
  const int64_t t = 2, n = 70000, k = 512;  // 5 slices a row
  const OpPair s = OpPair::uniform(rng, {t, n}, -5.0, 5.0);
  const OpPair indices = OpPair::poisoned(DType::kI32, {t, k});
  ASSERT_TRUE(topk(s.h(), TensorView{}, indices.h()).ok());
  {
    const DeviceMemoryTaken taken;
    const Status refused = topk(s.d(), TensorView{}, indices.d());
    EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.to_string();
    EXPECT_EQ(Tensor::empty(DType::kF32, {t, n}, Device::kCuda).status().code(),
              StatusCode::kResourceExhausted);
  }
  EXPECT_TRUE(testing::same_bytes(indices.result().view(),
                                  testing::poisoned_host(DType::kI32, {t, k}).view()))
      << "the refused call wrote its output";
  const Status ran = topk(s.d(), TensorView{}, indices.d());
  ASSERT_TRUE(ran.ok()) << ran.to_string();
  EXPECT_TRUE(device_equals_host(indices));
}

// Decode rows (one launch for a step's sequences, each over its own buffers) against the calls
// each sequence makes alone: the same bits (decode_rows_checks.h).
TEST(DecodeRowsCudaTest, SparseAttentionRowsAreTheirSingleCalls) {
  testing::expect_decode_attention_rows_match_single_calls(Device::kCuda);
}
TEST(DecodeRowsCudaTest, IndexerRowsAreTheirSingleCalls) {
  testing::expect_indexer_rows_match_single_calls(Device::kCuda);
}
TEST(DecodeRowsCudaTest, FastSparseAttentionRowsAreTheirSingleCalls) {
  testing::expect_decode_attention_rows_match_single_calls(Device::kCuda, sparse_attention_bf16);
}
// A decode step's fast attention at V4-Flash's shapes (64 heads of 512, a 128-row ring window;
// CSA: up to 512 picks of position / 4 entries, HCA: every entry at ratio 128) for T = 1, 2, 8
// rows around positions 1, 130, 272 and 2048 (where the picks fill the top-k): the batched call
// through the address tables against the exact op on the same call
// (kBf16AttentionVsExactRelTol), each row against its call alone (the same bits), and each call
// alone against the CPU reference (kBf16AttentionRelTol). On a 132-SM H100 the batched calls
// take blocks of 16 heads (T = 1), 32 (T = 2 at 2048, T = 8 at 130 and 272) and 64 (T = 8 at
// 2048), the calls alone 16: a row's bits must not depend on its block's heads.
void expect_fast_decode_rows_at_v4_shapes(int64_t n_rows, int64_t position, bool causal) {
  using testing::address_table;
  using testing::host_values;
  using testing::on_device;
  using testing::random_host;
  SeededRng rng;
  const int64_t h = 64, dh = 512, w = 128, top_k = 512, m = causal ? 128 : 4;
  // Entries a row's buffer holds.
  const int64_t capacity = std::max<int64_t>(2048, position) / m + 1;
  std::vector<int64_t> positions(n_rows);
  for (int64_t i = 0; i < n_rows; ++i) positions[i] = std::max<int64_t>(0, position - 5 * i);
  std::vector<Tensor> rings_h, entries_h, rings, entries;
  for (int64_t i = 0; i < n_rows; ++i) {
    rings_h.push_back(random_host(rng, {w, dh}));
    entries_h.push_back(random_host(rng, {capacity, dh}));
    rings.push_back(on_device(Device::kCuda, rings_h.back()));
    entries.push_back(on_device(Device::kCuda, entries_h.back()));
  }
  const Tensor q_h = random_host(rng, {n_rows, h, dh});
  const Tensor sinks_h = random_host(rng, {h});
  const Tensor q = on_device(Device::kCuda, q_h), sinks = on_device(Device::kCuda, sinks_h);
  // The ring slots of each row's last w positions (−1 before position 0); the picks: distinct
  // entries among the row's own, −1 past them up to the batch's widest list.
  std::vector<int32_t> window(n_rows * w);
  int64_t n_max = 0;
  for (int64_t i = 0; i < n_rows; ++i) {
    for (int64_t j = 0; j < w; ++j) {
      const int64_t at = positions[i] - (w - 1) + j;
      window[i * w + j] = at < 0 ? -1 : static_cast<int32_t>(at % w);
    }
    n_max = std::max(n_max, (positions[i] + 1) / m);
  }
  const int64_t k_all = causal ? n_max : std::min(top_k, n_max);
  std::vector<int32_t> picks(n_rows * k_all, -1);
  for (int64_t i = 0; !causal && i < n_rows; ++i) {
    std::vector<int32_t> order((positions[i] + 1) / m);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng.engine());
    for (int64_t j = 0; j < std::min<int64_t>(k_all, order.size()); ++j)
      picks[i * k_all + j] = order[j];
  }
  std::vector<int32_t> ids(capacity);
  std::iota(ids.begin(), ids.end(), 0);
  const Tensor all_ids_h = host_values(DType::kI32, {1, capacity}, ids);
  const Tensor pos_h = host_values(DType::kI64, {n_rows}, positions);
  const Tensor window_h = host_values(DType::kI32, {n_rows, w}, window);
  const Tensor picks_h = host_values(DType::kI32, {n_rows, k_all}, picks);
  const Tensor all_ids = on_device(Device::kCuda, all_ids_h), pos = on_device(Device::kCuda, pos_h);
  const Tensor window_rows = on_device(Device::kCuda, window_h);
  const Tensor pick_rows = on_device(Device::kCuda, picks_h);
  const Tensor rings_at = address_table(Device::kCuda, rings);
  const Tensor entries_at = address_table(Device::kCuda, entries);
  const float scale = 4.0f / std::sqrt(static_cast<float>(dh));

  // The batched call, fast and exact.
  Tensor batched = on_device(Device::kCuda, Tensor::host(DType::kF32, {n_rows, h, dh}));
  Tensor exact = on_device(Device::kCuda, Tensor::host(DType::kF32, {n_rows, h, dh}));
  SparseAttentionParams all;
  all.q = q.view();
  all.kv = rings[0].view();
  all.kv_addresses = rings_at.view();
  all.indices = window_rows.view();
  if (n_max > 0) {
    all.extra_kv = entries[0].view().rows(0, n_max);
    all.extra_addresses = entries_at.view();
    all.row_positions = pos.view();
    all.extra_ratio = m;
    all.extra_indices =
        causal ? all_ids.view().reshaped({capacity}).rows(0, n_max).reshaped({1, n_max})
               : pick_rows.view();
    if (causal) all.extra_positions = pos.view();
  }
  all.sinks = sinks.view();
  all.scale = scale;
  all.out = batched.view();
  SparseAttentionParams all_exact = all;
  all_exact.out = exact.view();
  ASSERT_TRUE(sparse_attention_bf16(all).ok());
  ASSERT_TRUE(sparse_attention(all_exact).ok());
  const Tensor got = testing::on_host(batched.view()), want = testing::on_host(exact.view());
  EXPECT_LT(testing::max_row_rel_error(got.data_as<float>(), want.data_as<float>(), n_rows * h, dh),
            testing::kBf16AttentionVsExactRelTol);

  for (int64_t i = 0; i < n_rows; ++i) {
    SCOPED_TRACE("row " + std::to_string(i) + " at position " + std::to_string(positions[i]));
    const int64_t n = (positions[i] + 1) / m, k_own = std::min(k_all, n);
    const Tensor own_picks_h = host_values(
        DType::kI32, {1, k_own},
        std::vector<int32_t>(picks.begin() + i * k_all, picks.begin() + i * k_all + k_own));
    const Tensor q_row_h = testing::on_host(q.view().rows(i, i + 1));
    const Tensor window_row_h = testing::on_host(window_rows.view().rows(i, i + 1));
    const Tensor pos_row_h = testing::on_host(pos.view().rows(i, i + 1));
    const Tensor own_picks = on_device(Device::kCuda, own_picks_h);
    // The row's call alone on the device (through its tables, as the engine steps one sequence)
    // and on the host: the same operands, each device's.
    Tensor alone = on_device(Device::kCuda, Tensor::host(DType::kF32, {1, h, dh}));
    Tensor reference = Tensor::host(DType::kF32, {1, h, dh});
    for (const bool device : {true, false}) {
      const auto pick = [&](const Tensor& on_gpu, const Tensor& on_cpu) {
        return device ? on_gpu.view() : on_cpu.view();
      };
      SparseAttentionParams one;
      one.q = device ? q.view().rows(i, i + 1) : q_row_h.view();
      one.kv = pick(rings[i], rings_h[i]);
      one.indices = device ? window_rows.view().rows(i, i + 1) : window_row_h.view();
      if (n > 0) {
        one.extra_kv = pick(entries[i], entries_h[i]).rows(0, n);
        one.extra_indices =
            causal ? pick(all_ids, all_ids_h).reshaped({capacity}).rows(0, n).reshaped({1, n})
                   : pick(own_picks, own_picks_h);
        if (causal) {
          one.extra_positions = device ? pos.view().rows(i, i + 1) : pos_row_h.view();
          one.extra_ratio = m;
        }
      }
      one.sinks = pick(sinks, sinks_h);
      one.scale = scale;
      one.out = device ? alone.view() : reference.view();
      if (device) {  // a decode row alone: the engine's one-sequence step, through its tables
        one.kv_addresses = rings_at.view().rows(i, i + 1);
        if (n > 0) {
          one.extra_addresses = entries_at.view().rows(i, i + 1);
          one.row_positions = pos.view().rows(i, i + 1);
          one.extra_ratio = m;
        }
      }
      ASSERT_TRUE(sparse_attention_bf16(one).ok());
    }
    EXPECT_TRUE(testing::same_bits(alone.view(), batched.view().rows(i, i + 1)));
    const Tensor alone_h = testing::on_host(alone.view());
    EXPECT_LT(
        testing::max_row_rel_error(alone_h.data_as<float>(), reference.data_as<float>(), h, dh),
        testing::kBf16AttentionRelTol);
  }
}

TEST(DecodeRowsCudaTest, FastSparseAttentionAtV4ShapesMatchesExactAndSingleCalls) {
  for (const bool causal : {false, true}) {
    for (const int64_t n_rows : {1, 2, 8}) {
      for (const int64_t position : {1, 130, 272, 2048}) {
        SCOPED_TRACE(std::string(causal ? "HCA" : "CSA") + ", " + std::to_string(n_rows) +
                     " rows at position " + std::to_string(position));
        expect_fast_decode_rows_at_v4_shapes(n_rows, position, causal);
      }
    }
  }
}

// At 2^20 positions an HCA row has 8320 candidates, 260 runs of 34 MB at 64 heads: eight rows
// pass kAttentionRunsMaxBytes, so the call launches 7 rows and then 1, each row still the bits
// of its call alone (through its tables: a plain call of one row spreads 260 tiles over the
// SMs' worth of runs instead).
TEST(DecodeRowsCudaTest, FastSparseAttentionPastItsRunsBudgetKeepsEachRowsBits) {
  ASSERT_GT(8 * attention_runs_bytes_a_row(128 + 8192, 64), kAttentionRunsMaxBytes);
  expect_fast_decode_rows_at_v4_shapes(8, int64_t{1} << 20, true);
}

TEST(DecodeRowsCudaTest, FastIndexerRowsAreTheirSingleCalls) {
  testing::expect_indexer_rows_match_single_calls(Device::kCuda, indexer_scores_fp8);
}
TEST(DecodeRowsCudaTest, CompressorDecodeIsTheOneTokenStepOfThePlainOps) {
  testing::expect_compressor_decode_matches_plain_ops(Device::kCuda);
}
TEST(DecodeRowsCudaTest, CompressorDecodeRunsAreTheirRowsOneByOne) {
  testing::expect_compressor_decode_runs_match_row_by_row(Device::kCuda);
}

}  // namespace
}  // namespace dsv4::kernels
