#include <cuda_runtime.h>

#include <algorithm>

#include "format/nvfp4.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/ep/cuda/transfer.h"

namespace dsv4::kernels::ep::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kPlanWarps = 16;

struct Peers {
  RankBuffer at[kMaxRanks];
  int n_ranks;
};

Peers to_params(const PeerSet& set) {
  Peers p{};
  for (int s = 0; s < set.n_ranks; ++s) p.at[s] = set.peers[s];
  p.n_ranks = set.n_ranks;
  return p;
}

__device__ unsigned lanes_below() { return (1u << (threadIdx.x % 32)) - 1u; }

// ---- publish ----

struct PublishParams {
  const int32_t* sel_expert;  // [T, K+1]
  const int32_t* row_of;      // [T, K+1]
  int n_tokens, top_k;
  int32_t first_expert[kMaxRanks + 1];
  RankBuffer own;
};

// Block d (one warp) writes the send list for rank d in token order: a ballot per 32 tokens
// keeps the order without atomics. Block 0 also publishes ids and slot rows.
__global__ void publish_plan_kernel(PublishParams p) {
  const int d = blockIdx.x, lane = threadIdx.x, stride = p.top_k + 1;
  int count = 0;
  for (int base = 0; base < p.n_tokens; base += 32) {
    const int t = base + lane;
    uint32_t mask = 0;
    for (int k = 0; t < p.n_tokens && k < p.top_k; ++k) {
      const int e = p.sel_expert[t * stride + k];
      if (e >= p.first_expert[d] && e < p.first_expert[d + 1]) mask |= 1u << k;
    }
    const unsigned sending = __ballot_sync(kFullMask, mask != 0);
    if (mask != 0) p.own.sends(d)[count + __popc(sending & lanes_below())] = TokenSend{t, mask};
    count += __popc(sending);
  }
  if (lane == 0) p.own.send_count()[d] = count;
  if (d != 0) return;
  for (int i = lane; i < p.n_tokens * p.top_k; i += 32) {
    const int t = i / p.top_k, k = i % p.top_k;
    p.own.ids()[i] = p.sel_expert[t * stride + k];
    p.own.slot_row()[i] = p.row_of[t * stride + k];
  }
}

// ---- receive plan ----

struct ReceiveParams {
  Peers peers;
  int rank, top_k, first, n_local;
  ReceiveTables out;
};

// Slots of send `send` (from peer s) that go to local expert e, in ascending k.
__device__ int matching_slots(const RankBuffer& peer, TokenSend send, int top_k, int expert) {
  int n = 0;
  for (int k = 0; k < top_k; ++k) {
    n += ((send.slot_mask >> k) & 1u) && peer.ids()[send.token * top_k + k] == expert;
  }
  return n;
}

// Warp-wide: rows of local expert e, in (source, token, slot) order; writes them when `write`.
__device__ int expert_rows(const ReceiveParams& p, int e, bool write, int row_base) {
  const int lane = threadIdx.x % 32, expert = p.first + e;
  int written = 0;
  for (int s = 0; s < p.peers.n_ranks; ++s) {
    const RankBuffer& peer = p.peers.at[s];
    const int count = peer.send_count()[p.rank];
    for (int base = 0; base < count; base += 32) {
      const int i = base + lane;
      const TokenSend send = i < count ? peer.sends(p.rank)[i] : TokenSend{0, 0u};
      const int mine = matching_slots(peer, send, p.top_k, expert);
      int before = mine;  // inclusive scan over lanes, then exclusive
      for (int off = 1; off < 32; off *= 2) {
        const int v = __shfl_up_sync(kFullMask, before, off);
        if (lane >= off) before += v;
      }
      before -= mine;
      if (write && mine > 0) {
        int row = row_base + written + before;
        for (int k = 0; k < p.top_k; ++k) {
          if (!((send.slot_mask >> k) & 1u) || peer.ids()[send.token * p.top_k + k] != expert) {
            continue;
          }
          p.out.row_recv[row] = p.out.src_offsets[s] + i;
          p.out.row_home[row] = s;
          p.out.row_slot[row] = send.token * p.top_k + k;
          ++row;
        }
      }
      written += __shfl_sync(kFullMask, before + mine, 31);
    }
  }
  return written;
}

