// mHC on CUDA (kernels/ops.h has the contracts; kernels/cpu/hyper_connections.cpp the
// reference). The mixes are per token and tiny (M = 4 in the released models), so the Sinkhorn
// kernel runs one warp per token (one thread for M > 5) on its [M, M] slice of `comb`, in the
// CPU's order.
// The stream ops (repeat, collapse, expand) run one thread per output element and sum over the
// streams in the CPU's order with explicitly rounded products and sums (no fused multiply-add),
// which makes them bit-identical to the reference.
//
// Dimension letters: T tokens, M streams, D model width.
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Row softmax + eps, column normalisation, then (rows, columns) n_iters − 1 more times; every
// division adds eps. c is one token's row-major [M, M] matrix of logits.
__device__ void sinkhorn(float* c, int64_t m, int64_t n_iters, float eps) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * m;
    float max = row[0];
    for (int64_t j = 1; j < m; ++j) max = fmaxf(max, row[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < m; ++j) sum += (row[j] = expf(row[j] - max));
    for (int64_t j = 0; j < m; ++j) row[j] = row[j] / sum + eps;
  }
  for (int64_t it = 0; it < n_iters; ++it) {
    if (it > 0) {  // rows (the first round starts on the columns: softmax normalised the rows)
      for (int64_t i = 0; i < m; ++i) {
        float sum = 0.0f;
        for (int64_t j = 0; j < m; ++j) sum += c[i * m + j];
        for (int64_t j = 0; j < m; ++j) c[i * m + j] /= sum + eps;
      }
    }
    for (int64_t j = 0; j < m; ++j) {
      float sum = 0.0f;
      for (int64_t i = 0; i < m; ++i) sum += c[i * m + j];
      for (int64_t i = 0; i < m; ++i) c[i * m + j] /= sum + eps;
    }
  }
}

// The same iterations with one warp per token for M·M ≤ 32: lane l owns c[l] (row l / M,
// column l % M), and a row's or column's sum gathers its M values by shuffles and adds them in
// sinkhorn()'s order, so the bits are the same. A thread alone divides one element after the
// other (each division is its own branchy sequence, so they do not overlap): 25 µs a call at
// T = 1 on the H200; here a lane divides one element a pass. Lanes past M·M compute garbage
// that no owner reads.
class WarpSinkhorn {
 public:
  __device__ WarpSinkhorn(int m, float eps) : m_(m), eps_(eps), lane_(threadIdx.x % 32) {}

  __device__ float run(float logit, int64_t n_iters) const {
    float max = gather(logit, 0, 1);
    for (int j = 1; j < m_; ++j) max = fmaxf(max, gather(logit, j, 1));
    const float e = expf(logit - max);
    float v = e / row_sum(e) + eps_;
    for (int64_t it = 0; it < n_iters; ++it) {
      if (it > 0) v = v / (row_sum(v) + eps_);
      v = v / (column_sum(v) + eps_);
    }
    return v;
  }

 private:
  // Element `index` of this lane's row (stride 1) or column (stride M).
  __device__ float gather(float v, int index, int stride) const {
    const int first = stride == 1 ? lane_ / m_ * m_ : lane_ % m_;
    return __shfl_sync(0xffffffffu, v, first + index * stride);
  }
  __device__ float row_sum(float v) const {
    float sum = 0.0f;
    for (int j = 0; j < m_; ++j) sum += gather(v, j, 1);
    return sum;
  }
  __device__ float column_sum(float v) const {
    float sum = 0.0f;
    for (int i = 0; i < m_; ++i) sum += gather(v, i, m_);
    return sum;
  }

  int m_;
  float eps_;
  int lane_;
};

struct SplitArgs {
  RowMatrix mixes, pre, post;
  float* comb;
  const float* scale;  // [3]
  const float* base;   // [(2+M)·M]
  int64_t n_sinkhorn_iters;
  float eps;

