// cuda::compressor_pool: the KV compressor's gated softmax pooling, one thread per (entry,
// dim), over the window's slots in the CPU's order (kernels/cpu/compressor.cpp explains the
// slot layout). The exponentials are recomputed instead of stored, which gives the same values.
//
// Dimension letters: S rows, m compress ratio, c halves, d entry width, n entries.
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/ops/compressor_pool.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

__global__ void compressor_pool_kernel(PoolArgs a) {
  const int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (idx >= a.n_entries * a.width) return;
  a.out[idx] = pool_element(a, idx / a.width, idx % a.width);
}

}  // namespace

void compressor_pool(const CompressorPoolParams& p) {
  const auto [width, n_halves, ratio, n_rows, n_entries] = compressor_pool_dims(p);
  const PoolArgs a{p.kv.data_as<const float>(),
                   p.gate.data_as<const float>(),
                   p.ape.data_as<const float>(),
                   ratio,
                   n_halves,
                   width,
                   n_entries,
                   p.out.data_as<float>()};
  if (n_entries * width == 0) return;
  compressor_pool_kernel<<<element_blocks(n_entries * width), kElementThreads, 0, op_stream()>>>(a);
  check_launch();
}

}  // namespace dsv4::kernels::cuda