__global__ void receive_plan_kernel(ReceiveParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    p.out.src_offsets[0] = 0;
    for (int s = 0; s < p.peers.n_ranks; ++s) {
      p.out.src_offsets[s + 1] = p.out.src_offsets[s] + p.peers.at[s].send_count()[p.rank];
    }
  }
  __syncthreads();
  for (int s = 0; s < p.peers.n_ranks; ++s) {
    const int count = p.out.src_offsets[s + 1] - p.out.src_offsets[s];
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
      p.out.recv_token[p.out.src_offsets[s] + i] = p.peers.at[s].sends(p.rank)[i].token;
    }
  }
  for (int e = warp; e < p.n_local; e += kPlanWarps) {
    const int n = expert_rows(p, e, false, 0);
    if (lane == 0) p.out.group_offsets[e + 1] = n;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    p.out.group_offsets[0] = 0;
    for (int e = 0; e < p.n_local; ++e) p.out.group_offsets[e + 1] += p.out.group_offsets[e];
    p.out.totals[0] = p.out.src_offsets[p.peers.n_ranks];
    p.out.totals[1] = p.out.group_offsets[p.n_local];
  }
  __syncthreads();
  for (int e = warp; e < p.n_local; e += kPlanWarps) {
    expert_rows(p, e, true, p.out.group_offsets[e]);
  }
}

// ---- row copies ----

struct PullParams {
  Peers peers;
  const int32_t* src_offsets;
  const int32_t* recv_token;
  int packed_words, scale_words;  // 8-byte words per row
  uint2* recv_packed;
  uint2* recv_scale;
};

__global__ void pull_rows_kernel(PullParams p) {
  const int r = blockIdx.x;
  int s = 0;
  while (r >= p.src_offsets[s + 1]) ++s;
  const int64_t t = p.recv_token[r];
  const auto* packed = reinterpret_cast<const uint2*>(p.peers.at[s].staged_packed());
  const auto* scale = reinterpret_cast<const uint2*>(p.peers.at[s].staged_scale());
  for (int i = threadIdx.x; i < p.packed_words; i += blockDim.x) {
    p.recv_packed[int64_t{r} * p.packed_words + i] = packed[t * p.packed_words + i];
  }
  for (int i = threadIdx.x; i < p.scale_words; i += blockDim.x) {
    p.recv_scale[int64_t{r} * p.scale_words + i] = scale[t * p.scale_words + i];
  }
}

struct PushParams {
  float* combine[kMaxRanks];
  const int32_t* slot_row[kMaxRanks];
  const int32_t* row_home;
  const int32_t* row_slot;
  const float4* out;
  int dim4;
};

__global__ void push_rows_kernel(PushParams p) {
  const int r = blockIdx.x, home = p.row_home[r];
  const int64_t dst = p.slot_row[home][p.row_slot[r]];
  auto* combine = reinterpret_cast<float4*>(p.combine[home]) + dst * p.dim4;
  for (int i = threadIdx.x; i < p.dim4; i += blockDim.x) {
    combine[i] = p.out[int64_t{r} * p.dim4 + i];
  }
}

__global__ void place_shared_kernel(const float4* shared_down, const int32_t* row_of, int top_k,
                                    int dim4, float4* combine) {
  const int t = blockIdx.x;
  const int64_t row = row_of[t * (top_k + 1) + top_k];
  for (int i = threadIdx.x; i < dim4; i += blockDim.x) {
    combine[row * dim4 + i] = shared_down[int64_t{t} * dim4 + i];
  }
}

// ---- scales ----

// Non-negative floats order like their bit patterns, so atomicMax on the bits is a float max.
__global__ void amax_kernel(const float* x, int64_t n, unsigned* word) {
  float m = 0.0f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    m = fmaxf(m, fabsf(x[i]));
  }
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, off));
  if (threadIdx.x % 32 == 0) atomicMax(word, __float_as_uint(m));
}

