// Host side of the sm_90a FP8 GEMM family: plan, encode the wgmma kernel's tensor maps, launch.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/cluster_launch.cuh"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/gemm/fp8/launch.h"
#include "kernels/cuda/gemm/fp8/stream_kernel.cuh"
#include "kernels/cuda/gemm/fp8/ws_kernel.cuh"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/tensor_map.h"

namespace dsv4::kernels::cuda::sm90 {
namespace {

template <int kTileM>
void launch_ws(const Fp8GemmParams& p, const Fp8GemmPlan& plan) {
  auto* kernel = &fp8_ws_gemm_sm90_kernel<kTileM>;
  constexpr int kBytes = fp8_smem_bytes(kTileM);
  [[maybe_unused]] static const bool allowed = allow_dynamic_smem(kernel, kBytes);
  CUtensorMap a_map{}, b_map{};
  const int64_t a_cols = p.n_groups * p.k;  // every group's columns (params.h)
  const bool encoded = encode_tensor_map_2d(&a_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.a, a_cols, p.m,
                                            a_cols, kFp8TileK, kTileM) &&
                       encode_tensor_map_2d(&b_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.b, p.k, p.n,
                                            p.ldb, kFp8TileK, kFp8TileN);
  DSV4_CHECK(encoded, "fp8 gemm: no tensor map for A (%p, K %lld) or B (%p, stride %lld)",
             static_cast<const void*>(p.a), (long long)p.k, static_cast<const void*>(p.b),
             (long long)p.ldb);
  kernel<<<plan.grid, kFp8WsThreads, kBytes, op_stream()>>>(p, a_map, b_map);
  check_launch();
}

// A cluster of `split` CTAs a 16-row tile (split 1 included: the kernel reads its cluster's size).
template <int kWarps, int kChunks>
void launch_stream_of(const Fp8GemmParams& p, int split) {
  launch_clusters(fp8_stream_gemm_sm90_kernel<kWarps, kChunks>,
                  dim3(static_cast<unsigned>(ceil_div(p.n, kFp8StreamRows) * split)),
                  dim3(kWarps * 32), split, p);
  check_launch();
}

template <int kWarps>
void launch_stream_warps(const Fp8GemmParams& p, int chunks, int split) {
  switch (chunks) {
    case 1:
      return launch_stream_of<kWarps, 1>(p, split);
    case 2:
      return launch_stream_of<kWarps, 2>(p, split);
    case 4:
      if constexpr (kWarps * 4 <= 32) return launch_stream_of<kWarps, 4>(p, split);
      break;
    case 8:
      if constexpr (kWarps * 8 <= 32) return launch_stream_of<kWarps, 8>(p, split);
      break;
  }
  DSV4_CHECK(false, "fp8 stream gemm: %d warps with %d token chunks", kWarps, chunks);
}

void launch_stream(const Fp8GemmParams& p, const Fp8GemmPlan& plan) {
  DSV4_CHECK(plan.stream_split >= 1 && plan.stream_split <= kFp8StreamMaxSplit,
             "fp8 stream gemm: %d CTAs a tile", plan.stream_split);
  DSV4_CHECK(p.m <= kFp8StreamMaxTokens && p.n_groups * p.k <= (int64_t{1} << 24),
             "fp8 stream gemm: %lld tokens of %lld columns past its 32-bit offsets", (long long)p.m,
             (long long)(p.n_groups * p.k));
  switch (plan.stream_warps) {
    case 4:
      return launch_stream_warps<4>(p, plan.stream_chunks, plan.stream_split);
    case 8:
      return launch_stream_warps<8>(p, plan.stream_chunks, plan.stream_split);
    case 16:
      return launch_stream_warps<16>(p, plan.stream_chunks, plan.stream_split);
    default:
      DSV4_CHECK(false, "fp8 stream gemm: %d warps a CTA", plan.stream_warps);
  }
}

}  // namespace

Fp8GemmPlan plan_for(const Fp8GemmParams& p) { return plan_fp8_gemm(p.m, p.n, p.k, sm_count()); }

void launch_fp8_gemm(const Fp8GemmParams& p, const Fp8GemmPlan& plan) {
  if (p.m == 0 || p.n == 0) return;
  if (p.k == 0) {  // an empty sum: D = 0
    DSV4_CUDA_CHECK(
        cudaMemset2DAsync(p.d, p.ldd * sizeof(float), 0, p.n * sizeof(float), p.m, op_stream()));
    return;
  }
  DSV4_CHECK(p.k % 16 == 0 && p.ldb % 16 == 0, "fp8 gemm: K %lld and B's stride %lld break TMA",
             (long long)p.k, (long long)p.ldb);
  DSV4_CHECK(p.n_groups == 1 || (p.k % kFp8TileK == 0 && p.n % (p.n_groups * kFp8TileN) == 0),
             "fp8 gemm: %lld groups need K %lld and N / G of %lld in whole 128-blocks",
             (long long)p.n_groups, (long long)p.k, (long long)p.n);
  if (plan.path == Fp8GemmPath::kStream) {
    launch_stream(p, plan);
  } else if (plan.ws_tile_m == 256) {
    launch_ws<256>(p, plan);
  } else {
    DSV4_CHECK(plan.ws_tile_m == 128, "fp8 ws gemm: %d tokens a tile", plan.ws_tile_m);
    launch_ws<128>(p, plan);
  }
}

}  // namespace dsv4::kernels::cuda::sm90
