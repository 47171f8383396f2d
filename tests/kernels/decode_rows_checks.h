// The decode rows' ops (kernels/ops.h, "Decode rows": a step's rows each over its own sequence's
// buffers, reached by address) against the calls a sequence alone makes, on one device: every
// row must get exactly the bits of its own call. Rows at positions before their first entry,
// at pool steps and between them, rows with fewer picks than others and with none. Called by
// the CPU tests (attention_ops_test.cpp) and the CUDA ones (attention_ops_cuda_test.cpp).
//
// Dimension letters: B rows (sequences), H heads, Dh head dim, W window candidates, R ring rows,
// C entry capacity, m compress ratio, c halves, d entry width, HI / DI indexer heads / dim,
// K picks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "base/buffer.h"
#include "kernels/ops.h"
#include "testing/device.h"
#include "testing/random.h"

namespace dsv4::testing {

// The op a check runs: the exact one, or the fast profile's with the same contract.
using AttentionOp = Status (*)(const kernels::SparseAttentionParams&);
using IndexerOp = Status (*)(const kernels::IndexerScoreParams&);

// A copy of a host tensor on `device`, and back.
inline Tensor on_device(Device device, const Tensor& host) {
  Result<Tensor> t = Tensor::empty(host.dtype(), host.shape(), device);
  DSV4_CHECK(t.ok() && copy_tensor(t->view(), host.view()).ok(), "on_device: copy");
  return std::move(t).value();
}
inline Tensor on_host(const TensorView& v) {
  Tensor t = Tensor::host(v.dtype, v.shape);
  DSV4_CHECK(copy_tensor(t.view(), v).ok(), "on_host: copy");
  return t;
}
inline Tensor random_host(SeededRng& rng, Shape shape) {
  Tensor t = Tensor::host(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = float(rng.uniform(-1.0, 1.0));
  return t;
}
template <typename T>
Tensor host_values(DType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t = Tensor::host(dtype, shape);
  std::copy(values.begin(), values.end(), t.data_as<T>());
  return t;
}
// i64 [n]: the addresses of `buffers`.
inline Tensor address_table(Device device, const std::vector<Tensor>& buffers) {
  std::vector<int64_t> a;
  for (const Tensor& b : buffers) a.push_back(reinterpret_cast<intptr_t>(b.view().data));
  return on_device(device, host_values(DType::kI64, {int64_t(a.size())}, a));
}
inline bool same_bits(const TensorView& a, const TensorView& b) {
  return same_bytes(on_host(a).view(), on_host(b).view());
}

// Positions of B rows at ratio m: before the first entry, at pool steps (p ≡ m − 1) and between.
inline std::vector<int64_t> decode_positions(SeededRng& rng, int64_t ratio, int64_t capacity) {
  std::vector<int64_t> p = {0, ratio - 1, ratio - 2 < 0 ? 0 : ratio - 2};
  for (int i = 0; i < 3; ++i) p.push_back(rng.uniform_int(ratio, ratio * capacity - 1));
  p.push_back(ratio * capacity - 1);  // the last entry completes
  return p;
}

inline void expect_decode_attention_rows_match(Device device, bool causal, AttentionOp op) {
  SeededRng rng;
  const int64_t h = 4, dh = 64, w = 8, r = 16, c = 12, m = 4, k = 6;
  const std::vector<int64_t> positions = decode_positions(rng, m, c);
  const auto b = static_cast<int64_t>(positions.size());
  std::vector<Tensor> rings, entries;
  for (int64_t i = 0; i < b; ++i) {
    rings.push_back(on_device(device, random_host(rng, {r, dh})));
    entries.push_back(on_device(device, random_host(rng, {c, dh})));
  }
  const Tensor q = on_device(device, random_host(rng, {b, h, dh}));
  const Tensor sinks = on_device(device, random_host(rng, {h}));
  std::vector<int32_t> window(b * w);
  for (int32_t& row : window) row = static_cast<int32_t>(rng.uniform_int(-1, r - 1));
  // Each row's picks among its own entries, −1 past them; a single call gets its row's first
  // min(K, N) (the batch's K is as wide as the widest row's).
  int64_t n_max = 0;
  for (const int64_t p : positions) n_max = std::max(n_max, (p + 1) / m);
  const int64_t k_all = std::min(k, n_max);
  std::vector<int32_t> picks(b * k_all, -1);
  for (int64_t i = 0; i < b; ++i) {
    std::vector<int32_t> order((positions[i] + 1) / m);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng.engine());
    for (int64_t j = 0; j < std::min<int64_t>(k_all, order.size()); ++j)
      picks[i * k_all + j] = order[j];
  }
  std::vector<int32_t> ids(c);
  std::iota(ids.begin(), ids.end(), 0);
  const Tensor all_ids = on_device(device, host_values(DType::kI32, {1, c}, ids));
  const Tensor pos = on_device(device, host_values(DType::kI64, {b}, positions));
  const Tensor window_rows = on_device(device, host_values(DType::kI32, {b, w}, window));
  const Tensor pick_rows = on_device(device, host_values(DType::kI32, {b, k_all}, picks));
  const Tensor rings_at = address_table(device, rings), entries_at = address_table(device, entries);

  Tensor batched = on_device(device, Tensor::host(DType::kF32, {b, h, dh}));
  kernels::SparseAttentionParams all;
  all.q = q.view();
  all.kv = rings[0].view();
  all.kv_addresses = rings_at.view();
  all.indices = window_rows.view();
  all.extra_kv = entries[0].view().rows(0, n_max);
  all.extra_addresses = entries_at.view();
  all.row_positions = pos.view();
  all.extra_ratio = m;
  all.extra_indices =
      causal ? all_ids.view().reshaped({c}).rows(0, n_max).reshaped({1, n_max}) : pick_rows.view();
  if (causal) all.extra_positions = pos.view();
  all.sinks = sinks.view();
  all.scale = 0.125f;
  all.out = batched.view();
  ASSERT_TRUE(op(all).ok());

  for (int64_t i = 0; i < b; ++i) {
    SCOPED_TRACE("row " + std::to_string(i) + " at position " + std::to_string(positions[i]));
    const int64_t n = (positions[i] + 1) / m;
    const int64_t k_own = std::min(k_all, n);
    const Tensor own_picks =
        on_device(device, host_values(DType::kI32, {1, k_own},
                                      std::vector<int32_t>(picks.begin() + i * k_all,
                                                           picks.begin() + i * k_all + k_own)));
    Tensor alone = on_device(device, Tensor::host(DType::kF32, {1, h, dh}));
    kernels::SparseAttentionParams one;
    one.q = q.view().rows(i, i + 1);
    one.kv = rings[i].view();
    one.indices = window_rows.view().rows(i, i + 1);
    if (n > 0) {
      one.extra_kv = entries[i].view().rows(0, n);
      one.extra_indices =
          causal ? all_ids.view().reshaped({c}).rows(0, n).reshaped({1, n}) : own_picks.view();
      if (causal) {
        one.extra_positions = pos.view().rows(i, i + 1);
        one.extra_ratio = m;
      }
    }
    one.sinks = sinks.view();
    one.scale = 0.125f;
    one.out = alone.view();
    ASSERT_TRUE(op(one).ok());
    EXPECT_TRUE(same_bits(alone.view(), batched.view().rows(i, i + 1)));
  }
}

inline void expect_indexer_rows_match_single_calls(Device device,
                                                   IndexerOp op = kernels::indexer_scores) {
  SeededRng rng;
  const int64_t hi = 4, di = 32, c = 12, m = 4, k = 5;
  const std::vector<int64_t> positions = decode_positions(rng, m, c);
  const auto b = static_cast<int64_t>(positions.size());
  std::vector<Tensor> keys;
  for (int64_t i = 0; i < b; ++i) keys.push_back(on_device(device, random_host(rng, {c, di})));
  const Tensor q = on_device(device, random_host(rng, {b, hi, di}));
  const Tensor weights = on_device(device, random_host(rng, {b, hi}));
  const Tensor pos = on_device(device, host_values(DType::kI64, {b}, positions));
  const Tensor keys_at = address_table(device, keys);
  int64_t n_max = 0;
  for (const int64_t p : positions) n_max = std::max(n_max, (p + 1) / m);
  Tensor scores = on_device(device, Tensor::host(DType::kF32, {b, n_max}));
  kernels::IndexerScoreParams all;
  all.q = q.view();
  all.keys = TensorView::contiguous(nullptr, DType::kF32, device, {n_max, di});
  all.weights = weights.view();
  all.q_scale = 0.25f;
  all.weight_scale = 0.5f;
  all.scores = scores.view();
  all.key_addresses = keys_at.view();
  all.key_positions = pos.view();
  all.key_ratio = m;
  ASSERT_TRUE(op(all).ok());
  const int64_t k_all = std::min(k, n_max);
  Tensor picks = on_device(device, Tensor::host(DType::kI32, {b, k_all}));
  ASSERT_TRUE(kernels::topk(scores.view(), pos.view(), m, picks.view()).ok());
  const Tensor got_scores = on_host(scores.view()), got_picks = on_host(picks.view());

  for (int64_t i = 0; i < b; ++i) {
    SCOPED_TRACE("row " + std::to_string(i) + " at position " + std::to_string(positions[i]));
    const int64_t n = (positions[i] + 1) / m;
    if (n == 0) {
      for (int64_t j = 0; j < k_all; ++j)
        EXPECT_EQ(got_picks.data_as<int32_t>()[i * k_all + j], -1);
      continue;
    }
    Tensor own = on_device(device, Tensor::host(DType::kF32, {1, n}));
    kernels::IndexerScoreParams one = all;
    one.q = q.view().rows(i, i + 1);
    one.keys = keys[i].view().rows(0, n);
    one.weights = weights.view().rows(i, i + 1);
    one.scores = own.view();
    one.key_addresses = one.key_positions = TensorView{};
    ASSERT_TRUE(op(one).ok());
    Tensor own_picks = on_device(device, Tensor::host(DType::kI32, {1, std::min(k, n)}));
    ASSERT_TRUE(kernels::topk(own.view(), TensorView{}, own_picks.view()).ok());
    const Tensor want = on_host(own.view()), want_picks = on_host(own_picks.view());
    EXPECT_TRUE(std::equal(want.data_as<float>(), want.data_as<float>() + n,
                           got_scores.data_as<float>() + i * n_max,
                           [](float x, float y) { return std::memcmp(&x, &y, 4) == 0; }));
    for (int64_t j = 0; j < k_all; ++j) {
      const int32_t expected = j < want_picks.numel() ? want_picks.data_as<int32_t>()[j] : -1;
      EXPECT_EQ(got_picks.data_as<int32_t>()[i * k_all + j], expected) << "pick " << j;
    }
  }
}

// compressor_decode against the one-token compressor step written with the plain ops (copies,
// compressor_pool, rms_norm_rope) on each row's own buffers; window_write against row copies.
// A compressor's random weights and its rotary frequencies: what a check's batched call and
// its one-row twins share.
struct CompressorWeights {
  Tensor ape, norm, inv_freq;
  bool overlap = false;

