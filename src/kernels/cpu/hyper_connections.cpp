// mHC on the CPU (transformers DeepseekV4HyperConnection.forward, DeepseekV4HyperHead, and the
// stream update of DeepseekV4DecoderLayer). Everything here is per token and tiny (M = 4 in the
// released models), so plain loops; the projections to the mix logits are linear() calls made
// by the model.
//
// Dimension letters: T tokens, M streams, D model width.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_matrix.h"

namespace dsv4::kernels::cpu {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Sinkhorn-Knopp on one M×M matrix (row-major), from the logits to the doubly-stochastic mixer:
// row softmax + eps, then column normalisation, then (rows, columns) n_iters − 1 more times,
// in the order transformers uses (it starts on the columns because softmax made rows sum to 1).
void sinkhorn(float* c, int64_t m, int64_t n_iters, float eps) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * m;
    float max = row[0];
    for (int64_t j = 1; j < m; ++j) max = std::max(max, row[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < m; ++j) sum += (row[j] = std::exp(row[j] - max));
    for (int64_t j = 0; j < m; ++j) row[j] = row[j] / sum + eps;
  }
  auto normalise_columns = [&] {
    for (int64_t j = 0; j < m; ++j) {
      float sum = 0.0f;
      for (int64_t i = 0; i < m; ++i) sum += c[i * m + j];
      for (int64_t i = 0; i < m; ++i) c[i * m + j] /= sum + eps;
    }
  };
  auto normalise_rows = [&] {
    for (int64_t i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (int64_t j = 0; j < m; ++j) sum += c[i * m + j];
      for (int64_t j = 0; j < m; ++j) c[i * m + j] /= sum + eps;
    }
  };
  normalise_columns();
  for (int64_t it = 1; it < n_iters; ++it) {
    normalise_rows();
    normalise_columns();
  }
}

}  // namespace

void hc_repeat(const TensorView& x, const TensorView& out) {
  const RowMatrix in = hc_repeat_input(x, out);
  const int64_t m = out.size(1);
  float* dst = out.data_as<float>();
  for (int64_t t = 0; t < in.n_rows; ++t) {
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(in.row(t), in.n_cols, dst + (t * m + i) * in.n_cols);
    }
  }
}

void hc_split_sinkhorn(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                       int64_t n_sinkhorn_iters, float eps, const HcMix& out) {
  const RowMatrix mix = as_rows(mixes, "hc_split_sinkhorn mixes");
  const RowMatrix pre = as_rows(out.pre, "hc_split_sinkhorn pre");
  const RowMatrix post = as_rows(out.post, "hc_split_sinkhorn post");
  const int64_t m = pre.n_cols;
  DSV4_CHECK(mix.n_cols == (2 + m) * m && pre.n_rows == mix.n_rows && post.n_rows == mix.n_rows &&
                 post.n_cols == m,
             "hc_split_sinkhorn: mixes must be [T, (2+M)·M] with pre, post [T, M]");
  DSV4_CHECK(out.comb.dtype == DType::kF32 && out.comb.is_contiguous() &&
                 out.comb.numel() == mix.n_rows * m * m,
             "hc_split_sinkhorn: comb must be f32 [T, M, M]");
  const float* s = f32_vector(scale, 3, "hc_split_sinkhorn scale");
  const float* b = f32_vector(base, (2 + m) * m, "hc_split_sinkhorn base");
  float* comb = out.comb.data_as<float>();
#pragma omp parallel for if (mix.n_rows > 64)
  for (int64_t t = 0; t < mix.n_rows; ++t) {
    const float* logits = mix.row(t);
    for (int64_t i = 0; i < m; ++i) {
      pre.row(t)[i] = sigmoid(logits[i] * s[0] + b[i]) + eps;
      post.row(t)[i] = 2.0f * sigmoid(logits[m + i] * s[1] + b[m + i]);
    }
    float* c = comb + t * m * m;
    for (int64_t k = 0; k < m * m; ++k) c[k] = logits[2 * m + k] * s[2] + b[2 * m + k];
    sinkhorn(c, m, n_sinkhorn_iters, eps);
  }
}

void hc_head_weights(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                     float eps, const TensorView& pre) {
  const RowMatrix mix = as_rows(mixes, "hc_head_weights mixes");
  const RowMatrix out = as_rows(pre, "hc_head_weights pre");
  DSV4_CHECK(mix.n_rows == out.n_rows && mix.n_cols == out.n_cols, "hc_head_weights: shapes");
  const float s = *f32_vector(scale, 1, "hc_head_weights scale");
  const float* b = f32_vector(base, mix.n_cols, "hc_head_weights base");
  for (int64_t t = 0; t < mix.n_rows; ++t) {
    for (int64_t i = 0; i < mix.n_cols; ++i)
      out.row(t)[i] = sigmoid(mix.row(t)[i] * s + b[i]) + eps;
  }
}

void hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& y) {
  const RowMatrix w = as_rows(pre, "hc_collapse pre");
  const RowMatrix out = as_rows(y, "hc_collapse y");
  const int64_t m = w.n_cols, d = out.n_cols;
  DSV4_CHECK(x.dtype == DType::kF32 && x.is_contiguous() && x.numel() == w.n_rows * m * d &&
                 out.n_rows == w.n_rows,
             "hc_collapse: x must be f32 [T, M, D] contiguous");
  const float* streams = x.data_as<const float>();
#pragma omp parallel for if (w.n_rows * m * d > (1 << 16))
  for (int64_t t = 0; t < w.n_rows; ++t) {
    float* dst = out.row(t);
    for (int64_t k = 0; k < d; ++k) dst[k] = 0.0f;
    for (int64_t i = 0; i < m; ++i) {
      const float p = w.row(t)[i];
      const float* src = streams + (t * m + i) * d;
      for (int64_t k = 0; k < d; ++k) dst[k] += p * src[k];
    }
  }
}

void hc_expand(const TensorView& f, const TensorView& residual, const TensorView& post,
               const TensorView& comb, const TensorView& out) {
  const RowMatrix block = as_rows(f, "hc_expand f");
  const RowMatrix place = as_rows(post, "hc_expand post");
  const int64_t n_tokens = block.n_rows, m = place.n_cols, d = block.n_cols;
  const Shape streams_shape{n_tokens, m, d};
  DSV4_CHECK(residual.dtype == DType::kF32 && residual.is_contiguous() &&
                 residual.numel() == streams_shape.numel() && out.dtype == DType::kF32 &&
                 out.is_contiguous() && out.numel() == streams_shape.numel() &&
                 comb.is_contiguous() && comb.numel() == n_tokens * m * m,
             "hc_expand: residual, out must be f32 [T, M, D], comb [T, M, M]");
  DSV4_CHECK(out.data != residual.data, "hc_expand: out aliases residual");
  const float* res = residual.data_as<const float>();
  const float* mixer = comb.data_as<const float>();
  float* dst = out.data_as<float>();
#pragma omp parallel for if (n_tokens * m * m * d > (1 << 16))
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* c = mixer + t * m * m;
    for (int64_t j = 0; j < m; ++j) {
      float* o = dst + (t * m + j) * d;
      const float p = place.row(t)[j];
      for (int64_t k = 0; k < d; ++k) o[k] = p * block.row(t)[k];
      for (int64_t i = 0; i < m; ++i) {
        const float w = c[i * m + j];
        const float* r = res + (t * m + i) * d;
        for (int64_t k = 0; k < d; ++k) o[k] += w * r[k];
      }
    }
  }
}

}  // namespace dsv4::kernels::cpu