  __device__ const float* logits(int64_t t) const { return mixes.data + t * mixes.row_stride; }
  // pre[t, i] and post[t, i] from their logits.
  __device__ void split(int64_t t, int64_t i) const {
    const int64_t m = pre.n_cols;
    const float* l = logits(t);
    pre.data[t * pre.row_stride + i] = sigmoid(__fadd_rn(__fmul_rn(l[i], scale[0]), base[i])) + eps;
    post.data[t * post.row_stride + i] =
        2.0f * sigmoid(__fadd_rn(__fmul_rn(l[m + i], scale[1]), base[m + i]));
  }
  // comb's logit k of token t, before the Sinkhorn iterations.
  __device__ float comb_logit(int64_t t, int64_t k) const {
    const int64_t m = pre.n_cols;
    return __fadd_rn(__fmul_rn(logits(t)[2 * m + k], scale[2]), base[2 * m + k]);
  }
};

// One thread per token, in place in `comb` (any M).
__global__ void hc_split_sinkhorn_kernel(SplitArgs a) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= a.mixes.n_rows) return;
  const int64_t m = a.pre.n_cols;
  for (int64_t i = 0; i < m; ++i) a.split(t, i);
  float* c = a.comb + t * m * m;
  for (int64_t k = 0; k < m * m; ++k) c[k] = a.comb_logit(t, k);
  sinkhorn(c, m, a.n_sinkhorn_iters, a.eps);
}

// One warp per token (M·M ≤ 32).
__global__ void hc_split_sinkhorn_warp_kernel(SplitArgs a) {
  const int64_t t = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  if (t >= a.mixes.n_rows) return;  // warp-uniform
  const int lane = threadIdx.x % 32, m = static_cast<int>(a.pre.n_cols);
  if (lane < m) a.split(t, lane);
  const bool owner = lane < m * m;
  const float v = WarpSinkhorn(m, a.eps).run(owner ? a.comb_logit(t, lane) : 0.0f,
                                             a.n_sinkhorn_iters);
  if (owner) a.comb[t * m * m + lane] = v;
}

__global__ void hc_head_weights_kernel(RowMatrix mixes, RowMatrix pre, const float* scale,
                                       const float* base, float eps) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= mixes.n_rows * mixes.n_cols) return;
  const int64_t t = i / mixes.n_cols, c = i % mixes.n_cols;
  pre.data[t * pre.row_stride + c] =
      sigmoid(__fadd_rn(__fmul_rn(mixes.data[t * mixes.row_stride + c], scale[0]), base[c])) + eps;
}

__global__ void hc_repeat_kernel(RowMatrix in, int64_t m, float* out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t d = in.n_cols;
  if (i >= in.n_rows * m * d) return;
  const int64_t t = i / (m * d), k = i % d;
  out[i] = in.data[t * in.row_stride + k];
}

__global__ void hc_collapse_kernel(const float* streams, RowMatrix pre, RowMatrix out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t m = pre.n_cols, d = out.n_cols;
  if (i >= out.n_rows * d) return;
  const int64_t t = i / d, k = i % d;
  float acc = 0.0f;
  for (int64_t s = 0; s < m; ++s) {
    acc = __fadd_rn(acc, __fmul_rn(pre.data[t * pre.row_stride + s], streams[(t * m + s) * d + k]));
  }
  out.data[t * out.row_stride + k] = acc;
}

__global__ void hc_expand_kernel(RowMatrix f, const float* residual, RowMatrix post,
                                 const float* comb, float* out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t m = post.n_cols, d = f.n_cols;
  if (i >= f.n_rows * m * d) return;
  const int64_t t = i / (m * d), j = (i / d) % m, k = i % d;
  const float* c = comb + t * m * m;
  float acc = __fmul_rn(post.data[t * post.row_stride + j], f.data[t * f.row_stride + k]);
  for (int64_t s = 0; s < m; ++s) {
    acc = __fadd_rn(acc, __fmul_rn(c[s * m + j], residual[(t * m + s) * d + k]));
  }
  out[i] = acc;
}

}  // namespace

void hc_repeat(const TensorView& x, const TensorView& out) {
  const RowMatrix in = hc_repeat_input(x, out);
  const int64_t n = out.numel();
  if (n == 0) return;
  hc_repeat_kernel<<<element_blocks(n), kElementThreads, 0, op_stream()>>>(in, out.size(1),
                                                                           out.data_as<float>());
  check_launch();
}

