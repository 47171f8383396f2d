// Host side of the sm_90a NVFP4 GEMM: plan, zero the split-K accumulator when the small-M
// kernel runs, launch, and round the accumulator to bf16 when D is bf16.
#include "kernels/cuda/gemm/nvfp4/launch.h"

#include <cuda_bf16.h>

#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/gemm/nvfp4/plan.h"
#include "kernels/cuda/gemm/nvfp4/small_m_kernel.cuh"
#include "kernels/cuda/gemm/nvfp4/stream_kernel.cuh"

namespace dsv4::kernels::cuda::sm90 {

template <int kBM, bool kOutBf16>
void launch_ws(Nvfp4GemmParams p, int grid, bool tma);  // instantiations/

namespace {

// d bf16 [T, ldd] = accum f32 [T, N].
__global__ void round_to_bf16_kernel(const float* accum, int64_t n_rows, int n,
                                     __nv_bfloat16* d, int64_t ldd) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n_rows * n) return;
  d[(i / n) * ldd + i % n] = __float2bfloat16_rn(accum[i]);
}

template <int kTiles>
void launch_small(const Nvfp4GemmParams& p, const Nvfp4GemmPlan& plan) {
  auto* kernel = &nvfp4_small_m_sm90_kernel<kTiles>;
  const int smem = kTiles * 8 * plan.small_chunks * 256;
  [[maybe_unused]] static const bool allowed = allow_dynamic_smem(kernel, kSmallMaxSmem);
  const dim3 grid((p.n + kSmallRows - 1) / kSmallRows,
                  (p.kp + plan.small_chunks * kSmallChunk - 1) / (plan.small_chunks * kSmallChunk),
                  plan.small_slots);
  kernel<<<grid, kSmallThreads, smem, op_stream()>>>(p, plan.small_chunks);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

void run_small(Nvfp4GemmParams p, const Nvfp4GemmPlan& plan) {
  if (!p.d_bf16) p.accum = static_cast<float*>(p.d);
  const int64_t ld = p.d_bf16 ? p.n : p.ldd;
  DSV4_CUDA_CHECK(cudaMemset2DAsync(p.accum, ld * sizeof(float), 0, p.n * sizeof(float),
                                    p.n_rows, op_stream()));
  switch (plan.small_tiles) {
    case 1: launch_small<1>(p, plan); break;
    case 2: launch_small<2>(p, plan); break;
    case 4: launch_small<4>(p, plan); break;
    default: launch_small<8>(p, plan); break;
  }
  if (p.d_bf16) {
    const int64_t count = int64_t{p.n_rows} * p.n;
    round_to_bf16_kernel<<<static_cast<unsigned>((count + 255) / 256), 256, 0, op_stream()>>>(
        p.accum, p.n_rows, p.n, static_cast<__nv_bfloat16*>(p.d), p.ldd);
    DSV4_CUDA_CHECK(cudaGetLastError());
  }
}

template <int kK, int kChunks, int kWarps, int kMinBlocks>
void launch_stream_k(const Nvfp4GemmParams& p) {
  const unsigned grid = static_cast<unsigned>((p.n + 15) / 16);
  if (p.d_bf16) {
    nvfp4_stream_gemm_sm90_kernel<kK, kChunks, true, kWarps, kMinBlocks>
        <<<grid, 32 * kWarps, 0, op_stream()>>>(p);
  } else {
    nvfp4_stream_gemm_sm90_kernel<kK, kChunks, false, kWarps, kMinBlocks>
        <<<grid, 32 * kWarps, 0, op_stream()>>>(p);
  }
  DSV4_CUDA_CHECK(cudaGetLastError());
}

// K as a constant where kWarps split its steps evenly, else the generic loop.
template <int kK, int kChunks, int kWarps, int kMinBlocks>
void launch_stream_of(const Nvfp4GemmParams& p) {
  constexpr bool kEven = kK / kStreamStepK % kWarps == 0;
  launch_stream_k<kEven ? kK : 0, kChunks, kWarps, kMinBlocks>(p);
}

// The V4 shapes' K (2048, 3072, 4096, 7168) as constants, so each warp's step count is too;
// any other multiple of 128 through the generic loop.
template <int kChunks, int kWarps = kStreamWarps, int kMinBlocks = kStreamMinBlocksPerSm>
void launch_stream(const Nvfp4GemmParams& p) {
  switch (p.k) {
    case 2048: return launch_stream_of<2048, kChunks, kWarps, kMinBlocks>(p);
    case 3072: return launch_stream_of<3072, kChunks, kWarps, kMinBlocks>(p);
    case 4096: return launch_stream_of<4096, kChunks, kWarps, kMinBlocks>(p);
    case 7168: return launch_stream_of<7168, kChunks, kWarps, kMinBlocks>(p);
    default: return launch_stream_k<0, kChunks, kWarps, kMinBlocks>(p);
  }
}

// One token chunk on the plan's CTA shape.
void launch_stream_one_chunk(const Nvfp4GemmParams& p, const Nvfp4GemmPlan& plan) {
  const int shape = plan.stream_warps * 100 + plan.stream_min_blocks;
  switch (shape) {
    case 404: return launch_stream<1, 4, 4>(p);
    case 802: return launch_stream<1, 8, 2>(p);
    case 804: return launch_stream<1, 8, 4>(p);
    default:
      DSV4_CHECK(false, "nvfp4 stream gemm: %d warps at %d CTAs an SM", plan.stream_warps,
                 plan.stream_min_blocks);
  }
}

template <int kBM>
void launch_ws_of(const Nvfp4GemmParams& p, const Nvfp4GemmPlan& plan) {
  p.d_bf16 ? launch_ws<kBM, true>(p, plan.grid, plan.tma_tokens)
           : launch_ws<kBM, false>(p, plan.grid, plan.tma_tokens);
}

void launch_ws_tokens(const Nvfp4GemmParams& p, const Nvfp4GemmPlan& plan) {
  switch (plan.ws_tokens) {
    case 32: return launch_ws_of<32>(p, plan);
    case 64: return launch_ws_of<64>(p, plan);
    case 128: return launch_ws_of<128>(p, plan);
    case 256: return launch_ws_of<256>(p, plan);
    default: DSV4_CHECK(false, "nvfp4 ws gemm: %d tokens per tile", plan.ws_tokens);
  }
}

}  // namespace