__global__ void agree_decode_kernel(Peers peers, int word, float* decode) {
  const int lane = threadIdx.x;
  float m = lane < peers.n_ranks ? *(volatile float*)(peers.at[lane].scales() + word) : 0.0f;
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, off));
  if (lane == 0) decode[0] = format::GlobalScale::from_amax(m).decode;
}

}  // namespace

void launch_publish_plan(const int32_t* sel_expert, const int32_t* row_of, int n_tokens, int top_k,
                         const ExpertSharding& sharding, const RankBuffer& own) {
  PublishParams p{};
  p.sel_expert = sel_expert;
  p.row_of = row_of;
  p.n_tokens = n_tokens;
  p.top_k = top_k;
  for (int r = 0; r <= sharding.n_ranks(); ++r) {
    p.first_expert[r] = static_cast<int32_t>(sharding.first_expert(r));
  }
  p.own = own;
  publish_plan_kernel<<<sharding.n_ranks(), 32, 0, cudaStreamPerThread>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

void launch_receive_plan(const PeerSet& peers, int rank, int top_k, const ExpertSharding& sharding,
                         const ReceiveTables& out) {
  ReceiveParams p{to_params(peers),
                  rank,
                  top_k,
                  static_cast<int>(sharding.first_expert(rank)),
                  static_cast<int>(sharding.n_local_experts(rank)),
                  out};
  receive_plan_kernel<<<1, 32 * kPlanWarps, 0, cudaStreamPerThread>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

void launch_pull_rows(const PeerSet& peers, const ReceiveTables& plan, int n_recv, int64_t dim,
                      uint8_t* recv_packed, uint8_t* recv_scale) {
  DSV4_CHECK(dim % 128 == 0, "ep pull: D=%lld is not a multiple of 128", (long long)dim);
  if (n_recv == 0) return;
  PullParams p{to_params(peers),
               plan.src_offsets,
               plan.recv_token,
               static_cast<int>(dim / 2 / 8),
               static_cast<int>(dim / format::kNvfp4BlockSize / 8),
               reinterpret_cast<uint2*>(recv_packed),
               reinterpret_cast<uint2*>(recv_scale)};
  pull_rows_kernel<<<n_recv, 128, 0, cudaStreamPerThread>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

void launch_push_rows(float* const* combine, const int32_t* const* slot_row, int n_ranks,
                      const ReceiveTables& plan, int n_rows, int64_t dim, const float* out) {
  if (n_rows == 0) return;
  PushParams p{};
  for (int s = 0; s < n_ranks; ++s) {
    p.combine[s] = combine[s];
    p.slot_row[s] = slot_row[s];
  }
  p.row_home = plan.row_home;
  p.row_slot = plan.row_slot;
  p.out = reinterpret_cast<const float4*>(out);
  p.dim4 = static_cast<int>(dim / 4);
  push_rows_kernel<<<n_rows, 256, 0, cudaStreamPerThread>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

void launch_place_shared(const float* shared_down, const int32_t* row_of, int n_tokens, int top_k,
                         int64_t dim, float* combine) {
  if (n_tokens == 0) return;
  place_shared_kernel<<<n_tokens, 256, 0, cudaStreamPerThread>>>(
      reinterpret_cast<const float4*>(shared_down), row_of, top_k, static_cast<int>(dim / 4),
      reinterpret_cast<float4*>(combine));
  DSV4_CUDA_CHECK(cudaGetLastError());
}

void launch_amax(const float* x, int64_t n, float* word) {
  if (n == 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 1024));
  amax_kernel<<<blocks, 256, 0, cudaStreamPerThread>>>(x, n, reinterpret_cast<unsigned*>(word));
  DSV4_CUDA_CHECK(cudaGetLastError());
}

void launch_agree_decode(const PeerSet& peers, int word, float* decode) {
  agree_decode_kernel<<<1, 32, 0, cudaStreamPerThread>>>(to_params(peers), word, decode);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dsv4::kernels::ep::cuda
