// cuda::window_write and cuda::compressor_decode: the decode rows' cache writes (kernels/ops.h,
// "Decode rows"), one block a row, each row's sequence's buffers reached through its address.
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

__global__ void __launch_bounds__(kRowThreads)
    compressor_decode_kernel(CompressorDecodeOperands o, bool overlap) {
  const int64_t t = blockIdx.x;
  const CompressorDecodeSlot at = compressor_decode_slot(o.positions[t], o.ratio, overlap);
  const int64_t row_width = o.n_halves * o.width;
  auto* kv = reinterpret_cast<float*>(o.kv_rows[t]);
  auto* gate = reinterpret_cast<float*>(o.gate_rows[t]);
  for (int64_t i = threadIdx.x; i < row_width; i += blockDim.x) {
    kv[at.row * row_width + i] = o.kv[t * row_width + i];
    gate[at.row * row_width + i] = o.gate[t * row_width + i];
  }
  if (!at.pools) return;  // the same in the whole block
  __syncthreads();        // the new row written before the pooling reads it
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
