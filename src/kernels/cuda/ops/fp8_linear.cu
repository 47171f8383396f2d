// cuda::quantize_activation_fp8 and cuda::linear_fp8 (cuda_ops.h). The quantizer is
// bit-identical to cpu::quantize_activation_fp8 (device/fp8_quantize.cuh says why). The GEMM asks
// gemm/fp8/plan.cpp for its kernel; at decode sizes that kernel quantizes an f32 activation
// itself, with the same device functions, so the fast profile's linear is one launch there.
//
// Dimension letters: T tokens, N output features, K input features, Kb = ceil(K/128).
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/fp8_quantize.cuh"
#include "kernels/cuda/gemm/fp8/config.h"
#include "kernels/cuda/gemm/fp8/launch.h"
#include "kernels/cuda/stream.h"
#include "kernels/fp8_operands.h"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kQuantizeWarps = 8;  // a block: 8 groups of 128 columns, a warp each

// Warp w of block b quantizes group (row, j) = divmod(8 b + w, Kb) (fp8_quantize_group).
__global__ void __launch_bounds__(kQuantizeWarps * 32)
    quantize_activation_fp8_kernel(RowMatrix x, uint8_t* values, float* scales, int64_t n_groups) {
  const int64_t group = int64_t{blockIdx.x} * kQuantizeWarps + threadIdx.x / 32;
  if (group >= x.n_rows * n_groups) return;
  const int64_t t = group / n_groups, k0 = (group % n_groups) * format::kFp8ActivationGroup;
  const int lane = threadIdx.x % 32;
  uint8_t codes[4];
  const float scale = fp8_quantize_group(x.data + t * x.row_stride, k0, x.n_cols, codes);
  if (lane == 0) scales[group] = scale;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t k = k0 + lane + 32 * i;
    if (k < x.n_cols) values[t * x.n_cols + k] = codes[i];
  }
}

// The GEMM's parameters for linear_fp8(a, w, y), or the unimplemented Status of a shape its
// kernels cannot read.
Result<sm90::Fp8GemmParams> gemm_params(const Fp8Activation& a, const format::Fp8BlockView& w,
                                        const TensorView& y) {
  const Fp8LinearOperands o = fp8_linear_operands(a, w, y);
  sm90::Fp8GemmParams p;
  p.a = o.a.values;
  p.a_scales = o.a.scales;
  p.b = w.values;
  p.b_scales = w.block_scales;
  p.ldb = w.row_stride;
  p.d = o.y.data;
  p.ldd = o.y.row_stride;
  p.m = o.a.n_rows;
  p.n = w.n_rows;
  p.k = o.a.n_cols;
  if (p.m != 0 && p.n != 0 &&
      (p.k % 16 != 0 || p.ldb % 16 != 0 || reinterpret_cast<uintptr_t>(p.b) % 16 != 0)) {
    return unimplemented(
        "linear_fp8: the CUDA kernels need K, w's row stride and w's address "
        "to be multiples of 16, got K " +
        std::to_string(p.k) + ", stride " + std::to_string(p.ldb));
  }
  return p;
}

// Whether the GEMM quantizes x itself: the stream kernel at up to two token chunks, where x's
// codes fit its shared memory (config.h).
bool quantizes_in_gemm(const RowMatrix& x, const sm90::Fp8GemmPlan& plan) {
  return plan.path == sm90::Fp8GemmPath::kStream && x.n_rows <= sm90::kFp8StreamQuantizeMaxTokens &&
         sm90::fp8_stream_smem_bytes(x.n_rows, x.n_cols) <= sm90::kFp8StreamQuantizeSmemBytes;
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
  DSV4_ASSIGN_OR_RETURN(const sm90::Fp8GemmParams p, gemm_params(a, w, y));
  if (p.m == 0 || p.n == 0) return ok_status();
  sm90::launch_fp8_gemm(p, sm90::plan_for(p));
  return ok_status();
}

Status linear_fp8(const TensorView& x, const format::Fp8BlockView& w, const Fp8Activation& scratch,
                  const TensorView& y) {
  const Fp8QuantizeOperands q = fp8_quantize_operands(x, scratch);
  DSV4_ASSIGN_OR_RETURN(sm90::Fp8GemmParams p, gemm_params(scratch, w, y));
  const sm90::Fp8GemmPlan plan = sm90::plan_for(p);
  if (p.m == 0 || p.n == 0 || p.k == 0 || !quantizes_in_gemm(q.x, plan)) {
    cuda::quantize_activation_fp8(x, scratch);
    if (p.m != 0 && p.n != 0) sm90::launch_fp8_gemm(p, plan);
    return ok_status();
  }
  p.x = q.x.data;
  p.ldx = q.x.row_stride;
  sm90::launch_fp8_gemm(p, plan);
  return ok_status();
}

}  // namespace dsv4::kernels::cuda
