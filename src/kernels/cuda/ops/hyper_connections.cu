// mHC on CUDA (kernels/ops.h has the contracts; kernels/cpu/hyper_connections.cpp the
// reference). The mixes are per token and tiny (M = 4 in the released models), so the Sinkhorn
// kernel runs one warp per token (one thread for M > 5) on its [M, M] slice of `comb`, in the
// CPU's order.
// The stream ops (repeat, collapse, expand) run one thread per output element (expand: per
// column of a token, for all its streams) and sum over the streams in the CPU's order with explicitly rounded products and sums (no fused multiply-add),
// which makes them bit-identical to the reference.
//
// A decode step's mHC is small ops of one or a few rows, each a latency-bound launch: per site
// the split and Sinkhorn, the collapse and the block's input norm, then the expand and the next
// site's input norm. The fused ops do each group in one launch with the same arithmetic in the
// same order, so with the same bits: hc_pre_norm runs the collapse and its norm on a cluster a
// token (device/cluster_rms.cuh) while clusters of their own run the Sinkhorn beside them, and
// hc_expand_norm computes a token's new streams and their norm on a cluster. A fused kernel's
// thread keeps its elements in registers from the loads to the one normed store, so a token's
// row costs one memory round trip and two cluster barriers, and its Sinkhorn (the longer chain
// at decode: 2 · n_iters dependent passes) unrolls for M = 4. hc_pre_norm_fp8 also quantizes
// the block input from those registers for the FP8 linears it feeds (device/fp8_quantize.cuh).
//
// Dimension letters: T tokens, M streams, D model width.
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/cluster_rms.cuh"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/fp8_quantize.cuh"

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
// T = 1 on the H200; here a lane divides one element a pass. M is a template argument so that
// the gathers unroll: a pass is then M independent shuffles, M dependent adds and one division
// (~100 cycles), 2 · n_iters passes the token's critical path. Lanes past M·M compute garbage
// that no owner reads.
template <int kM>
class WarpSinkhorn {
  static_assert(kM * kM <= 32, "a warp holds the matrix");

 public:
  __device__ explicit WarpSinkhorn(float eps)
      : eps_(eps), row_(threadIdx.x % 32 / kM * kM), column_(threadIdx.x % 32 % kM) {}

  __device__ float run(float logit, int64_t n_iters) const {
    float max = gather(logit, row_);
#pragma unroll
    for (int j = 1; j < kM; ++j) max = fmaxf(max, gather(logit, row_ + j));
    const float e = expf(logit - max);
    float v = e / row_sum(e) + eps_;
    for (int64_t it = 0; it < n_iters; ++it) {
      if (it > 0) v = v / (row_sum(v) + eps_);
      v = v / (column_sum(v) + eps_);
    }
    return v;
  }

 private:
  __device__ static float gather(float v, int lane) { return __shfl_sync(0xffffffffu, v, lane); }
  __device__ float row_sum(float v) const {
    float values[kM];
#pragma unroll
    for (int j = 0; j < kM; ++j) values[j] = gather(v, row_ + j);
    return sum_in_order(values);
  }
  __device__ float column_sum(float v) const {
    float values[kM];
#pragma unroll
    for (int i = 0; i < kM; ++i) values[i] = gather(v, column_ + i * kM);
    return sum_in_order(values);
  }
  __device__ static float sum_in_order(const float (&values)[kM]) {
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kM; ++j) sum += values[j];
    return sum;
  }

  float eps_;
  int row_, column_;  // the first lane of this lane's row, and of its column
};

// WarpSinkhorn<m>::run for m in [1, 5].
__device__ float warp_sinkhorn_run(int m, float eps, float logit, int64_t n_iters) {
  switch (m) {
    case 1:
      return WarpSinkhorn<1>(eps).run(logit, n_iters);
    case 2:
      return WarpSinkhorn<2>(eps).run(logit, n_iters);
    case 3:
      return WarpSinkhorn<3>(eps).run(logit, n_iters);
    case 4:
      return WarpSinkhorn<4>(eps).run(logit, n_iters);
    default:
      return WarpSinkhorn<5>(eps).run(logit, n_iters);
  }
}

