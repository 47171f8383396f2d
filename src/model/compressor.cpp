// The rows the compressor keeps are block-aligned (see attention_cache.h), so one step is:
// stream = [kept rows | projections of the new tokens], pool every complete window of the
// stream, keep its tail. On CSA the kept rows start with the previous full block, whose A halves
// window 0 of the stream needs; transformers keeps only those halves (overlap_kv), we keep the
// whole rows so that one pooling op serves the first and the later windows alike.
#include "model/compressor.h"

#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/upload.h"

namespace dsv4::model {

namespace {

// Normalizes and rotates entries [first, first + n) in place: RoPE at position (entry · m),
// the block's first token.
Status finish_entries(const checkpoint::CompressorWeights& weights, const TensorView& inv_freq,
                      float eps, int64_t first, int64_t n, CompressorCache& cache) {
  const TensorView entries = cache.entries.view().rows(first, first + n);  // [n, d]
  DSV4_RETURN_IF_ERROR(kernels::rms_norm(entries, weights.norm.view(), eps, entries));
  std::vector<int64_t> positions(n);
  for (int64_t w = 0; w < n; ++w) positions[w] = (first + w) * cache.ratio;
  DSV4_ASSIGN_OR_RETURN(Tensor position_tensor, upload(positions, {n}, entries.device));
  return kernels::rope(entries, position_tensor.view(), inv_freq, kernels::RopeDirection::kForward);
}

}  // namespace

Status compressor_forward(const checkpoint::CompressorWeights& weights, const TensorView& x,
                          const TensorView& inv_freq, float eps, CompressorCache& cache) {
  const int64_t n_tokens = x.size(0);
  const int64_t n_kept = cache.n_rows;
  const int64_t n_stream = n_kept + n_tokens;
  const int64_t row_width = cache.kv.shape()[1];
  const Device device = x.device;
  DSV4_ASSIGN_OR_RETURN(Tensor kv, Tensor::empty(DType::kF32, {n_stream, row_width}, device));
  DSV4_ASSIGN_OR_RETURN(Tensor gate, Tensor::empty(DType::kF32, {n_stream, row_width}, device));
  DSV4_RETURN_IF_ERROR(copy_tensor(kv.view().rows(0, n_kept), cache.kv.view().rows(0, n_kept)));
  DSV4_RETURN_IF_ERROR(copy_tensor(gate.view().rows(0, n_kept), cache.gate.view().rows(0, n_kept)));
  DSV4_RETURN_IF_ERROR(kernels::linear(x, weights.wkv.view(), kv.view().rows(n_kept, n_stream)));
  DSV4_RETURN_IF_ERROR(
      kernels::linear(x, weights.wgate.view(), gate.view().rows(n_kept, n_stream)));

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
    pool.kv = kv.view();
    pool.gate = gate.view();
    pool.ape = weights.ape.view();
    pool.overlap = cache.overlap;
    pool.out = cache.entries.view().rows(first, first + n_windows);
    DSV4_RETURN_IF_ERROR(kernels::compressor_pool(pool));
    DSV4_RETURN_IF_ERROR(finish_entries(weights, inv_freq, eps, first, n_windows, cache));
    cache.n_entries += n_windows;
  }
  // Keep the stream from the last pooled block on: (CSA) that block plus the partial one.
  const int64_t keep_from = n_windows * cache.ratio;
  cache.n_rows = n_stream - keep_from;
  DSV4_RETURN_IF_ERROR(
      copy_tensor(cache.kv.view().rows(0, cache.n_rows), kv.view().rows(keep_from, n_stream)));
  return copy_tensor(cache.gate.view().rows(0, cache.n_rows),
                     gate.view().rows(keep_from, n_stream));
}

}  // namespace dsv4::model