void hc_split_sinkhorn(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                       int64_t n_sinkhorn_iters, float eps, const HcMix& out) {
  SplitArgs a{as_rows(mixes, "hc_split_sinkhorn mixes"),
              as_rows(out.pre, "hc_split_sinkhorn pre"),
              as_rows(out.post, "hc_split_sinkhorn post"),
              nullptr,
              nullptr,
              nullptr,
              n_sinkhorn_iters,
              eps};
  const int64_t m = a.pre.n_cols, n_tokens = a.mixes.n_rows;
  DSV4_CHECK(a.mixes.n_cols == (2 + m) * m && a.pre.n_rows == n_tokens &&
                 a.post.n_rows == n_tokens && a.post.n_cols == m,
             "hc_split_sinkhorn: mixes must be [T, (2+M)·M] with pre, post [T, M]");
  DSV4_CHECK(out.comb.dtype == DType::kF32 && out.comb.is_contiguous() &&
                 out.comb.numel() == n_tokens * m * m,
             "hc_split_sinkhorn: comb must be f32 [T, M, M]");
  a.comb = out.comb.data_as<float>();
  a.scale = f32_vector(scale, 3, "hc_split_sinkhorn scale");
  a.base = f32_vector(base, (2 + m) * m, "hc_split_sinkhorn base");
  if (n_tokens == 0) return;
  // A warp a token up to M = 5 (the released models have 4), else a thread.
  if (m * m <= 32) {
    hc_split_sinkhorn_warp_kernel<<<element_blocks(32 * n_tokens), kElementThreads, 0,
                                    op_stream()>>>(a);
  } else {
    hc_split_sinkhorn_kernel<<<element_blocks(n_tokens), kElementThreads, 0, op_stream()>>>(a);
  }
  check_launch();
}

void hc_head_weights(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                     float eps, const TensorView& pre) {
  const RowMatrix mix = as_rows(mixes, "hc_head_weights mixes");
  const RowMatrix out = as_rows(pre, "hc_head_weights pre");
  DSV4_CHECK(mix.n_rows == out.n_rows && mix.n_cols == out.n_cols, "hc_head_weights: shapes");
  const float* s = f32_vector(scale, 1, "hc_head_weights scale");
  const float* b = f32_vector(base, mix.n_cols, "hc_head_weights base");
  const int64_t n = mix.n_rows * mix.n_cols;
  if (n == 0) return;
  hc_head_weights_kernel<<<element_blocks(n), kElementThreads, 0, op_stream()>>>(mix, out, s, b,
                                                                                 eps);
  check_launch();
}

void hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& y) {
  const RowMatrix w = as_rows(pre, "hc_collapse pre");
  const RowMatrix out = as_rows(y, "hc_collapse y");
  DSV4_CHECK(x.dtype == DType::kF32 && x.is_contiguous() &&
                 x.numel() == w.n_rows * w.n_cols * out.n_cols && out.n_rows == w.n_rows,
             "hc_collapse: x must be f32 [T, M, D] contiguous");
  const int64_t n = out.n_rows * out.n_cols;
  if (n == 0) return;
  hc_collapse_kernel<<<element_blocks(n), kElementThreads, 0, op_stream()>>>(
      x.data_as<const float>(), w, out);
  check_launch();
}

void hc_expand(const TensorView& f, const TensorView& residual, const TensorView& post,
               const TensorView& comb, const TensorView& out) {
  const RowMatrix block = as_rows(f, "hc_expand f");
  const RowMatrix place = as_rows(post, "hc_expand post");
  const int64_t n_tokens = block.n_rows, m = place.n_cols, d = block.n_cols;
  const int64_t n = n_tokens * m * d;
  DSV4_CHECK(residual.dtype == DType::kF32 && residual.is_contiguous() && residual.numel() == n &&
                 out.dtype == DType::kF32 && out.is_contiguous() && out.numel() == n &&
                 comb.dtype == DType::kF32 && comb.is_contiguous() &&
                 comb.numel() == n_tokens * m * m,
             "hc_expand: residual, out must be f32 [T, M, D], comb [T, M, M]");
  DSV4_CHECK(out.data != residual.data, "hc_expand: out aliases residual");
  if (n == 0) return;
  hc_expand_kernel<<<element_blocks(n), kElementThreads, 0, op_stream()>>>(
      block, residual.data_as<const float>(), place, comb.data_as<const float>(),
      out.data_as<float>());
  check_launch();
}

}  // namespace dsv4::kernels::cuda
