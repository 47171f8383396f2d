// The NVFP4 GEMMs, CPU reference: D[T, N] = alpha · A[T, K] · B[N, K]ᵀ, dense and grouped by
// expert. The exact path: decode every operand to e2m1 · ue4m3 (exact in f32, and in bf16, so
// the CUDA bf16-wgmma kernel sees the same numbers), multiply with OpenBLAS row by row (f32
// accumulation, alpha = 1; batch-invariant, row_gemm.h), then apply the fp32 alpha once to the accumulator, then round to
// bf16 if D is bf16. Folding the global scales into the operands instead would re-round them
// (docs/nvfp4.md, "Why the global scale is never folded").
//
// Dimension letters: T tokens (rows of A and D), N output features, K input features,
// G experts (matrices in B), Kb = K/16.

#include <cstring>
#include <vector>

#include "base/float_convert.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_gemm.h"

namespace dsv4::kernels::cpu {
namespace {

using format::kNvfp4BlockSize;
using format::Nvfp4Block;
using format::ScaleLayout;

// One NVFP4 matrix's bytes: packed [rows, K/2] and its scales in `layout`.
struct Nvfp4Matrix {
  const uint8_t* packed;
  const uint8_t* block_scale;
  ScaleLayout layout;
  int64_t n_rows;
  int64_t n_cols;
};

// Rows [begin, end) of m decoded to e2m1 · ue4m3 (no global scale) into out [end-begin, K].
void decode_rows(const Nvfp4Matrix& m, int64_t begin, int64_t end, float* out) {
  const int64_t n_kb = m.n_cols / kNvfp4BlockSize;
#pragma omp parallel for if ((end - begin) * m.n_cols > kParallelWork)
  for (int64_t r = begin; r < end; ++r) {
    const auto* blocks = reinterpret_cast<const Nvfp4Block*>(m.packed + r * (m.n_cols / 2));
    float* row = out + (r - begin) * m.n_cols;
    for (int64_t kb = 0; kb < n_kb; ++kb) {
      const uint8_t scale = m.block_scale[format::scale_offset(m.layout, r, kb, n_kb)];
      for (int i = 0; i < kNvfp4BlockSize; ++i) {
        row[kb * kNvfp4BlockSize + i] = format::nvfp4_block_value(blocks[kb], scale, i);
      }
    }
  }
}

// Matrix g of the stack b.
Nvfp4Matrix weight_matrix(const format::Nvfp4View& b, int64_t g) {
  const int64_t n_rows = b.n_rows(), n_cols = b.n_cols();
  const int64_t scale_bytes = format::padded_scale_rows(b.scale_layout, n_rows) *
                              format::padded_scale_cols(b.scale_layout, n_cols / kNvfp4BlockSize);
  return Nvfp4Matrix{b.packed.data_as<const uint8_t>() + g * n_rows * (n_cols / 2),
                     b.block_scale.data_as<const uint8_t>() + g * scale_bytes, b.scale_layout,
                     n_rows, n_cols};
}

// A as f32 [T, K]: decoded when staged, converted when bf16, copied when f32.
std::vector<float> decode_activation(const StagedActivation* staged, const TensorView* dense,
                                     int64_t n_rows, int64_t n_cols) {
  std::vector<float> a(static_cast<size_t>(n_rows * n_cols));
  if (staged != nullptr) {
    decode_rows(Nvfp4Matrix{staged->packed.data_as<const uint8_t>(),
                            staged->block_scale.data_as<const uint8_t>(), staged->scale_layout,
                            n_rows, n_cols},
                0, n_rows, a.data());
    return a;
  }
#pragma omp parallel for if (n_rows * n_cols > kParallelWork)
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = a.data() + r * n_cols;
    if (dense->dtype == DType::kF32) {
      std::memcpy(row, dense->data_as<const float>() + r * dense->stride[0],
                  n_cols * sizeof(float));
    } else {
      const uint16_t* src = dense->data_as<const uint16_t>() + r * dense->stride[0];
      for (int64_t c = 0; c < n_cols; ++c) row[c] = bf16_to_float(src[c]);
    }
  }
  return a;
}

// The operands of one call, checked; `a_decode` is the staged activation's decode scale, or 1
// for W4A16 (alpha is then b's decode scale alone).
struct Problem {
  std::vector<float> a;  // [T, K] decoded
  float a_decode = 1.0f;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
};

Problem prepare(const StagedActivation* staged, const TensorView* dense, const format::Nvfp4View& b,
                const TensorView& d) {
  const Status valid = format::validate_nvfp4(b, "nvfp4 gemm b");
  DSV4_CHECK(valid.ok(), "%s", valid.message().c_str());
  Problem p;
  p.n_cols = b.n_cols();
  if (staged != nullptr) {
    p.n_rows = staged->packed.size(0);
    DSV4_CHECK(staged->packed.dtype == DType::kU8 && staged->packed.rank() == 2 &&
                   staged->packed.size(1) * 2 == p.n_cols && staged->packed.is_contiguous(),
               "nvfp4 gemm: staged a must be u8 [T, K/2] with K=%lld", (long long)p.n_cols);
    DSV4_CHECK(staged->global_scale.dtype == DType::kF32 && staged->global_scale.numel() == 1,
               "nvfp4 gemm: staged a's global_scale must be f32 [1]");
    const int64_t n_kb = p.n_cols / kNvfp4BlockSize;
    DSV4_CHECK(staged->block_scale.dtype == DType::kU8 &&
                   staged->block_scale.numel() ==
                       format::padded_scale_rows(staged->scale_layout, p.n_rows) *
                           format::padded_scale_cols(staged->scale_layout, n_kb),
               "nvfp4 gemm: staged a's block_scale has the wrong size for its layout");
    p.a_decode = *staged->global_scale.data_as<const float>();
  } else {
    DSV4_CHECK(dense->rank() == 2 && dense->size(1) == p.n_cols && dense->stride[1] == 1 &&
                   (dense->dtype == DType::kF32 || dense->dtype == DType::kBF16),
               "nvfp4 gemm: a must be f32|bf16 [T, %lld] with dense rows", (long long)p.n_cols);
    p.n_rows = dense->size(0);
  }
  DSV4_CHECK(d.rank() == 2 && d.size(0) == p.n_rows && d.size(1) == b.n_rows() &&
                 d.stride[1] == 1 && (d.dtype == DType::kF32 || d.dtype == DType::kBF16),
             "nvfp4 gemm: d must be f32|bf16 [%lld, %lld]", (long long)p.n_rows,
             (long long)b.n_rows());
  p.a = decode_activation(staged, dense, p.n_rows, p.n_cols);
  return p;
}

// D rows [begin, end) = alpha · a[begin:end] · B[g]ᵀ.
void multiply_group(const Problem& p, const format::Nvfp4View& b, int64_t g, int64_t begin,
                    int64_t end, const TensorView& d) {
  if (begin == end) return;
  const int64_t n_out = b.n_rows(), k = p.n_cols, rows = end - begin;
  std::vector<float> w(static_cast<size_t>(n_out * k));  // [N, K]
  decode_rows(weight_matrix(b, g), 0, n_out, w.data());
  std::vector<float> acc(static_cast<size_t>(rows * n_out));  // [rows, N]
  rows_times_transposed(p.a.data() + begin * k, k, rows, w.data(), k, n_out, k, acc.data(), n_out);
  const float alpha = format::nvfp4_alpha(p.a_decode, b.global_scale.data_as<const float>()[g]);
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = acc.data() + r * n_out;
    if (d.dtype == DType::kF32) {
      float* dst = d.data_as<float>() + (begin + r) * d.stride[0];
      for (int64_t n = 0; n < n_out; ++n) dst[n] = alpha * src[n];
    } else {
      uint16_t* dst = d.data_as<uint16_t>() + (begin + r) * d.stride[0];
      for (int64_t n = 0; n < n_out; ++n) dst[n] = float_to_bf16(alpha * src[n]);
    }
  }
}

