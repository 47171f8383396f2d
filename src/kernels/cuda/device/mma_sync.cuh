// The warp-level tensor-core PTX the kernels share (sm_80 and up, so every CUDA build): the
// bf16 mma.sync with f32 accumulators, the ldmatrix that feeds it from shared memory, cp.async
// (16 bytes, zero-filling what lies past an operand's edge or not, and 4) and its groups, and the
// read-once load that feeds weights to registers.
#pragma once

#include <cstdint>

namespace dsv4::kernels::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes of src into shared memory, or 16 zeros where !valid (src is then not read, but must
// still be a mapped address).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}

// 16 bytes of src past L1 (each byte used once, by one thread); kL2Fetch256: L2 also fetches the
// next 256 bytes (a row read step by step).
template <bool kL2Fetch256 = false>
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  if constexpr (kL2Fetch256) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(smem_addr(dst)),
                 "l"(src));
  } else {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
  }
}

// 4 bytes through L1 (small values read again by nearby copies, such as block scales), or 4
// zeros where !valid.
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}

// Each committed group completes at a cp_async_wait that leaves fewer groups pending.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// 16 bytes of weights straight into registers: read once, so no L1 allocation; with kL2Fetch256
// L2 fetches the next 256 bytes of the row (the following steps) with it.
template <bool kL2Fetch256 = true>
__device__ __forceinline__ uint4 load_weights_once(const void* p) {
  uint4 v;
  if constexpr (kL2Fetch256) {
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  } else {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  }
  return v;
}

// D += A · B, m16n8k16, bf16 operands, f32 accumulators (PTX fragment layouts).
__device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8×8 b16 matrices from shared memory: lanes 8q..8q+7 give the 16-byte rows of matrix q,
// and lane l receives elements 2(l % 4), +1 of row l / 4 of each, in r[q].
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

// The same, transposed: lane l receives elements (2(l % 4), l / 4) and (2(l % 4) + 1, l / 4)
// of each matrix: a row-major [k][n] tile as mma's "col" B operand.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

}  // namespace dsv4::kernels::cuda