struct SplitArgs {
  RowMatrix mixes, pre, post;
  float* comb;
  const float* scale;  // [3]
  const float* base;   // [(2+M)·M]
  int64_t n_sinkhorn_iters;
  float eps;

  __device__ const float* logits(int64_t t) const { return mixes.data + t * mixes.row_stride; }
  // pre[t, i] from its logit (also what the fused collapse weighs the streams with).
  __device__ float pre_weight(int64_t t, int64_t i) const {
    return sigmoid(__fadd_rn(__fmul_rn(logits(t)[i], scale[0]), base[i])) + eps;
  }
  // pre[t, i] and post[t, i] from their logits.
  __device__ void split(int64_t t, int64_t i) const {
    const int64_t m = pre.n_cols;
    pre.data[t * pre.row_stride + i] = pre_weight(t, i);
    post.data[t * post.row_stride + i] =
        2.0f * sigmoid(__fadd_rn(__fmul_rn(logits(t)[m + i], scale[1]), base[m + i]));
  }
  // comb's logit k of token t, before the Sinkhorn iterations.
  __device__ float comb_logit(int64_t t, int64_t k) const {
    const int64_t m = pre.n_cols;
    return __fadd_rn(__fmul_rn(logits(t)[2 * m + k], scale[2]), base[2 * m + k]);
  }
};

// A warp a token up to M = 5 (the released models have 4), else a thread.
__host__ __device__ bool warp_sinkhorn(int64_t m) { return m * m <= 32; }

// Split and Sinkhorn of the token of this thread's index i among the threads of a grid (a warp
// a token when warp_sinkhorn, else a thread), in place in `comb`.
__device__ void split_sinkhorn(const SplitArgs& a, int64_t i) {
  const int64_t m = a.pre.n_cols;
  if (!warp_sinkhorn(m)) {
    const int64_t t = i;
    if (t >= a.mixes.n_rows) return;
    for (int64_t k = 0; k < m; ++k) a.split(t, k);
    float* c = a.comb + t * m * m;
    for (int64_t k = 0; k < m * m; ++k) c[k] = a.comb_logit(t, k);
    sinkhorn(c, m, a.n_sinkhorn_iters, a.eps);
    return;
  }
  const int64_t t = i / 32;
  if (t >= a.mixes.n_rows) return;  // warp-uniform
  const int lane = static_cast<int>(i % 32), mi = static_cast<int>(m);
  const bool owner = lane < mi * mi;
  // The logit's load before the split's stores, which the compiler must assume may alias it.
  const float logit = owner ? a.comb_logit(t, lane) : 0.0f;
  if (lane < mi) a.split(t, lane);
  const float v = warp_sinkhorn_run(mi, a.eps, logit, a.n_sinkhorn_iters);
  if (owner) a.comb[t * m * m + lane] = v;
}

// Threads hc_split_sinkhorn's tokens take.
int64_t sinkhorn_threads(int64_t n_tokens, int64_t m) {
  return warp_sinkhorn(m) ? 32 * n_tokens : n_tokens;
}

__global__ void hc_split_sinkhorn_kernel(SplitArgs a) {
  split_sinkhorn(a, blockIdx.x * int64_t{blockDim.x} + threadIdx.x);
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

// Element k of token t's collapse, Σ_s pre[s] · streams[t, s, k] in the CPU's order; pre is
// the token's M weights.
__device__ __forceinline__ float collapse_element(const float* streams, const float* pre, int64_t m,
                                                  int64_t d, int64_t t, int64_t k) {
  float acc = 0.0f;
  for (int64_t s = 0; s < m; ++s) {
    acc = __fadd_rn(acc, __fmul_rn(pre[s], streams[(t * m + s) * d + k]));
  }
  return acc;
}

__global__ void hc_collapse_kernel(HcCollapseOperands o) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t m = o.pre.n_cols, d = o.y.n_cols;
  if (i >= o.y.n_rows * d) return;
  const int64_t t = i / d, k = i % d;
  o.y.data[t * o.y.row_stride + k] =
      collapse_element(o.streams, o.pre.data + t * o.pre.row_stride, m, d, t, k);
}

