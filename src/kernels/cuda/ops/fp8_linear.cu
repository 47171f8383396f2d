// cuda::quantize_activation_fp8 and cuda::linear_fp8 (cuda_ops.h). The quantizer is
// bit-identical to cpu::quantize_activation_fp8 (device/fp8_quantize.cuh says why). The GEMM,
// plain or block-diagonal (one launch for all groups), asks gemm/fp8/plan.cpp for its kernel.
//
// Dimension letters: T tokens, N output features, K input features, Kb = ceil(K/128).
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/fp8_quantize.cuh"
#include "kernels/cuda/gemm/fp8/launch.h"
#include "kernels/cuda/stream.h"
#include "kernels/fp8_operands.h"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kQuantizeWarps = 8;  // a block: 8 groups of 128 columns, a warp each

// Warp w of block b quantizes group (row, j) = divmod(8 b + w, Kb); lane l its columns
// 128 j + l + 32 i, i < 4 (coalesced; the group's max is a warp reduction).
__global__ void __launch_bounds__(kQuantizeWarps * 32)
    quantize_activation_fp8_kernel(RowMatrix x, Fp8Out out, int64_t n_groups) {
  const int64_t group = int64_t{blockIdx.x} * kQuantizeWarps + threadIdx.x / 32;
  if (group >= x.n_rows * n_groups) return;
  const int64_t t = group / n_groups, j = group % n_groups, k0 = j * kFp8Group;
  const int lane = threadIdx.x % 32;
  const float* row = x.data + t * x.row_stride;
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t k = k0 + lane + 32 * i;
    v[i] = k < x.n_cols ? row[k] : 0.0f;
  }
  fp8_store_warp_group(v, k0, x.n_cols, out.row_codes(t), out.row_scales(t) + j);
}

// The GEMM of checked operands, G groups block-diagonally (gemm/fp8/params.h), on the kernel
// gemm/fp8/plan.cpp picks for the N = G·R shape; w's K is one group's.
Status run_fp8_gemm(const Fp8LinearOperands& o, int64_t n_groups, const char* what) {
  sm90::Fp8GemmParams p;
  p.a = o.a.values;
  p.a_scales = o.a.scales;
  p.b = o.w.values;
  p.b_scales = o.w.block_scales;
  p.ldb = o.w.row_stride;
  p.d = o.y.data;
  p.ldd = o.y.row_stride;
  p.m = o.a.n_rows;
  p.n = o.w.n_rows;
  p.k = o.w.n_cols;
  p.n_groups = n_groups;
  if (p.m == 0 || p.n == 0) return ok_status();
  if (p.k % 16 != 0 || p.ldb % 16 != 0 || reinterpret_cast<uintptr_t>(p.b) % 16 != 0) {
    return unimplemented(std::string(what) +
                         ": the CUDA kernels need K, w's row stride and w's address "
                         "to be multiples of 16, got K " +
                         std::to_string(p.k) + ", stride " + std::to_string(p.ldb));
  }
  sm90::launch_fp8_gemm(p, sm90::plan_for(p));
  return ok_status();
}

}  // namespace

void quantize_activation_fp8(const TensorView& x, const Fp8Activation& out) {
  const Fp8Out to = fp8_out(x, out);
  const RowMatrix rows = as_rows(x, "quantize_activation_fp8 x");
  const int64_t n_groups = fp8_groups(rows.n_cols), n_units = rows.n_rows * n_groups;
  if (n_units == 0) return;
  quantize_activation_fp8_kernel<<<static_cast<unsigned>(ceil_div(n_units, kQuantizeWarps)),
                                   kQuantizeWarps * 32, 0, op_stream()>>>(rows, to, n_groups);
  check_launch();
}

Status linear_fp8(const Fp8Activation& a, const format::Fp8BlockView& w, const TensorView& y) {
  return run_fp8_gemm(fp8_linear_operands(a, w, y), 1, "linear_fp8");
}

Status block_diagonal_linear_fp8(const Fp8Activation& a, const format::Fp8BlockView& w,
                                 int64_t n_groups, const TensorView& y) {
  return run_fp8_gemm(fp8_block_diagonal_operands(a, w, n_groups, y), n_groups,
                      "block_diagonal_linear_fp8");
}

}  // namespace dsv4::kernels::cuda