  // The weights' parameters, with the rows to feed and their sequences' buffers set: new kv and
  // gate rows [n, rw], address tables [n] of the kept rows, gates and entries, positions [n].
  kernels::CompressorDecodeParams params(const TensorView& kv, const TensorView& gate,
                                         const TensorView& kv_rows, const TensorView& gate_rows,
                                         const TensorView& entries,
                                         const TensorView& positions) const {
    kernels::CompressorDecodeParams p;
    p.kv = kv;
    p.gate = gate;
    p.kv_rows = kv_rows;
    p.gate_rows = gate_rows;
    p.entries = entries;
    p.positions = positions;
    p.ape = ape.view();
    p.overlap = overlap;
    p.norm_weight = norm.view();
    p.eps = 1e-6f;
    p.inv_freq = inv_freq.view();
    return p;
  }
};

// Ratio m, entry width d, `pairs` rotary pairs at 10000^(-i / pairs).
inline CompressorWeights random_compressor_weights(Device device, SeededRng& rng, int64_t m,
                                                   int64_t d, int64_t pairs, bool overlap) {
  std::vector<float> freq(pairs);
  for (int64_t i = 0; i < pairs; ++i)
    freq[i] = static_cast<float>(std::pow(10000.0, -double(i) / pairs));
  CompressorWeights w;
  w.ape = on_device(device, random_host(rng, {m, (overlap ? 2 : 1) * d}));
  w.norm = on_device(device, random_host(rng, {d}));
  w.inv_freq = on_device(device, host_values(DType::kF32, {pairs}, freq));
  w.overlap = overlap;
  return w;
}

inline void expect_compressor_decode_matches(Device device, bool overlap) {
  SeededRng rng;
  const int64_t m = 4, d = 16, c = 8, halves = overlap ? 2 : 1, r = 11, dh = 24, pairs = 4;
  const std::vector<int64_t> positions = decode_positions(rng, m, c);
  const auto b = static_cast<int64_t>(positions.size());
  const Tensor pos = on_device(device, host_values(DType::kI64, {b}, positions));
  const Tensor new_kv = on_device(device, random_host(rng, {b, halves * d}));
  const Tensor new_gate = on_device(device, random_host(rng, {b, halves * d}));
  const CompressorWeights w = random_compressor_weights(device, rng, m, d, pairs, overlap);
  const Tensor new_rows = on_device(device, random_host(rng, {b, dh}));
  std::vector<Tensor> kv[2], gate[2], entries[2], rings[2];  // batched, alone
  for (int64_t i = 0; i < b; ++i) {
    const Tensor kv_host = random_host(rng, {2 * m, halves * d});
    const Tensor gate_host = random_host(rng, {2 * m, halves * d});
    const Tensor entries_host = random_host(rng, {c, d}), ring_host = random_host(rng, {r, dh});
    for (int side = 0; side < 2; ++side) {
      kv[side].push_back(on_device(device, kv_host));
      gate[side].push_back(on_device(device, gate_host));
      entries[side].push_back(on_device(device, entries_host));
      rings[side].push_back(on_device(device, ring_host));
    }
  }
  const Tensor kv_at = address_table(device, kv[0]), gate_at = address_table(device, gate[0]);
  const Tensor entries_at = address_table(device, entries[0]);
  const Tensor rings_at = address_table(device, rings[0]);
  ASSERT_TRUE(kernels::compressor_decode(w.params(new_kv.view(), new_gate.view(), kv_at.view(),
                                                  gate_at.view(), entries_at.view(), pos.view()))
                  .ok());
  ASSERT_TRUE(kernels::window_write(new_rows.view(), rings_at.view(), r, pos.view()).ok());

  for (int64_t i = 0; i < b; ++i) {
    SCOPED_TRACE("row " + std::to_string(i) + " at position " + std::to_string(positions[i]));
    const kernels::CompressorDecodeSlot at =
        kernels::compressor_decode_slot(positions[i], m, overlap);
    const TensorView own_kv = kv[1][i].view(), own_gate = gate[1][i].view();
    ASSERT_TRUE(copy_tensor(own_kv.rows(at.row, at.row + 1), new_kv.view().rows(i, i + 1)).ok());
    ASSERT_TRUE(
        copy_tensor(own_gate.rows(at.row, at.row + 1), new_gate.view().rows(i, i + 1)).ok());
    if (at.pools) {
      const TensorView entry = entries[1][i].view().rows(at.entry, at.entry + 1);
      kernels::CompressorPoolParams pool;
      pool.kv = own_kv.rows(0, at.row + 1);
      pool.gate = own_gate.rows(0, at.row + 1);
      pool.ape = w.ape.view();
      pool.overlap = overlap;
      pool.out = entry;
      ASSERT_TRUE(kernels::compressor_pool(pool).ok());
      const Tensor first =
          on_device(device, host_values(DType::kI64, {1}, std::vector<int64_t>{at.entry * m}));
      ASSERT_TRUE(
          kernels::rms_norm_rope(entry, w.norm.view(), 1e-6f, first.view(), w.inv_freq.view()).ok());
      if (overlap) {
        ASSERT_TRUE(
            copy_tensor(own_kv.rows(0, m), on_device(device, on_host(own_kv.rows(m, 2 * m))).view())
                .ok());
        ASSERT_TRUE(copy_tensor(own_gate.rows(0, m),
                                on_device(device, on_host(own_gate.rows(m, 2 * m))).view())
                        .ok());
      }
    }
    const int64_t slot = positions[i] % r;
    ASSERT_TRUE(
        copy_tensor(rings[1][i].view().rows(slot, slot + 1), new_rows.view().rows(i, i + 1)).ok());
    EXPECT_TRUE(same_bits(kv[0][i].view(), own_kv)) << "kept rows";
    EXPECT_TRUE(same_bits(gate[0][i].view(), own_gate)) << "kept gates";
    EXPECT_TRUE(same_bits(entries[0][i].view(), entries[1][i].view())) << "entries";
    EXPECT_TRUE(same_bits(rings[0][i].view(), rings[1][i].view())) << "window ring";
  }
}

// Both kinds of compressed attention: CSA's picks and HCA's every entry so far.
inline void expect_decode_attention_rows_match_single_calls(
    Device device, AttentionOp op = kernels::sparse_attention) {
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "HCA: every entry so far" : "CSA: picks");
    expect_decode_attention_rows_match(device, causal, op);
  }
}