// Element i of token t's new streams [M·D] (stream i / D, column i % D), in the CPU's order.
__device__ __forceinline__ float expand_element(const HcExpandOperands& o, int64_t t, int64_t i) {
  const int64_t m = o.post.n_cols, d = o.f.n_cols, j = i / d, k = i % d;
  const float* c = o.comb + t * m * m;
  float f = o.f.data[t * o.f.row_stride + k];
  if (o.f_addend != nullptr) f = __fadd_rn(f, o.f_addend[t * o.f.row_stride + k]);
  float acc = __fmul_rn(o.post.data[t * o.post.row_stride + j], f);
  for (int64_t s = 0; s < m; ++s) {
    acc = __fadd_rn(acc, __fmul_rn(c[s * m + j], o.residual[(t * m + s) * d + k]));
  }
  return acc;
}

// A thread a column k of token t: its M new streams' elements, which read the same M residual
// elements and the same f, so a column's inputs come through L2 once, not once a stream (a
// prefill's streams are hundreds of MB).
__global__ void hc_expand_kernel(HcExpandOperands o) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t m = o.post.n_cols, d = o.f.n_cols;
  if (i >= o.f.n_rows * d) return;
  const int64_t t = i / d, k = i % d;
  for (int64_t j = 0; j < m; ++j) o.out[(t * m + j) * d + k] = expand_element(o, t, j * d + k);
}

// ---- The fused ops: a cluster a token (grid [kRmsClusterBlocks, rows]) ----
// Each thread holds its lane's elements of the token's row in registers (ClusterRow): every
// load (streams, block output, mixes, norm weight) goes out before the first result waits on
// one, and each element is stored once, normed. The stream count is fixed at compile time so
// that the loops over the streams unroll; other M run the parts.

inline constexpr int kFusedStreams = 4;  // M of the released models

struct PreNormArgs {
  SplitArgs split;
  const float* streams;  // [T, M, D]
  RowMatrix y;           // [T, D]
  const float* weight;   // [D], or nullptr
  float eps;
  Fp8Out y_fp8;  // y quantized too (hc_pre_norm_fp8's kernel)
};

// Cluster rows [0, T) collapse and norm token blockIdx.y; the rows after them run the split
// and Sinkhorn, a warp a token over all their blocks (no cluster barrier there). Every thread
// computes the token's M collapse weights itself, with the split's expression (so the bits of
// `pre`), while its stream loads are in flight: no barrier waits for them.
template <int kPerLane, bool kQuantize>
__global__ void __cluster_dims__(kRmsClusterBlocks, 1, 1) __launch_bounds__(kRmsClusterThreads)
    hc_pre_norm_kernel(PreNormArgs a) {
  constexpr int kM = kFusedStreams;
  const int64_t n_tokens = a.split.mixes.n_rows, t = blockIdx.y;
  if (t >= n_tokens) {
    const int64_t block = (t - n_tokens) * kRmsClusterBlocks + blockIdx.x;
    split_sinkhorn(a.split, block * kRmsClusterThreads + threadIdx.x);
    return;
  }
  const int64_t d = a.y.n_cols;
  ClusterRow<kPerLane> row = cluster_row<kPerLane>(nullptr, d, a.weight);
  float x[kPerLane][kM];  // the lane's elements of each stream
#pragma unroll
  for (int q = 0; q < kPerLane; ++q) {
#pragma unroll
    for (int s = 0; s < kM; ++s) {
      x[q][s] = row.holds(q, 0) ? a.streams[(t * kM + s) * d + row.index(q, 0)] : 0.0f;
    }
  }
  float pre[kM];
#pragma unroll
  for (int s = 0; s < kM; ++s) pre[s] = a.split.pre_weight(t, s);
#pragma unroll
  for (int q = 0; q < kPerLane; ++q) {
    float acc = 0.0f;  // collapse_element's order
#pragma unroll
    for (int s = 0; s < kM; ++s) acc = __fadd_rn(acc, __fmul_rn(pre[s], x[q][s]));
    row.v[q][0] = acc;
  }
  const float inv_rms = cluster_inv_rms(row, a.eps);
  row.store_normed(a.y.data + t * a.y.row_stride, inv_rms);
  if constexpr (kQuantize) {
    store_normed_fp8(row, inv_rms, a.y_fp8.row_codes(t), a.y_fp8.row_scales(t));
  }
  cluster_rms_done();
}

