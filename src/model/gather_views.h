// Rows of many views made rows of one matrix, or copied into many, without a copy a view: a
// step's per-sequence rows (each sequence's kept streams, each chunk's asked rows) and its
// rollbacks' copies move in one launch, so the launches of a step do not grow with its batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/buffer.h"

namespace dsv4::model {

// Copies `views` (each contiguous [n_i, …] with y's trailing sizes and dtype, on y's device) into
// y's consecutive rows, Σ n_i = y.size(0): one copy when they already are one buffer's
// consecutive rows (joined_rows), else one upload of their rows' addresses and one
// kernels::gather_rows.
Status gather_views(std::span<const TensorView> views, const TensorView& y);

// Copies sources[i] into destinations[i] (same shapes, contiguous): one gather_views when the
// destinations are one buffer's consecutive rows (as the runtime lays out a step's outputs),
// else a copy a pair.
Status copy_views(std::span<const TensorView> sources, std::span<const TensorView> destinations);

// Copies collected over a step and made at once (kernels::copy_blocks): one upload of their
// tables and one launch, however many sequences and layers they come from. What a copy reads
// must stay as it is, and what it writes unread, until run().
class BlockCopies {
 public:
  // to = from at run(): both contiguous, of one size, on one device.
  void add(const TensorView& to, const TensorView& from);
  bool empty() const { return bytes_.empty(); }
  // Makes every copy added, in order of no importance (they must not overlap), and forgets them.
  Status run();

 private:
  std::vector<int64_t> sources_, destinations_, bytes_;
  Device device_ = Device::kCpu;
};

}  // namespace dsv4::model
