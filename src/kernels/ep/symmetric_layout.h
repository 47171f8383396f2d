// The symmetric buffer: one per rank, the same layout on every rank, so a peer finds any field
// of any rank's buffer at the same offset (DeepGEMM's sym_buffer idea, moe_ep.md §1.3). Every
// byte that crosses ranks goes through it:
//
//   field          shape                  written by           read by
//   scales         f32 [2]                its rank             every rank (max all-reduce)
//   ids            i32 [Tmax, K]          its rank             owners of those experts
//   send_count     i32 [R]                its rank             rank d reads entry d
//   sends          TokenSend [R, Tmax]    its rank             rank d reads row d
//   slot_row       i32 [Tmax·K]           its rank             owners (where to write combine)
//   staged         StagedActivation rows  its rank             owners pull rows (dispatch)
//   combine        f32 [Tmax·(K+1), D]    owners push rows     its rank (combine)
//   signals        u32 [8]                peers (barrier)      its rank (GPU barriers only)
//
// Everything a rank publishes for others to read lies before `combine`, so the NCCL baseline
// can all-gather that prefix instead of reading peers' memory. The combine area has a row per
// (token, slot) plus one per token for the shared expert, which the GPU combine reads from there
// too (kernels/cuda/moe's launch_combine); the CPU simulation adds the shared expert apart.
//
// `staged` is the L1 input of the MoE in the very struct the single-rank MoE uses
// (kernels::StagedActivation: E2M1 codes, linear UE4M3 block scales, the f32 input global
// scale), so dispatch moves bytes and never requantizes.
//
// Dimension letters: Tmax tokens per rank (capacity), K experts per token, D model width,
// R ranks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/float_convert.h"
#include "kernels/ops.h"

namespace dsv4::kernels::ep {

// One token sent to one destination rank: the slots k whose expert that rank owns are the set
// bits of slot_mask (K ≤ 32); the experts themselves are ids[token, k] in the sender's buffer.
struct TokenSend {
  int32_t token;
  uint32_t slot_mask;
};

// Index of the two max all-reduce words in `scales`.
inline constexpr int kInputAmax = 0;   // amax of the MoE input x, for the L1 global scale
inline constexpr int kHiddenAmax = 1;  // amax of the SwiGLU output, for the L2 global scale

struct SymmetricLayout {
  int64_t max_tokens = 0;  // Tmax
  int64_t hidden = 0;      // D
  int64_t top_k = 0;       // K
  int n_ranks = 0;         // R
  // Byte offsets of each field from the start of a rank's buffer, each 256-byte aligned.
  size_t scales = 0, ids = 0, send_count = 0, sends = 0, slot_row = 0;
  size_t staged_packed = 0, staged_scale = 0, staged_global = 0, combine = 0, signals = 0;
  size_t total_bytes = 0;

  size_t published_bytes() const { return combine; }
  int64_t combine_rows() const { return max_tokens * (top_k + 1); }

  // Refuses what the buffer cannot carry (K > 32, D not a multiple of 16, sizes ≤ 0).
  static Result<SymmetricLayout> create(int64_t max_tokens, int64_t hidden, int64_t top_k,
                                        int n_ranks);
};

// Typed views of one rank's buffer (its base address and the shared layout, held by value so
// a RankBuffer can be a kernel parameter). Host pointers in the CPU simulation, peer-mapped
// device pointers on the GPUs; the raw accessors work in device code too.
class RankBuffer {
 public:
  RankBuffer() = default;
  RankBuffer(uint8_t* base, const SymmetricLayout& layout, Device device)
      : base_(base), layout_(layout), device_(device) {}

  DSV4_HOST_DEVICE float* scales() const { return at<float>(layout_.scales); }
  DSV4_HOST_DEVICE int32_t* ids() const { return at<int32_t>(layout_.ids); }
  DSV4_HOST_DEVICE int32_t* send_count() const { return at<int32_t>(layout_.send_count); }
  DSV4_HOST_DEVICE TokenSend* sends(int dest) const {
    return at<TokenSend>(layout_.sends) + dest * layout_.max_tokens;
  }
  DSV4_HOST_DEVICE int32_t* slot_row() const { return at<int32_t>(layout_.slot_row); }
  DSV4_HOST_DEVICE uint8_t* staged_packed() const { return at<uint8_t>(layout_.staged_packed); }
  DSV4_HOST_DEVICE uint8_t* staged_scale() const { return at<uint8_t>(layout_.staged_scale); }
  DSV4_HOST_DEVICE float* staged_global() const { return at<float>(layout_.staged_global); }
  DSV4_HOST_DEVICE float* combine_rows() const { return at<float>(layout_.combine); }
  DSV4_HOST_DEVICE uint32_t* signals() const { return at<uint32_t>(layout_.signals); }
  DSV4_HOST_DEVICE uint8_t* base() const { return base_; }
  // The first n_tokens rows of the staged L1 input, linear scales.
  StagedActivation staged(int64_t n_tokens) const;
  // Rows [0, n_rows) of the combine area, f32 [n_rows, D].
  TensorView combine(int64_t n_rows) const;

 private:
  template <typename T>
  DSV4_HOST_DEVICE T* at(size_t offset) const {
    return reinterpret_cast<T*>(base_ + offset);
  }

  uint8_t* base_ = nullptr;
  SymmetricLayout layout_;
  Device device_ = Device::kCpu;
};

}  // namespace dsv4::kernels::ep