// v[0] if j = 0, v[1] if j = 1, …: a register array read at an index known only at run time,
// by selects rather than through local memory.
template <int kCount>
__device__ __forceinline__ float select(const float (&v)[kCount], int j) {
  float r = v[0];
#pragma unroll
  for (int s = 1; s < kCount; ++s) r = j == s ? v[s] : r;
  return r;
}

// out = m[j]: a row of a register matrix at an index known only at run time (select's way).
template <int kCount>
__device__ __forceinline__ void select_row(const float (&m)[kCount][kCount], int j,
                                           float (&out)[kCount]) {
#pragma unroll
  for (int c = 0; c < kCount; ++c) out[c] = m[0][c];
#pragma unroll
  for (int r = 1; r < kCount; ++r) {
#pragma unroll
    for (int c = 0; c < kCount; ++c) out[c] = j == r ? m[r][c] : out[c];
  }
}

// New stream j's element from its column's block output f and the column's M residual
// elements, expand_element's order; post_j and comb_j[s] are stream j's weights.
template <int kM>
__device__ __forceinline__ float expanded(float post_j, const float (&comb_j)[kM], float f,
                                          const float (&residual)[kM]) {
  float acc = __fmul_rn(post_j, f);
#pragma unroll
  for (int s = 0; s < kM; ++s) acc = __fadd_rn(acc, __fmul_rn(comb_j[s], residual[s]));
  return acc;
}