void dense_gemm(const StagedActivation* staged, const TensorView* dense, const format::Nvfp4View& b,
                const TensorView& d) {
  DSV4_CHECK(b.n_matrices() == 1, "nvfp4_gemm: b holds %lld matrices, expected 1 (use .matrix(g))",
             (long long)b.n_matrices());
  const Problem p = prepare(staged, dense, b, d);
  multiply_group(p, b, 0, 0, p.n_rows, d);
}

void grouped_gemm(const StagedActivation* staged, const TensorView* dense,
                  const format::Nvfp4View& b, const TensorView& group_offsets,
                  const TensorView& d) {
  const Problem p = prepare(staged, dense, b, d);
  const int64_t n_groups = b.n_matrices();
  DSV4_CHECK(group_offsets.dtype == DType::kI32 && group_offsets.numel() == n_groups + 1,
             "nvfp4_grouped_gemm: group_offsets must be i32 [%lld]", (long long)(n_groups + 1));
  const int32_t* offsets = group_offsets.data_as<const int32_t>();
  DSV4_CHECK(offsets[0] == 0 && offsets[n_groups] == p.n_rows,
             "nvfp4_grouped_gemm: offsets span [%d, %d), expected [0, %lld)", offsets[0],
             offsets[n_groups], (long long)p.n_rows);
  for (int64_t g = 0; g < n_groups; ++g) {
    DSV4_CHECK(offsets[g] <= offsets[g + 1], "nvfp4_grouped_gemm: offsets decrease at group %lld",
               (long long)g);
    multiply_group(p, b, g, offsets[g], offsets[g + 1], d);
  }
}

}  // namespace

void nvfp4_gemm(const StagedActivation& a, const format::Nvfp4View& b, const TensorView& d) {
  dense_gemm(&a, nullptr, b, d);
}

void nvfp4_gemm(const TensorView& a, const format::Nvfp4View& b, const TensorView& d) {
  dense_gemm(nullptr, &a, b, d);
}

void nvfp4_grouped_gemm(const StagedActivation& a, const format::Nvfp4View& b,
                        const TensorView& group_offsets, const TensorView& d) {
  grouped_gemm(&a, nullptr, b, group_offsets, d);
}

void nvfp4_grouped_gemm(const TensorView& a, const format::Nvfp4View& b,
                        const TensorView& group_offsets, const TensorView& d) {
  grouped_gemm(nullptr, &a, b, group_offsets, d);
}

}  // namespace dsv4::kernels::cpu