inline void expect_compressor_decode_matches_plain_ops(Device device) {
  for (const bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "CSA" : "HCA");
    expect_compressor_decode_matches(device, overlap);
  }
}

// Runs (a sequence's consecutive rows, a verify step's token and drafts) against the same rows
// fed one call a row: the same kept rows and entries; and a run that pools a block journals
// its stream (the kept rows before it, then its own), one that pools none leaves its journal.
inline void expect_compressor_decode_runs_match(Device device, bool overlap) {
  SeededRng rng;
  const int64_t m = 2, d = 16, c = 8, halves = overlap ? 2 : 1, pairs = 4, rw = halves * d;
  const int64_t n_lead = overlap ? m : 0, n_journal = n_lead + m + 5;
  // Runs of 1 to 5 rows from positions before, at and between pool steps (m = 2: a run of 5
  // pools twice; the last run pools none).
  const std::vector<int64_t> starts = {0, 1, 2, 5, 6, 9, 12}, lengths = {3, 1, 5, 2, 4, 5, 1};
  std::vector<int64_t> positions, run_of;
  for (size_t s = 0; s < starts.size(); ++s) {
    for (int64_t j = 0; j < lengths[s]; ++j) {
      positions.push_back(starts[s] + j);
      run_of.push_back(static_cast<int64_t>(s));
    }
  }
  const auto n_rows = static_cast<int64_t>(positions.size());
  const auto n_runs = static_cast<int64_t>(starts.size());
  const Tensor new_kv = on_device(device, random_host(rng, {n_rows, rw}));
  const Tensor new_gate = on_device(device, random_host(rng, {n_rows, rw}));
  const CompressorWeights w = random_compressor_weights(device, rng, m, d, pairs, overlap);
  std::vector<Tensor> kv[2], gate[2], entries[2], kv_journal, gate_journal, kept_kv, kept_gate;
  for (int64_t s = 0; s < n_runs; ++s) {
    Tensor kv_host = random_host(rng, {2 * m, rw}), gate_host = random_host(rng, {2 * m, rw});
    const Tensor entries_host = random_host(rng, {c, d});
    for (int side = 0; side < 2; ++side) {
      kv[side].push_back(on_device(device, kv_host));
      gate[side].push_back(on_device(device, gate_host));
      entries[side].push_back(on_device(device, entries_host));
    }
    kept_kv.push_back(std::move(kv_host));
    kept_gate.push_back(std::move(gate_host));
    kv_journal.push_back(on_device(device, random_host(rng, {n_journal, rw})));
    gate_journal.push_back(on_device(device, random_host(rng, {n_journal, rw})));
  }
  // i64 [n]: buffers[i]'s address for each run of `runs`.
  const auto at = [&](const std::vector<Tensor>& buffers, const std::vector<int64_t>& runs) {
    std::vector<int64_t> a;
    for (const int64_t s : runs) a.push_back(reinterpret_cast<intptr_t>(buffers[s].view().data));
    return on_device(device, host_values(DType::kI64, {int64_t(a.size())}, a));
  };
  const Tensor kv_at = at(kv[0], run_of), gate_at = at(gate[0], run_of);
  const Tensor entries_at = at(entries[0], run_of);
  const Tensor kv_journal_at = at(kv_journal, run_of), gate_journal_at = at(gate_journal, run_of);
  const Tensor pos = on_device(device, host_values(DType::kI64, {n_rows}, positions));
  kernels::CompressorDecodeParams all = w.params(new_kv.view(), new_gate.view(), kv_at.view(),
                                                 gate_at.view(), entries_at.view(), pos.view());
  all.kv_journal = kv_journal_at.view();
  all.gate_journal = gate_journal_at.view();
  std::vector<Tensor> journals_before;
  for (const Tensor& journal : kv_journal) journals_before.push_back(on_host(journal.view()));
  ASSERT_TRUE(kernels::compressor_decode(all).ok());

  int64_t row = 0;
  for (int64_t s = 0; s < n_runs; ++s) {
    SCOPED_TRACE("run " + std::to_string(s) + " from position " + std::to_string(starts[s]));
    const Tensor& journal_before = journals_before[s];
    bool pools = false;
    for (int64_t j = 0; j < lengths[s]; ++j, ++row) {
      pools = pools || kernels::compressor_decode_slot(positions[row], m, overlap).pools;
      const Tensor one_kv = at(kv[1], {s}), one_gate = at(gate[1], {s});
      const Tensor one_entries = at(entries[1], {s});
      const Tensor one_pos =
          on_device(device, host_values(DType::kI64, {1}, std::vector<int64_t>{positions[row]}));
      ASSERT_TRUE(kernels::compressor_decode(
                      w.params(new_kv.view().rows(row, row + 1), new_gate.view().rows(row, row + 1),
                               one_kv.view(), one_gate.view(), one_entries.view(), one_pos.view()))
                      .ok());
    }
    EXPECT_TRUE(same_bits(kv[0][s].view(), kv[1][s].view())) << "kept rows";
    EXPECT_TRUE(same_bits(gate[0][s].view(), gate[1][s].view())) << "kept gates";
    EXPECT_TRUE(same_bits(entries[0][s].view(), entries[1][s].view())) << "entries";
    // The journal: untouched without a pool, else the kept rows before the run, then its rows.
    const Tensor journal = on_host(kv_journal[s].view());
    if (!pools) {
      EXPECT_TRUE(same_bits(journal.view(), journal_before.view())) << "journal";
      continue;
    }
    const int64_t n_kept = kernels::compressor_decode_slot(starts[s], m, overlap).row;
    const Tensor new_host = on_host(new_kv.view().rows(row - lengths[s], row));
    EXPECT_TRUE(same_bits(journal.view().rows(0, n_kept), kept_kv[s].view().rows(0, n_kept)))
        << "journal's kept rows";
    EXPECT_TRUE(same_bits(journal.view().rows(n_kept, n_kept + lengths[s]), new_host.view()))
        << "journal's new rows";
    const Tensor gates = on_host(gate_journal[s].view());
    EXPECT_TRUE(same_bits(gates.view().rows(0, n_kept), kept_gate[s].view().rows(0, n_kept)))
        << "journal's kept gates";
  }
}

inline void expect_compressor_decode_runs_match_row_by_row(Device device) {
  for (const bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "CSA" : "HCA");
    expect_compressor_decode_runs_match(device, overlap);
  }
}

}  // namespace dsv4::testing