// Token blockIdx.y's new streams (expand_element's order) and their unweighted norm. Element i
// of the [M·D] row is stream j = i / D, column k = i % D. When the row fills every lane's
// kPerLane elements (V4-Flash's 4 · 4096 = 16 · kRmsNormLanes) the lanes divide D, and a lane's
// elements are all M streams of its D / kRmsNormLanes columns, so it loads each column's block
// output and residuals once for the M elements it computes from them (a prefill's streams are
// hundreds of MB); otherwise (V4-Pro's 28 of 32 a lane) a lane steps i by kRmsNormLanes, so
// (j, k) steps by the quotient and remainder of kRmsNormLanes by D, and loads a column's inputs
// once an element.
//
// Blocks an SM: a prompt's thousands of rows are bound by how many rows' loads an SM keeps in
// flight, and at V4-Flash's 16 elements a lane the 141 registers ptxas took on its own held 3
// blocks; at most 96 (no spill) hold 5. V4-Pro's 32 would spill there: ptxas's own choice.
constexpr int expand_norm_blocks_an_sm(int per_lane) { return per_lane <= 16 ? 5 : 1; }
template <int kPerLane>
__global__ void __cluster_dims__(kRmsClusterBlocks, 1, 1)
    __launch_bounds__(kRmsClusterThreads, expand_norm_blocks_an_sm(kPerLane))
        hc_expand_norm_kernel(HcExpandOperands o, RowMatrix normed, float eps) {
  constexpr int kM = kFusedStreams;
  const int64_t t = blockIdx.y;
  const int d = static_cast<int>(o.f.n_cols);
  ClusterRow<kPerLane> row = cluster_row<kPerLane>(nullptr, int64_t{kM} * d, nullptr);
  const float* f = o.f.data + t * o.f.row_stride;
  const float* f_addend = o.f_addend != nullptr ? o.f_addend + t * o.f.row_stride : nullptr;
  // Column k's block output, f + f_addend as one rounded add (expand_element's).
  const auto block_out = [&](int k) {
    return f_addend != nullptr ? __fadd_rn(f[k], f_addend[k]) : f[k];
  };
  const float* residual = o.residual + t * kM * d;
  float post[kM], comb[kM][kM];  // comb[j][s]: stream s's weight in new stream j
#pragma unroll
  for (int j = 0; j < kM; ++j) post[j] = o.post.data[t * o.post.row_stride + j];
#pragma unroll
  for (int s = 0; s < kM; ++s) {
#pragma unroll
    for (int j = 0; j < kM; ++j) comb[j][s] = o.comb[(t * kM + s) * kM + j];
  }
  const int lane = static_cast<int>(row.first_lane);
  float* out = o.out + t * kM * d;
  if (int64_t{kM} * d == int64_t{kPerLane} * kRmsNormLanes) {
    constexpr int kColumns = kPerLane / kM;  // element j · kColumns + u: stream j, column u
    float fc[kColumns], rc[kColumns][kM];
#pragma unroll
    for (int u = 0; u < kColumns; ++u) {
      const int k = lane + u * static_cast<int>(kRmsNormLanes);
      fc[u] = block_out(k);
#pragma unroll
      for (int s = 0; s < kM; ++s) rc[u][s] = residual[int64_t{s} * d + k];
    }
#pragma unroll
    for (int j = 0; j < kM; ++j) {
#pragma unroll
      for (int u = 0; u < kColumns; ++u) {
        const int q = j * kColumns + u;
        row.v[q][0] = expanded(post[j], comb[j], fc[u], rc[u]);
        out[row.index(q, 0)] = row.v[q][0];
      }
    }
  } else {
    const int step_j = kRmsNormLanes / d, step_k = kRmsNormLanes % d;
    int j = lane / d, k = lane % d;
    float fk[kPerLane], r[kPerLane][kM];
    int js[kPerLane];
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) {
      js[q] = j;
      fk[q] = row.holds(q, 0) ? block_out(k) : 0.0f;
#pragma unroll
      for (int s = 0; s < kM; ++s) r[q][s] = row.holds(q, 0) ? residual[int64_t{s} * d + k] : 0.0f;
      j += step_j;
      k += step_k;
      if (k >= d) {
        k -= d;
        ++j;
      }
    }
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) {
      float comb_j[kM];
      select_row(comb, js[q], comb_j);
      row.v[q][0] = expanded(select(post, js[q]), comb_j, fk[q], r[q]);
      if (row.holds(q, 0)) out[row.index(q, 0)] = row.v[q][0];
    }
  }
  row.store_normed(normed.data + t * normed.row_stride, cluster_inv_rms(row, eps));
  cluster_rms_done();
}

SplitArgs split_args(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                     int64_t n_sinkhorn_iters, float eps, const HcMix& out) {
  const HcSplitOperands o = hc_split_operands(mixes, scale, base, out);
  return {o.mixes, o.pre, o.post, o.comb, o.scale, o.base, n_sinkhorn_iters, eps};
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
  const SplitArgs a = split_args(mixes, scale, base, n_sinkhorn_iters, eps, out);
  const int64_t n_threads = sinkhorn_threads(a.mixes.n_rows, a.pre.n_cols);
  if (n_threads == 0) return;
  hc_split_sinkhorn_kernel<<<element_blocks(n_threads), kElementThreads, 0, op_stream()>>>(a);
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
  const HcCollapseOperands o = hc_collapse_operands(x, pre, y);
  const int64_t n = o.y.n_rows * o.y.n_cols;
  if (n == 0) return;
  hc_collapse_kernel<<<element_blocks(n), kElementThreads, 0, op_stream()>>>(o);
  check_launch();
}

void hc_expand(const TensorView& f, const TensorView& f_addend, const TensorView& residual,
               const TensorView& post, const TensorView& comb, const TensorView& out) {
  const HcExpandOperands o = hc_expand_operands(f, f_addend, residual, post, comb, out);
  const int64_t n = o.f.n_rows * o.f.n_cols;
  if (n == 0 || o.post.n_cols == 0) return;
  hc_expand_kernel<<<element_blocks(n), kElementThreads, 0, op_stream()>>>(o);
  check_launch();
}

