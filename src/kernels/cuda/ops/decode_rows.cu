// cuda::window_write and cuda::compressor_decode: the decode rows' cache writes (kernels/ops.h,
// "Decode rows"), one block a row (a run's: one block feeds a sequence's rows in order), each
// row's sequence's buffers reached through its address.
// compressor_decode's block does what a one-token compressor step does with the plain ops, with
// their arithmetic (pool_element, norm_rope_row: the same device code as compressor_pool's and
// rms_norm_rope's kernels, rms_norm_rope's block size), so each row gets the bits of those calls,
// in one launch for the whole step instead of up to five a sequence.
//
// Dimension letters: T rows, Dh head dim, R ring rows, m compress ratio, c halves, d entry width.
#include "kernels/contracts.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/ops/compressor_pool.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/ops/rope_row.cuh"

namespace dsv4::kernels::cuda {
namespace {

__global__ void window_write_kernel(WindowWriteOperands o) {
  const int64_t t = blockIdx.x;
  float* ring = reinterpret_cast<float*>(o.rings[t]);
  float* slot = ring + o.positions[t] % o.n_ring_rows * o.width;
  for (int64_t d = threadIdx.x; d < o.width; d += blockDim.x) slot[d] = o.rows[t * o.width + d];
}

// Row t into its sequence's compressor: the block's threads write its projections, then pool
// when it completes a block. Every thread takes the same branches (the row's slot), and the
// block is synchronised on return, so the next row of a run sees this one's writes.
__device__ void feed_row(const CompressorDecodeOperands& o, bool overlap, int64_t t) {
  const CompressorDecodeSlot at = compressor_decode_slot(o.positions[t], o.ratio, overlap);
  const int64_t row_width = o.n_halves * o.width;
  auto* kv = reinterpret_cast<float*>(o.kv_rows[t]);
  auto* gate = reinterpret_cast<float*>(o.gate_rows[t]);
  for (int64_t i = threadIdx.x; i < row_width; i += blockDim.x) {
    kv[at.row * row_width + i] = o.kv[t * row_width + i];
    gate[at.row * row_width + i] = o.gate[t * row_width + i];
  }
  __syncthreads();        // the new row written before the pooling (or the next row) reads it
  if (!at.pools) return;  // the same in the whole block
  float* entry = reinterpret_cast<float*>(o.entries[t]) + at.entry * o.width;
  const PoolArgs pool{kv, gate, o.ape, o.ratio, o.n_halves, o.width, 1, entry};
  for (int64_t i = threadIdx.x; i < o.width; i += blockDim.x) entry[i] = pool_element(pool, 0, i);
  __syncthreads();  // the entry pooled, and every kept row read, before the norm and the move
  norm_rope_row(entry, o.width, o.n_pairs, o.norm_weight, o.eps, at.entry * o.ratio, o.inv_freq);
  if (!overlap) return;  // nothing kept: the block was the only rows
  // The block just pooled is the next window's A halves: rows [m, 2m) to [0, m), disjoint.
  for (int64_t i = threadIdx.x; i < o.ratio * row_width; i += blockDim.x) {
    kv[i] = kv[o.ratio * row_width + i];
    gate[i] = gate[o.ratio * row_width + i];
  }
  __syncthreads();
}

// The run [t, end) of one sequence, n_kept rows kept before it: its stream into the journal
// when a row of it pools (kernels/ops.h), before any row is fed.
__device__ void journal_run(const CompressorDecodeOperands& o, bool overlap, int64_t t,
                            int64_t end, int64_t n_kept) {
  bool pools = false;
  for (int64_t r = t; r < end; ++r) {
    pools = pools || compressor_decode_slot(o.positions[r], o.ratio, overlap).pools;
  }
  if (!pools) return;
  const int64_t row_width = o.n_halves * o.width;
  const int64_t n_old = n_kept * row_width, n_all = n_old + (end - t) * row_width;
  const auto* kv = reinterpret_cast<const float*>(o.kv_rows[t]);
  const auto* gate = reinterpret_cast<const float*>(o.gate_rows[t]);
  auto* kv_journal = reinterpret_cast<float*>(o.kv_journal[t]);
  auto* gate_journal = reinterpret_cast<float*>(o.gate_journal[t]);
  for (int64_t i = threadIdx.x; i < n_all; i += blockDim.x) {
    kv_journal[i] = i < n_old ? kv[i] : o.kv[t * row_width + i - n_old];
    gate_journal[i] = i < n_old ? gate[i] : o.gate[t * row_width + i - n_old];
  }
  __syncthreads();  // the kept rows read before the first row overwrites any
}

// Whether row t continues the run of the row before (kernels/ops.h).
__device__ bool continues_run(const CompressorDecodeOperands& o, int64_t t) {
  return t > 0 && o.kv_rows[t - 1] == o.kv_rows[t] && o.positions[t] == o.positions[t - 1] + 1;
}

// One block a row; the block of a run's first row feeds the whole run in order, the others
// return (a sequence's rows change the same kept rows one after the other).
__global__ void __launch_bounds__(kRowThreads)
    compressor_decode_kernel(CompressorDecodeOperands o, bool overlap) {
  const int64_t t = blockIdx.x;
  if (continues_run(o, t)) return;  // its run's first row's block feeds it
  int64_t end = t + 1;
  while (end < o.n_rows && continues_run(o, end)) ++end;
  if (o.kv_journal != nullptr && o.kv_journal[t] != 0) {
    journal_run(o, overlap, t, end, compressor_decode_slot(o.positions[t], o.ratio, overlap).row);
  }
  for (int64_t r = t; r < end; ++r) feed_row(o, overlap, r);
}

}  // namespace

void window_write(const TensorView& rows, const TensorView& rings, int64_t n_ring_rows,
                  const TensorView& positions) {
  const WindowWriteOperands o = window_write_operands(rows, rings, n_ring_rows, positions);
  if (o.n_rows == 0) return;
  window_write_kernel<<<static_cast<unsigned>(o.n_rows), kRowThreads, 0, op_stream()>>>(o);
  check_launch();
}

void compressor_decode(const CompressorDecodeParams& p) {
  const CompressorDecodeOperands o = compressor_decode_operands(p);
  if (o.n_rows == 0) return;
  compressor_decode_kernel<<<static_cast<unsigned>(o.n_rows), kRowThreads, 0, op_stream()>>>(
      o, p.overlap);
  check_launch();
}

}  // namespace dsv4::kernels::cuda
