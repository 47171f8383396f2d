// cuda::linear: y[T, N] = x[T, K] · w[N, K]ᵀ in f32 (and block_diagonal_linear, G such products
// side by side in one call), by the kernel gemm/dense/plan.cpp picks from the call's shape: a
// bf16 weight runs on the tensor cores with many rows of x (linear_tensor_cores.cu) and with 2-16
// (linear_few_rows_tensor_cores.cu), both exact to f32 by a three-way bf16 split of x; the rest on
// the CUDA cores (linear_cuda_cores.cu: a tiled SGEMM for many rows, a few-rows kernel for decode;
// linear_narrow.cu for many rows of ≤ 64 outputs, with the few-rows kernel's bits).
// The weight is f32 or bf16 (a device keeps a bf16 checkpoint's linear weights in bf16, half the
// bytes a decode step streams: checkpoint/to_device.h), or an FP8 checkpoint's e4m3 with its
// block scales, which every kernel decodes to the bf16 it would have read (a quarter of f32's
// bytes; same kernels, same bits). Not batch-invariant across the kernels: a
// row's sum order depends on which one the call's shape picks (each alone is: a few-rows block
// treats its ≤ 8 tokens alike, a tensor-core tile its 128).
// No TF32 and no float atomics: the forward must match transformers' fp32 reference to 1e-4 per
// row (TF32's 10-bit mantissa alone costs ~1e-3), and a fixed order per output makes the result
// deterministic. (cuBLAS would be faster, but this toolkit ships only its shared libraries, and
// every dsv4 binary links the kernels statically so that it runs on the device machine as built.)
//
// Dimension letters: T tokens (rows of x), N output features (rows of w), K input features.
#include "kernels/contracts.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm/dense/launch.h"

namespace dsv4::kernels::cuda {
namespace {

void run(const LinearOperands& o, int64_t n_groups) {
  launch_dense(o, n_groups, plan_for(o, n_groups));
}

}  // namespace

void linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  run(linear_operands(x, w, y), 1);
}

void block_diagonal_linear(const TensorView& x, const TensorView& w, int64_t n_groups,
                           const TensorView& y) {
  run(block_diagonal_operands(x, w, n_groups, y), n_groups);
}

void linear(const TensorView& x, const format::Fp8BlockView& w, const TensorView& y) {
  run(linear_operands(x, w, y), 1);
}

void block_diagonal_linear(const TensorView& x, const format::Fp8BlockView& w, int64_t n_groups,
                           const TensorView& y) {
  run(block_diagonal_operands(x, w, n_groups, y), n_groups);
}

}  // namespace dsv4::kernels::cuda
