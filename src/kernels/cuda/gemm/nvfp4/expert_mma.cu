// Launcher of the fused path's expert kernel (expert_mma.cuh): one instantiation per layer kind
// (gate_up with the SwiGLU epilogue, or down) and activation format (bf16 or NVFP4).
#include <algorithm>

#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/gemm/nvfp4/expert_mma.cuh"

namespace dsv4::kernels::cuda::moe {
namespace {

template <bool kGateUp, bool kNvfp4Act>
void launch(const ExpertParams& p, int n_slots, cudaStream_t stream) {
  // Persistent: one block per SM (the kernel's registers allow no second), each looping over
  // work units; never more blocks than the most units there can be.
  // The weight ring needs more than the default 48 KB of dynamic shared memory.
  [[maybe_unused]] static const bool allowed =
      allow_dynamic_smem(expert_mma_kernel<kGateUp, kNvfp4Act>, kExpertSmemBytes);
  const int n_blocks = std::min(sm_count(), n_slots * p.n_xblocks);
  expert_mma_kernel<kGateUp, kNvfp4Act><<<n_blocks, kExpertThreads, kExpertSmemBytes, stream>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_expert(ExpertParams p, bool gate_up, bool nvfp4_act, int n_slots_max,
                   cudaStream_t stream) {
  const int n_ktiles = p.k / kKTile;
  const int n_mtiles_total = gate_up ? p.ffn / 8 : p.n_rows / 16;
  DSV4_CHECK(p.k % kKTile == 0 && n_ktiles <= kMaxItems &&
                 n_mtiles_total * (gate_up ? 8 : 16) == (gate_up ? p.ffn : p.n_rows),
             "expert kernel: K %d must be a multiple of 128 (≤ 8192), rows of 16", p.k);
  p.n_mtiles = 1;
  for (int m : {4, 2}) {
    if (m * n_ktiles <= kMaxItems && n_mtiles_total % m == 0) {
      p.n_mtiles = m;
      break;
    }
  }
  p.n_xblocks = n_mtiles_total / p.n_mtiles;
  if (gate_up) {
    nvfp4_act ? launch<true, true>(p, n_slots_max, stream)
              : launch<true, false>(p, n_slots_max, stream);
  } else {
    nvfp4_act ? launch<false, true>(p, n_slots_max, stream)
              : launch<false, false>(p, n_slots_max, stream);
  }
}

}  // namespace dsv4::kernels::cuda::moe
