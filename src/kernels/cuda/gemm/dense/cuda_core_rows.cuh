// The CUDA-core dense kernels' views of their operands (linear_cuda_cores.cu, linear_narrow.cu):
// x as f32 rows, the weight as f32 or bf16 rows or as e4m3 codes with their 128 × 128 block
// scales, read one element (at) or four (load4) at a time and widened to f32. A bf16 weight
// widens exactly and an FP8 one decodes exactly (device/fp8_decode.cuh), so every form of one
// weight gives these kernels the same f32 values, and them the same bits.
#pragma once

#include <cstdint>

#include "base/float_convert.h"
#include "kernels/contracts.h"
#include "kernels/cuda/device/fp8_decode.cuh"

namespace dsv4::kernels::cuda::cuda_core_rows {

inline constexpr int kVec = 4;  // K elements a lane loads at once: 16 bytes of f32, 8 of bf16

// Read-only rows of f32 or of bf16 bits (a weight, contracts.h's WeightRows), widened to f32.
// A row is a pointer to its first element.
template <typename T>
struct Rows {
  using Row = const T*;
  using Element = T;
  const T* data;
  int64_t n_rows, n_cols, row_stride;
  __device__ Row row(int64_t r) const { return data + r * row_stride; }
};
__device__ __forceinline__ float at(const float* row, int64_t col) { return __ldg(row + col); }
__device__ __forceinline__ float at(const uint16_t* row, int64_t col) {
  return bf16_to_float(__ldg(row + col));
}

// Rows of e4m3 codes with their 128 × 128 block scales (an FP8 weight): a row is its codes and
// its block row of scales.
struct Fp8Row {
  const uint8_t* codes;
  const float* scales;  // one per 128 columns
};
// Row r is the matrix's row first_row + r (a group of a block-diagonal call starts mid-matrix,
// maybe mid-block); `scales` are the whole matrix's.
struct Fp8Rows {
  using Row = Fp8Row;
  using Element = uint8_t;
  const uint8_t* data;
  int64_t n_rows, n_cols, row_stride;
  const float* scales;
  int64_t scale_cols;
  int64_t first_row;
  __device__ Row row(int64_t r) const {
    return {data + r * row_stride, scales + (first_row + r) / format::kFp8WeightBlock * scale_cols};
  }
};
__device__ __forceinline__ float at(const Fp8Row& row, int64_t col) {
  const uint16_t code = __ldg(row.codes + col);
  return e4m3x2_scaled(code, __ldg(row.scales + col / format::kFp8WeightBlock)).x;
}

// Elements col .. col + 3 of a row (col a multiple of kVec).
__device__ __forceinline__ float4 load4(const float* row, int64_t col) {
  return __ldg(reinterpret_cast<const float4*>(row + col));
}
__device__ __forceinline__ float4 load4(const uint16_t* row, int64_t col) {
  const uint2 v = __ldg(reinterpret_cast<const uint2*>(row + col));  // bf16: a float's upper half
  return make_float4(float_from_bits(v.x << 16), float_from_bits(v.x & 0xffff0000u),
                     float_from_bits(v.y << 16), float_from_bits(v.y & 0xffff0000u));
}
__device__ __forceinline__ float4 load4(const Fp8Row& row, int64_t col) {
  const uint32_t codes = __ldg(reinterpret_cast<const unsigned int*>(row.codes + col));
  return e4m3x4_scaled(codes, __ldg(row.scales + col / format::kFp8WeightBlock));
}

// acc + w · x over a run of 4, one fmaf an element in order: the CUDA-core kernels' order.
__device__ __forceinline__ float fma4(const float4& w, const float4& x, float acc) {
  acc = fmaf(w.x, x.x, acc);
  acc = fmaf(w.y, x.y, acc);
  acc = fmaf(w.z, x.z, acc);
  return fmaf(w.w, x.w, acc);
}

inline Rows<float> rows_of(const RowMatrix& m) {
  return {m.data, m.n_rows, m.n_cols, m.row_stride};
}
template <typename T>
Rows<T> rows_of(const WeightRows& w) {
  return {static_cast<const T*>(w.data), w.n_rows, w.n_cols, w.row_stride};
}
inline Fp8Rows fp8_rows_of(const WeightRows& w) {
  return {static_cast<const uint8_t*>(w.data),
          w.n_rows,
          w.n_cols,
          w.row_stride,
          w.block_scales,
          w.scale_cols,
          0};
}

// f(x, w) with x's rows and the weight's in the view of its dtype.
template <typename F>
void with_rows(const LinearOperands& o, F&& f) {
  if (o.w.dtype == DType::kBF16) {
    f(rows_of(o.x), rows_of<uint16_t>(o.w));
  } else if (o.w.dtype == DType::kF8E4M3) {
    f(rows_of(o.x), fp8_rows_of(o.w));
  } else {
    f(rows_of(o.x), rows_of<float>(o.w));
  }
}

// Rows a 16-byte (f32), 8-byte (bf16) or 4-byte (e4m3) load may read kVec elements of at a time.
template <typename M>
bool vector_rows(const M& m) {
  return m.n_cols % kVec == 0 && m.row_stride % kVec == 0 &&
         reinterpret_cast<uintptr_t>(m.data) % (kVec * sizeof(typename M::Element)) == 0;
}

}  // namespace dsv4::kernels::cuda::cuda_core_rows