Nvfp4GemmPlan plan_for(const Nvfp4GemmParams& p) {
  return plan_nvfp4_gemm(p.n_rows, p.n, p.k, p.kp, p.offsets == nullptr ? 1 : p.n_groups,
                         sm_count());
}

void launch_nvfp4_gemm(Nvfp4GemmParams p, const Nvfp4GemmPlan& plan) {
  DSV4_CHECK(p.kp % kWeightKAlign == 0 && p.lda % 8 == 0 && p.n_groups <= kMaxGroups,
             "nvfp4 gemm: kp=%d lda=%lld groups=%d break the kernel's layout", p.kp,
             (long long)p.lda, p.n_groups);
  DSV4_CHECK(p.swiglu_ffn == 0 || (plan.path == Nvfp4GemmPath::kWsWgmma && p.n == 2 * p.swiglu_ffn),
             "nvfp4 gemm: the SwiGLU epilogue needs the warp-specialised kernel and N = 2F (N %d)",
             p.n);
  if (p.n_rows == 0 || p.n == 0) return;
  if (plan.path == Nvfp4GemmPath::kStream) {
    DSV4_CHECK(p.n_rows <= kStreamMaxTokens && p.k == p.kp && p.k % kStreamStepK == 0,
               "nvfp4 stream gemm: T=%d K=%d Kp=%d", p.n_rows, p.k, p.kp);
    p.n_rows <= 8 ? launch_stream_one_chunk(p, plan) : launch_stream<2>(p);
  } else if (plan.path == Nvfp4GemmPath::kSmallM) {
    run_small(p, plan);
  } else {
    launch_ws_tokens(p, plan);
  }
}

}  // namespace dsv4::kernels::cuda::sm90
