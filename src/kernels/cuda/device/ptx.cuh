// Single PTX instructions the kernels share that are not tensor-core or copy-pipeline ones
// (mma_sync.cuh has mma.sync, ldmatrix and cp.async; sm90_ptx.cuh wgmma, mbarriers and TMA):
// byte permutes, the exact bf16x2 multiply of the NVFP4 decodes, L2 prefetches, and a register
// the compiler must keep.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace dsv4::kernels::cuda {

// Bytes of {b, a} picked by the four 4-bit fields of `selector` (PTX prmt, default mode).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// a · b per bf16 half (mul.bf16x2, round to nearest: the NVFP4 decodes multiply values whose
// product is exact in bf16, so it never rounds there). Through the intrinsic, not asm: ptxas
// schedules the MoE decode kernels differently around an asm multiply (13 of expert_stream's 36
// instantiations), and their speed was measured with the intrinsic.
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  const __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                   *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&r);
}

// Starts moving a line of the next work unit's weights from HBM into L2 while this one computes.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

// Asks L2 for `bytes` (a multiple of 16) at `p` (16-byte aligned) in one instruction (sm_90).
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, int bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}

// Makes v opaque to the optimiser, so a value computed once (from threadIdx, say) stays in its
// register instead of being recomputed where it is used.
__device__ __forceinline__ void keep_in_register(uint32_t& v) { asm volatile("" : "+r"(v)); }

}  // namespace dsv4::kernels::cuda
