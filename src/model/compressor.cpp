// The rows the compressor keeps are block-aligned (see attention_cache.h), so one step is:
// stream = [kept rows | projections of the new tokens], pool every complete window of the
// stream, keep its tail. On CSA the kept rows start with the previous full block, whose A halves
// window 0 of the stream needs; transformers keeps only those halves (overlap_kv), we keep the
// whole rows so that one pooling op serves the first and the later windows alike.
#include "model/compressor.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/linear.h"
#include "model/upload.h"

namespace dsv4::model {

namespace {

// Whether row t continues the run of the row before (kernels/ops.h: the same cache, the next
// position), and the rows of the run from row t.
bool continues_run(std::span<CompressorCache* const> caches, std::span<const int64_t> positions,
                   size_t t) {
  return t > 0 && caches[t - 1] == caches[t] && positions[t] == positions[t - 1] + 1;
}
int64_t run_rows(std::span<CompressorCache* const> caches, std::span<const int64_t> positions,
                 size_t t) {
  size_t end = t + 1;
  while (end < caches.size() && continues_run(caches, positions, end)) ++end;
  return static_cast<int64_t>(end - t);
}

// Normalizes and rotates entries [first, first + n) in place: RoPE at position (entry · m),
// the block's first token.
Status finish_entries(const checkpoint::CompressorWeights& weights, const TensorView& inv_freq,
                      float eps, int64_t first, int64_t n, CompressorCache& cache) {
  const TensorView entries = cache.entries.view().rows(first, first + n);  // [n, d]
  std::vector<int64_t> positions(n);
  for (int64_t w = 0; w < n; ++w) positions[w] = (first + w) * cache.ratio;
  DSV4_ASSIGN_OR_RETURN(Tensor position_tensor, upload(positions, {n}, entries.device));
  return kernels::rms_norm_rope(entries, weights.norm.view(), eps, position_tensor.view(),
                                inv_freq);
}

// The new rows' projections into kv and gate (rows [n_kept, n_stream) of the stream), projected
// here or copied from a step's projections.
Status write_new_rows(const checkpoint::CompressorWeights& weights, const CompressorInput& input,
                      const TensorView& kv, const TensorView& gate) {
  if (input.kv.data == nullptr) {
    DSV4_RETURN_IF_ERROR(linear(input.x, weights.wkv, kv, input.numerics));
    return linear(input.x, weights.wgate, gate, input.numerics);
  }
  DSV4_CHECK(input.kv.shape == kv.shape && input.gate.shape == gate.shape,
             "compressor_forward: projected rows of another shape");
  DSV4_RETURN_IF_ERROR(copy_tensor(kv, input.kv));
  return copy_tensor(gate, input.gate);
}

}  // namespace

Result<CompressorRows> project_compressor_rows(const checkpoint::CompressorWeights& weights,
                                               const TensorView& x, Numerics numerics) {
  const Shape shape{x.size(0), weights.wkv.shape()[0]};
  CompressorRows rows;
  DSV4_ASSIGN_OR_RETURN(rows.kv, Tensor::empty(DType::kF32, shape, x.device));
  DSV4_ASSIGN_OR_RETURN(rows.gate, Tensor::empty(DType::kF32, shape, x.device));
  DSV4_RETURN_IF_ERROR(
      write_new_rows(weights, {x, {}, {}, numerics}, rows.kv.view(), rows.gate.view()));
  return rows;
}

Status compressor_forward(const checkpoint::CompressorWeights& weights,
                          const CompressorInput& input, const TensorView& inv_freq, float eps,
                          CompressorCache& cache) {
  const TensorView& x = input.x;
  const int64_t n_tokens = input.n_tokens();
  const int64_t n_kept = cache.n_rows;
  const int64_t n_stream = n_kept + n_tokens;
  const int64_t row_width = cache.kv.shape()[1];
  // A decode step's rows fit behind the kept ones (≤ 2m rows in all): the stream is the cache's
  // own rows. A longer step streams through a buffer holding the kept rows and the new.
  const bool in_place = n_stream <= cache.kv.shape()[0];
  Tensor kv_buffer, gate_buffer;
  TensorView kv = cache.kv.view().rows(0, std::min(n_stream, cache.kv.shape()[0]));
  TensorView gate = cache.gate.view().rows(0, kv.size(0));
  if (!in_place) {
    DSV4_ASSIGN_OR_RETURN(kv_buffer, Tensor::empty(DType::kF32, {n_stream, row_width}, x.device));
    DSV4_ASSIGN_OR_RETURN(gate_buffer, Tensor::empty(DType::kF32, {n_stream, row_width}, x.device));
    DSV4_RETURN_IF_ERROR(copy_tensor(kv_buffer.view().rows(0, n_kept), kv.rows(0, n_kept)));
    DSV4_RETURN_IF_ERROR(copy_tensor(gate_buffer.view().rows(0, n_kept), gate.rows(0, n_kept)));
    kv = kv_buffer.view();
    gate = gate_buffer.view();
  }
  DSV4_RETURN_IF_ERROR(
      write_new_rows(weights, input, kv.rows(n_kept, n_stream), gate.rows(n_kept, n_stream)));

  // CSA's first m stream rows are the previous block: they close no window of their own.
  const int64_t n_lead = cache.overlap ? cache.ratio : 0;
  const int64_t n_windows = (n_stream - n_lead) / cache.ratio;
  if (n_windows > 0) {
    const int64_t first = cache.n_entries;
    if (first + n_windows > cache.entries.shape()[0]) {
      return resource_exhausted("compressor: more than " +
                                std::to_string(cache.entries.shape()[0]) + " entries");
    }
    kernels::CompressorPoolParams pool;
    pool.kv = kv;
    pool.gate = gate;
    pool.ape = weights.ape.view();
    pool.overlap = cache.overlap;
    pool.out = cache.entries.view().rows(first, first + n_windows);
    DSV4_RETURN_IF_ERROR(kernels::compressor_pool(pool));
    DSV4_RETURN_IF_ERROR(finish_entries(weights, inv_freq, eps, first, n_windows, cache));
    cache.n_entries += n_windows;
  }
  if (cache.journal.armed) {
    cache.journal.n_fed += n_tokens;
    if (n_windows > 0) DSV4_RETURN_IF_ERROR(cache.journal.record(kv, gate));
  }
  // Keep the stream from the last pooled block on: (CSA) that block plus the partial one. In
  // place, they stay where they are when nothing was pooled; else they move to the front, from
  // rows ≥ m to rows < m, so the two ranges never overlap.
  const int64_t keep_from = n_windows * cache.ratio;
  cache.n_rows = n_stream - keep_from;
  if (in_place && keep_from == 0) return ok_status();
  DSV4_RETURN_IF_ERROR(
      copy_tensor(cache.kv.view().rows(0, cache.n_rows), kv.rows(keep_from, n_stream)));
  return copy_tensor(cache.gate.view().rows(0, cache.n_rows), gate.rows(keep_from, n_stream));
}

Status check_decode_slots(std::span<CompressorCache* const> caches,
                          std::span<const int64_t> positions) {
  DSV4_CHECK(caches.size() == positions.size(), "compressor decode rows: %zu caches for %zu rows",
             caches.size(), positions.size());
  const CompressorCache& first = *caches.front();
  for (size_t t = 0; t < caches.size(); ++t) {
    const CompressorCache& cache = *caches[t];
    const kernels::CompressorDecodeSlot at =
        kernels::compressor_decode_slot(positions[t], cache.ratio, cache.overlap);
    // A run's later rows follow its first (the cache's counts hold for that one only).
    const bool in_run = continues_run(caches, positions, t);
    DSV4_CHECK(cache.ratio == first.ratio && cache.overlap == first.overlap &&
                   (in_run || (cache.n_rows == at.row && cache.n_entries == at.entry)),
               "compressor_decode_rows: a cache of %lld rows and %lld entries at position %lld",
               (long long)cache.n_rows, (long long)cache.n_entries, (long long)positions[t]);
    if (at.pools && at.entry >= cache.entries.shape()[0]) {
      return resource_exhausted("compressor: more than " +
                                std::to_string(cache.entries.shape()[0]) + " entries");
    }
    // An armed cache's run that pools writes its stream to the journal.
    DSV4_CHECK(!cache.journal.armed || in_run ||
                   cache.journal.n_rows + run_rows(caches, positions, t) <=
                       cache.journal.kv.shape()[0],
               "compressor_decode_rows: a run of %lld rows past its journal",
               (long long)run_rows(caches, positions, t));
  }
  return ok_status();
}

void advance_decode_slots(std::span<CompressorCache* const> caches,
                          std::span<const int64_t> positions) {
  // The host's counts follow the device's: compressor_forward's for one token, row by row.
  for (size_t t = 0; t < caches.size(); ++t) {
    CompressorCache& cache = *caches[t];
    const kernels::CompressorDecodeSlot at =
        kernels::compressor_decode_slot(positions[t], cache.ratio, cache.overlap);
    cache.n_rows = at.pools ? at.row + 1 - cache.ratio : at.row + 1;
    cache.n_entries += at.pools ? 1 : 0;
    if (!cache.journal.armed) continue;
    ++cache.journal.n_fed;
    cache.journal.pooled = cache.journal.pooled || at.pools;
  }
}

Status compressor_decode_rows(const checkpoint::CompressorWeights& weights,
                              const CompressorDecodeRows& rows, const TensorView& inv_freq,
                              float eps) {
  DSV4_CHECK(!rows.caches.empty(), "compressor_decode_rows: no rows");
  // Every check before the launch, so that a refused step leaves every cache as it was.
  DSV4_RETURN_IF_ERROR(check_decode_slots(rows.caches, rows.host_positions));
  const CompressorCache& first = *rows.caches.front();
  kernels::CompressorDecodeParams p;
  p.kv = rows.kv;
  p.gate = rows.gate;
  p.kv_rows = rows.kv_rows;
  p.gate_rows = rows.gate_rows;
  p.entries = rows.entries;
  p.positions = rows.positions;
  p.ape = weights.ape.view();
  p.overlap = first.overlap;
  p.norm_weight = weights.norm.view();
  p.eps = eps;
  p.inv_freq = inv_freq;
  p.kv_journal = rows.kv_journal;
  p.gate_journal = rows.gate_journal;
  DSV4_RETURN_IF_ERROR(kernels::compressor_decode(p));
  advance_decode_slots(rows.caches, rows.host_positions);
  return ok_status();
}

}  // namespace dsv4::model
