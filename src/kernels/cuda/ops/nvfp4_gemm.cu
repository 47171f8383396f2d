// cuda::nvfp4_gemm and cuda::nvfp4_grouped_gemm (cuda_ops.h): checks the operands, brings them
// into the layout the sm_90a kernels read, fills Nvfp4GemmParams and launches.
//   - A staged in NVFP4 (W4A4) is decoded once to its exact bf16 values e2m1 · ue4m3
//     [T, K] (the global scale stays in alpha), so both paths run the same bf16 main loop.
//   - B rows must be a multiple of 64 codes long; checkpoints' are (K = 2048, 3072, 4096,
//     7168), other K get a zero-padded copy per call.
//   - nvfp4_gemm_swiglu (an MoE's L1): the warp-specialised kernel's SwiGLU epilogue, or the
//     GEMM into the caller's gate_up scratch and a row pass where another kernel runs.
// Temporaries come from the stream-ordered allocator, so nothing synchronises.
//
// Dimension letters: T tokens (rows), N output features, K input features, G experts.
#include <cuda_bf16.h>

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/swiglu.cuh"
#include "kernels/cuda/gemm/nvfp4/config.h"
#include "kernels/cuda/gemm/nvfp4/launch.h"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/stream.h"

namespace dsv4::kernels::cuda {
namespace {

using format::kNvfp4BlockSize;
using sm90::kWeightKAlign;

// a bf16 [T, K] = e2m1 · ue4m3 of a staged activation; one thread per 8 codes.
__global__ void decode_staged_kernel(const uint8_t* packed, const uint8_t* block_scale,
                                     format::ScaleLayout layout, int64_t n_rows, int64_t n_cols,
                                     __nv_bfloat16* out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;  // 8-code group
  const int64_t groups_per_row = n_cols / 8;
  if (i >= n_rows * groups_per_row) return;
  const int64_t row = i / groups_per_row, col = (i % groups_per_row) * 8;
  const float scale = e4m3_to_float(
      block_scale[format::scale_offset(layout, row, col / kNvfp4BlockSize,
                                       n_cols / kNvfp4BlockSize)]);
  const uint32_t codes = *reinterpret_cast<const uint32_t*>(packed + row * (n_cols / 2) + col / 2);
  uint32_t words[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {  // exact: e2m1 · ue4m3 is a bf16
    const __nv_bfloat162 pair =
        __floats2bfloat162_rn(e2m1_to_float((codes >> (8 * j)) & 0xfu) * scale,
                              e2m1_to_float((codes >> (8 * j + 4)) & 0xfu) * scale);
    words[j] = *reinterpret_cast<const uint32_t*>(&pair);
  }
  *reinterpret_cast<uint4*>(out + row * n_cols + col) = make_uint4(words[0], words[1], words[2], words[3]);
}

Status check_weights(const format::Nvfp4View& b) {
  DSV4_RETURN_IF_ERROR(format::validate_nvfp4(b, "nvfp4 gemm b"));
  if (b.scale_layout != format::ScaleLayout::kLinear) {
    return unimplemented("nvfp4 gemm (cuda): b's block scales must be linear [G, N, K/16]");
  }
  if (!b.packed.is_contiguous() || !b.block_scale.is_contiguous()) {
    return unimplemented("nvfp4 gemm (cuda): b must be contiguous");
  }
  return ok_status();
}

Status check_output(const TensorView& d, int64_t n_rows, int64_t n) {
  if (d.rank() != 2 || d.size(0) != n_rows || d.size(1) != n || d.stride[1] != 1 ||
      (d.dtype != DType::kF32 && d.dtype != DType::kBF16)) {
    return invalid_argument("nvfp4 gemm: d must be f32|bf16 [" + std::to_string(n_rows) + ", " +
                            std::to_string(n) + "] with dense rows, got " + d.shape.to_string());
  }
  return ok_status();
}

// The SwiGLU after an L1 GEMM (nvfp4_gemm_swiglu): its clamp, and the f32 [T, 2F] scratch
// that takes the GEMM's output when the kernel has no SwiGLU epilogue.
struct SwigluEpilogue {
  float limit;
  TensorView gate_up;
};

// Runs the GEMM for a bf16 A (a_global: the staged activation's decode scale, or nullptr).
Status run(const TensorView& a, const float* a_global, const format::Nvfp4View& b,
           const int32_t* offsets, const TensorView& d, const SwigluEpilogue* swiglu) {
  const int64_t n_groups = b.n_matrices(), n = b.n_rows(), k = b.n_cols();
  const int64_t n_rows = a.size(0);
  if (swiglu != nullptr && n % 2 != 0) {
    return invalid_argument("nvfp4 gemm swiglu: b has " + std::to_string(n) +
                            " rows, not gate and up halves");
  }
  DSV4_RETURN_IF_ERROR(check_output(d, n_rows, swiglu != nullptr ? n / 2 : n));
  if (a.stride[0] % 8 != 0 || reinterpret_cast<uintptr_t>(a.data) % 16 != 0) {
    return unimplemented("nvfp4 gemm (cuda): a's rows must be 16-byte aligned");
  }
  const int64_t kp = (k + kWeightKAlign - 1) / kWeightKAlign * kWeightKAlign;
  const bool pad = kp != k;
  DSV4_ASSIGN_OR_RETURN(const Scratch padded,
                        Scratch::allocate(pad ? n_groups * n * (kp / 2 + kp / 16) : 0));
  const uint8_t* b_packed = b.packed.data_as<const uint8_t>();
  const uint8_t* b_scale = b.block_scale.data_as<const uint8_t>();
  if (pad) {
    uint8_t* packed = padded.as<uint8_t>();
    uint8_t* scale = packed + n_groups * n * (kp / 2);
    DSV4_CUDA_CHECK(cudaMemsetAsync(packed, 0, n_groups * n * (kp / 2 + kp / 16), op_stream()));
    DSV4_CUDA_CHECK(cudaMemcpy2DAsync(packed, kp / 2, b_packed, k / 2, k / 2, n_groups * n,
                                      cudaMemcpyDeviceToDevice, op_stream()));
    DSV4_CUDA_CHECK(cudaMemcpy2DAsync(scale, kp / 16, b_scale, k / 16, k / 16, n_groups * n,
                                      cudaMemcpyDeviceToDevice, op_stream()));
    b_packed = packed;
    b_scale = scale;
  }
  sm90::Nvfp4GemmParams p{};
  p.a = a.data_as<const uint16_t>();
  p.lda = a.stride[0];
  p.b_packed = b_packed;
  p.b_scale = b_scale;
  p.b_global = b.global_scale.data_as<const float>();
  p.a_global = a_global;
  p.offsets = offsets;
  p.d = d.data;
  p.ldd = d.stride[0];
  p.n_rows = static_cast<int>(n_rows);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.kp = static_cast<int>(kp);
  p.n_groups = static_cast<int>(n_groups);
  p.d_bf16 = d.dtype == DType::kBF16;
  if (n_groups > sm90::kMaxGroups) {
    return unimplemented("nvfp4 grouped gemm (cuda): more than " +
                         std::to_string(sm90::kMaxGroups) + " groups");
  }
  const sm90::Nvfp4GemmPlan plan = sm90::plan_for(p);
  const bool in_epilogue = plan.path == sm90::Nvfp4GemmPath::kWsWgmma;
  if (swiglu != nullptr && in_epilogue) {
    p.swiglu_ffn = static_cast<int>(n / 2);
    p.swiglu_limit = swiglu->limit;
  } else if (swiglu != nullptr) {  // gate_up takes the GEMM's output, the SwiGLU comes after
    DSV4_RETURN_IF_ERROR(check_output(swiglu->gate_up, n_rows, n));
    if (swiglu->gate_up.dtype != DType::kF32) {
      return invalid_argument("nvfp4 gemm swiglu: gate_up scratch must be f32");
    }
    p.d = swiglu->gate_up.data;
    p.ldd = swiglu->gate_up.stride[0];
    p.d_bf16 = false;
  }
  const bool needs_accum = plan.path == sm90::Nvfp4GemmPath::kSmallM && p.d_bf16;
  DSV4_ASSIGN_OR_RETURN(const Scratch accum,
                        Scratch::allocate(needs_accum ? n_rows * n * sizeof(float) : 0));
  p.accum = accum.as<float>();
  sm90::launch_nvfp4_gemm(p, plan);
  if (swiglu != nullptr && !in_epilogue && n_rows > 0) launch_swiglu_rows(swiglu->gate_up, swiglu->limit, d);
  return ok_status();
}

Status run_w4a16(const TensorView& a, const format::Nvfp4View& b, const int32_t* offsets,
                 const TensorView& d, const SwigluEpilogue* swiglu = nullptr) {
  DSV4_RETURN_IF_ERROR(check_weights(b));
  if (a.dtype != DType::kBF16) {
    return unimplemented("nvfp4 gemm (cuda): a W4A16 activation must be bf16, got " +
                         std::string(dtype_name(a.dtype)));
  }
  if (a.rank() != 2 || a.size(1) != b.n_cols() || a.stride[1] != 1) {
    return invalid_argument("nvfp4 gemm: a must be bf16 [T, " + std::to_string(b.n_cols()) +
                            "] with dense rows, got " + a.shape.to_string());
  }
  return run(a, nullptr, b, offsets, d, swiglu);
}

Status run_w4a4(const StagedActivation& a, const format::Nvfp4View& b, const int32_t* offsets,
                const TensorView& d, const SwigluEpilogue* swiglu = nullptr) {
  DSV4_RETURN_IF_ERROR(check_weights(b));
  const int64_t k = b.n_cols();
  if (a.packed.rank() != 2 || a.packed.size(1) * 2 != k || !a.packed.is_contiguous() ||
      a.global_scale.dtype != DType::kF32 || a.global_scale.numel() != 1) {
    return invalid_argument("nvfp4 gemm: staged a must be u8 [T, " + std::to_string(k / 2) +
                            "] with an f32 [1] global scale");
  }
  const int64_t n_rows = a.packed.size(0);
  DSV4_ASSIGN_OR_RETURN(const Scratch decoded,
                        Scratch::allocate(n_rows * k * sizeof(__nv_bfloat16)));
  const int64_t n_threads = n_rows * k / 8;
  if (n_threads > 0) {
    decode_staged_kernel<<<static_cast<unsigned>((n_threads + 255) / 256), 256, 0, op_stream()>>>(
        a.packed.data_as<const uint8_t>(), a.block_scale.data_as<const uint8_t>(),
        a.scale_layout, n_rows, k, decoded.as<__nv_bfloat16>());
    DSV4_CUDA_CHECK(cudaGetLastError());
  }
  const TensorView a_bf16 =
      TensorView::contiguous(decoded.as<void>(), DType::kBF16, Device::kCuda, {n_rows, k});
  return run(a_bf16, a.global_scale.data_as<const float>(), b, offsets, d, swiglu);
}

const int32_t* checked_offsets(const TensorView& group_offsets, const format::Nvfp4View& b) {
  DSV4_CHECK(group_offsets.dtype == DType::kI32 && group_offsets.numel() == b.n_matrices() + 1,
             "nvfp4_grouped_gemm: group_offsets must be i32 [%lld]",
             (long long)(b.n_matrices() + 1));
  return group_offsets.data_as<const int32_t>();
}

Status single_matrix(const format::Nvfp4View& b) {
  if (b.n_matrices() != 1) {
    return invalid_argument("nvfp4_gemm: b holds " + std::to_string(b.n_matrices()) +
                            " matrices, expected 1");
  }
  return ok_status();
}

}  // namespace

Status nvfp4_gemm(const StagedActivation& a, const format::Nvfp4View& b, const TensorView& d) {
  DSV4_RETURN_IF_ERROR(single_matrix(b));
  return run_w4a4(a, b, nullptr, d);
}

Status nvfp4_gemm(const TensorView& a, const format::Nvfp4View& b, const TensorView& d) {
  DSV4_RETURN_IF_ERROR(single_matrix(b));
  return run_w4a16(a, b, nullptr, d);
}

Status nvfp4_grouped_gemm(const StagedActivation& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d) {
  return run_w4a4(a, b, checked_offsets(group_offsets, b), d);
}

Status nvfp4_grouped_gemm(const TensorView& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d) {
  return run_w4a16(a, b, checked_offsets(group_offsets, b), d);
}

Status nvfp4_gemm_swiglu(const TensorView& a, const format::Nvfp4View& b, float limit,
                         const TensorView& gate_up, const TensorView& act) {
  DSV4_RETURN_IF_ERROR(single_matrix(b));
  const SwigluEpilogue swiglu{limit, gate_up};
  return run_w4a16(a, b, nullptr, act, &swiglu);
}

Status nvfp4_gemm_swiglu(const StagedActivation& a, const format::Nvfp4View& b, float limit,
                         const TensorView& gate_up, const TensorView& act) {
  DSV4_RETURN_IF_ERROR(single_matrix(b));
  const SwigluEpilogue swiglu{limit, gate_up};
  return run_w4a4(a, b, nullptr, act, &swiglu);
}

Status nvfp4_grouped_gemm_swiglu(const TensorView& a, const format::Nvfp4View& b,
                                 const TensorView& group_offsets, float limit,
                                 const TensorView& gate_up, const TensorView& act) {
  const SwigluEpilogue swiglu{limit, gate_up};
  return run_w4a16(a, b, checked_offsets(group_offsets, b), act, &swiglu);
}

Status nvfp4_grouped_gemm_swiglu(const StagedActivation& a, const format::Nvfp4View& b,
                                 const TensorView& group_offsets, float limit,
                                 const TensorView& gate_up, const TensorView& act) {
  const SwigluEpilogue swiglu{limit, gate_up};
  return run_w4a4(a, b, checked_offsets(group_offsets, b), act, &swiglu);
}

}  // namespace dsv4::kernels::cuda
