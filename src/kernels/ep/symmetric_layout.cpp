#include "kernels/ep/symmetric_layout.h"

#include <string>

#include "kernels/ep/expert_sharding.h"

namespace dsv4::kernels::ep {
namespace {

constexpr size_t kAlign = 256;  // keeps every field aligned for 16-byte vector and TMA copies

size_t append(size_t& cursor, size_t bytes) {
  const size_t offset = cursor;
  cursor = (cursor + bytes + kAlign - 1) / kAlign * kAlign;
  return offset;
}

}  // namespace

Result<SymmetricLayout> SymmetricLayout::create(int64_t max_tokens, int64_t hidden, int64_t top_k,
                                                int n_ranks) {
  if (max_tokens < 1 || hidden < 1 || top_k < 1 || n_ranks < 1 || n_ranks > kMaxRanks) {
    return invalid_argument("symmetric buffer: need tokens, hidden, top_k ≥ 1 and 1 to " +
                            std::to_string(kMaxRanks) + " ranks, got " +
                            std::to_string(max_tokens) + ", " + std::to_string(hidden) + ", " +
                            std::to_string(top_k) + ", " + std::to_string(n_ranks));
  }
  if (top_k > 32) {
    return unimplemented("symmetric buffer: top_k " + std::to_string(top_k) +
                         " exceeds the 32 slots of TokenSend::slot_mask");
  }
  if (hidden % format::kNvfp4BlockSize != 0) {
    return invalid_argument("symmetric buffer: hidden " + std::to_string(hidden) +
                            " is not a multiple of the NVFP4 block (16)");
  }
  SymmetricLayout l;
  l.max_tokens = max_tokens;
  l.hidden = hidden;
  l.top_k = top_k;
  l.n_ranks = n_ranks;
  const size_t t = static_cast<size_t>(max_tokens), d = static_cast<size_t>(hidden);
  const size_t slots = t * static_cast<size_t>(top_k);
  size_t cursor = 0;
  l.scales = append(cursor, 2 * sizeof(float));
  l.ids = append(cursor, slots * sizeof(int32_t));
  l.send_count = append(cursor, static_cast<size_t>(n_ranks) * sizeof(int32_t));
  l.sends = append(cursor, static_cast<size_t>(n_ranks) * t * sizeof(TokenSend));
  l.slot_row = append(cursor, slots * sizeof(int32_t));
  l.staged_packed = append(cursor, t * d / 2);
  l.staged_scale = append(cursor, t * d / format::kNvfp4BlockSize);
  l.staged_global = append(cursor, sizeof(float));
  l.combine = append(cursor, (slots + t) * d * sizeof(float));
  l.signals = append(cursor, kMaxRanks * sizeof(uint32_t));
  l.total_bytes = cursor;
  return l;
}

StagedActivation RankBuffer::staged(int64_t n_tokens) const {
  DSV4_CHECK(0 <= n_tokens && n_tokens <= layout_.max_tokens, "staged rows %lld of %lld",
             (long long)n_tokens, (long long)layout_.max_tokens);
  const int64_t d = layout_.hidden;
  return StagedActivation{
      TensorView::contiguous(base_ + layout_.staged_packed, DType::kU8, device_, {n_tokens, d / 2}),
      TensorView::contiguous(base_ + layout_.staged_scale, DType::kU8, device_,
                             {n_tokens, d / format::kNvfp4BlockSize}),
      TensorView::contiguous(base_ + layout_.staged_global, DType::kF32, device_, {1}),
      format::ScaleLayout::kLinear};
}

TensorView RankBuffer::combine(int64_t n_rows) const {
  DSV4_CHECK(0 <= n_rows && n_rows <= layout_.combine_rows(), "combine rows %lld of %lld",
             (long long)n_rows, (long long)layout_.combine_rows());
  return TensorView::contiguous(base_ + layout_.combine, DType::kF32, device_,
                                {n_rows, layout_.hidden});
}

}  // namespace dsv4::kernels::ep