namespace {

// hc_pre_norm, and with `quantized` the block input quantized to it too: one launch where the
// fused kernel takes the shape, else the parts.
void run_hc_pre_norm(const HcPreNormParams& p, const Fp8Activation* quantized) {
  const Fp8Out y_fp8 = quantized != nullptr ? fp8_out(p.y, *quantized) : Fp8Out{};
  const SplitArgs a = split_args(p.mixes, p.scale, p.base, p.n_sinkhorn_iters, p.hc_eps, p.mix);
  const HcCollapseOperands c = hc_collapse_operands(p.streams, p.mix.pre, p.y);
  const RmsNormOperands r = rms_norm_operands(p.y, p.norm_weight, p.y);
  const int64_t n_tokens = a.mixes.n_rows, m = a.pre.n_cols;
  if (n_tokens == 0) return;
  // The Sinkhorn's clusters after the tokens' ones.
  const int64_t sinkhorn_blocks = ceil_div(sinkhorn_threads(n_tokens, m), kRmsClusterThreads);
  const int64_t n_cluster_rows = n_tokens + ceil_div(sinkhorn_blocks, kRmsClusterBlocks);
  const bool fused =
      m == kFusedStreams && n_cluster_rows <= kMaxClusterRows &&
      launch_with_lane_elements(c.y.n_cols, [&](auto per_lane) {
        const dim3 grid(kRmsClusterBlocks, static_cast<unsigned>(n_cluster_rows));
        const PreNormArgs args{a, c.streams, c.y, r.weight, p.norm_eps, y_fp8};
        constexpr int kPerLane = decltype(per_lane)::value;
        if (quantized != nullptr) {
          hc_pre_norm_kernel<kPerLane, true><<<grid, kRmsClusterThreads, 0, op_stream()>>>(args);
        } else {
          hc_pre_norm_kernel<kPerLane, false><<<grid, kRmsClusterThreads, 0, op_stream()>>>(args);
        }
      });
  if (!fused) {  // the three ops, the same bits
    cuda::hc_split_sinkhorn(p.mixes, p.scale, p.base, p.n_sinkhorn_iters, p.hc_eps, p.mix);
    cuda::hc_collapse(p.streams, p.mix.pre, p.y);
    if (quantized == nullptr) {
      cuda::rms_norm(p.y, p.norm_weight, p.norm_eps, p.y);
    } else {
      cuda::rms_norm_fp8(p.y, p.norm_weight, p.norm_eps, p.y, *quantized);
    }
    return;
  }
  check_launch();
}

}  // namespace

void hc_pre_norm(const HcPreNormParams& p) { run_hc_pre_norm(p, nullptr); }

void hc_pre_norm_fp8(const HcPreNormParams& p, const Fp8Activation& y_fp8) {
  run_hc_pre_norm(p, &y_fp8);
}

void hc_expand_norm(const TensorView& f, const TensorView& f_addend, const TensorView& residual,
                    const TensorView& post, const TensorView& comb, float eps,
                    const TensorView& out, const TensorView& normed) {
  const HcExpandOperands o = hc_expand_operands(f, f_addend, residual, post, comb, out);
  const int64_t n_tokens = o.f.n_rows, width = o.post.n_cols * o.f.n_cols;
  const TensorView streams = out.reshaped({n_tokens, width});
  const RmsNormOperands r = rms_norm_operands(streams, TensorView{}, normed);
  if (n_tokens == 0) return;
  const bool fused = o.post.n_cols == kFusedStreams && n_tokens <= kMaxClusterRows &&
                     launch_with_lane_elements(width, [&](auto per_lane) {
                       const dim3 grid(kRmsClusterBlocks, static_cast<unsigned>(n_tokens));
                       hc_expand_norm_kernel<decltype(per_lane)::value>
                           <<<grid, kRmsClusterThreads, 0, op_stream()>>>(o, r.y, eps);
                     });
  if (!fused) {
    cuda::hc_expand(f, f_addend, residual, post, comb, out);
    cuda::rms_norm(streams, TensorView{}, eps, normed);
    return;
  }
  check_launch();
}

}  // namespace dsv4::kernels::cuda
