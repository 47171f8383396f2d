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
#include "kernels/row_matrix.h"

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
  const auto [mix, pre, post, comb, s, b] = hc_split_operands(mixes, scale, base, out);
  const int64_t m = pre.n_cols;
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
  const auto [streams, w, out] = hc_collapse_operands(x, pre, y);
  const int64_t m = w.n_cols, d = out.n_cols;
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

void hc_expand(const TensorView& f, const TensorView& f_addend, const TensorView& residual,
               const TensorView& post, const TensorView& comb, const TensorView& out) {
  const auto [block, place, res, mixer, dst, addend] =
      hc_expand_operands(f, f_addend, residual, post, comb, out);
  const int64_t n_tokens = block.n_rows, m = place.n_cols, d = block.n_cols;
#pragma omp parallel for if (n_tokens * m * m * d > (1 << 16))
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* c = mixer + t * m * m;
    const float* f_row = block.row(t);
    std::vector<float> sum;  // f + f_addend: add, then the expand
    if (addend != nullptr) {
      sum.resize(d);
      for (int64_t k = 0; k < d; ++k) sum[k] = f_row[k] + addend[t * block.row_stride + k];
      f_row = sum.data();
    }
    for (int64_t j = 0; j < m; ++j) {
      float* o = dst + (t * m + j) * d;
      const float p = place.row(t)[j];
      for (int64_t k = 0; k < d; ++k) o[k] = p * f_row[k];
      for (int64_t i = 0; i < m; ++i) {
        const float w = c[i * m + j];
        const float* r = res + (t * m + i) * d;
        for (int64_t k = 0; k < d; ++k) o[k] += w * r[k];
      }
    }
  }
}

// The fused ops are their parts in order: the CUDA kernels give these bits in one launch each.
void hc_pre_norm(const HcPreNormParams& p) {
  cpu::hc_split_sinkhorn(p.mixes, p.scale, p.base, p.n_sinkhorn_iters, p.hc_eps, p.mix);
  cpu::hc_collapse(p.streams, p.mix.pre, p.y);
  cpu::rms_norm(p.y, p.norm_weight, p.norm_eps, p.y);
}

void hc_expand_norm(const TensorView& f, const TensorView& f_addend, const TensorView& residual,
                    const TensorView& post, const TensorView& comb, float eps,
                    const TensorView& out, const TensorView& normed) {
  const HcExpandOperands o = hc_expand_operands(f, f_addend, residual, post, comb, out);
  cpu::hc_expand(f, f_addend, residual, post, comb, out);
  cpu::rms_norm(out.reshaped({o.f.n_rows, o.post.n_cols * o.f.n_cols}), TensorView{}, eps, normed);
}

}  // namespace dsv4::kernels::cpu
