// cuda::quantize_activation_fp8 and cuda::linear_fp8 (cuda_ops.h). The quantizer is
// bit-identical to cpu::quantize_activation_fp8: the scale comes from the same bits
// (kernels/fp8_scale.h), the division is IEEE (no fast math), the max is exact and order-free,
// and the hardware's e4m3 conversion (cvt.rn.satfinite) rounds to nearest even and saturates
// as float_to_e4m3 does. The GEMM, plain or block-diagonal (one launch for all groups), asks
// gemm/fp8/plan.cpp for its kernel.
//
// Dimension letters: T tokens, N output features, K input features, Kb = ceil(K/128).
#include <cuda_fp8.h>

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/gemm/fp8/launch.h"
#include "kernels/cuda/stream.h"
#include "kernels/fp8_operands.h"
#include "kernels/fp8_scale.h"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kQuantizeWarps = 8;  // a block: 8 groups of 128 columns, a warp each

// Warp w of block b quantizes group (row, j) = divmod(8 b + w, Kb); lane l its columns
// 128 j + l + 32 i, i < 4 (coalesced; the group's max is a warp reduction).
__global__ void __launch_bounds__(kQuantizeWarps * 32)
    quantize_activation_fp8_kernel(RowMatrix x, uint8_t* values, float* scales, int64_t n_groups) {
  const int64_t group = int64_t{blockIdx.x} * kQuantizeWarps + threadIdx.x / 32;
  if (group >= x.n_rows * n_groups) return;
  const int64_t t = group / n_groups, k0 = (group % n_groups) * format::kFp8ActivationGroup;
  const int lane = threadIdx.x % 32;
  const float* row = x.data + t * x.row_stride;
  float v[4];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t k = k0 + lane + 32 * i;
    v[i] = k < x.n_cols ? row[k] : 0.0f;
    amax = fmaxf(amax, fabsf(v[i]));
  }
  amax = warp_reduce(amax, MaxOp());
  const float scale = fp8_activation_scale(amax);
  if (lane == 0) scales[group] = scale;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t k = k0 + lane + 32 * i;
    if (k < x.n_cols) {
      values[t * x.n_cols + k] = __nv_cvt_float_to_fp8(v[i] / scale, __NV_SATFINITE, __NV_E4M3);
    }
  }
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
  const Fp8QuantizeOperands o = fp8_quantize_operands(x, out);
  const int64_t n_groups = fp8_groups(o.x.n_cols), n_units = o.x.n_rows * n_groups;
  if (n_units == 0) return;
  quantize_activation_fp8_kernel<<<static_cast<unsigned>(ceil_div(n_units, kQuantizeWarps)),
                                   kQuantizeWarps * 32, 0, op_stream()>>>(
      o.x, const_cast<uint8_t*>(o.out.values), const_cast<float*>(o.out.scales), n_groups);
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
