#include "model/gather_views.h"

#include <vector>

#include "kernels/ops.h"
#include "model/scratch.h"
#include "model/upload.h"

namespace dsv4::model {

Status gather_views(std::span<const TensorView> views, const TensorView& y) {
  const TensorView joined = joined_rows(views);
  if (joined.data != nullptr) {
    DSV4_CHECK(joined.shape == y.shape && joined.dtype == y.dtype, "gather_views: rows %s into %s",
               joined.shape.to_string().c_str(), y.shape.to_string().c_str());
    return copy_tensor(y, joined);
  }
  DSV4_CHECK(y.rank() >= 1 && y.is_contiguous(), "gather_views: y must be contiguous rows");
  const int64_t n_rows = y.size(0);
  if (n_rows == 0) return ok_status();
  const int64_t row_numel = y.numel() / n_rows;
  const int64_t row_bytes = row_numel * static_cast<int64_t>(dtype_size(y.dtype));
  std::vector<int64_t> addresses;
  for (const TensorView& view : views) {
    DSV4_CHECK(view.rank() >= 1 && view.is_contiguous() && view.dtype == y.dtype &&
                   view.device == y.device && view.numel() == view.size(0) * row_numel,
               "gather_views: a view %s does not hold rows of %s", view.shape.to_string().c_str(),
               y.shape.to_string().c_str());
    const auto* first = static_cast<const char*>(view.data);
    for (int64_t r = 0; r < view.size(0); ++r) {
      addresses.push_back(reinterpret_cast<int64_t>(first + r * row_bytes));
    }
  }
  DSV4_CHECK(static_cast<int64_t>(addresses.size()) == n_rows, "gather_views: %zu rows into %lld",
             addresses.size(), (long long)n_rows);
  DSV4_ASSIGN_OR_RETURN(const Tensor table, upload(addresses, {n_rows}, y.device));
  return kernels::gather_rows(table.view(), y.reshaped({n_rows, row_numel}));
}

Status copy_views(std::span<const TensorView> sources, std::span<const TensorView> destinations) {
  DSV4_CHECK(sources.size() == destinations.size(), "copy_views: %zu sources, %zu destinations",
             sources.size(), destinations.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    DSV4_CHECK(
        sources[i].numel() == destinations[i].numel() && sources[i].dtype == destinations[i].dtype,
        "copy_views: pair %zu copies %s into %s", i, sources[i].shape.to_string().c_str(),
        destinations[i].shape.to_string().c_str());
  }
  const TensorView joined = joined_rows(destinations);
  if (joined.data != nullptr) return gather_views(sources, joined);
  for (size_t i = 0; i < sources.size(); ++i) {
    DSV4_RETURN_IF_ERROR(copy_tensor(destinations[i], sources[i]));
  }
  return ok_status();
}

void BlockCopies::add(const TensorView& to, const TensorView& from) {
  DSV4_CHECK(to.is_contiguous() && from.is_contiguous() && to.bytes() == from.bytes() &&
                 to.device == from.device && (empty() || to.device == device_),
             "BlockCopies: %s into %s", from.shape.to_string().c_str(),
             to.shape.to_string().c_str());
  if (to.bytes() == 0) return;
  device_ = to.device;
  sources_.push_back(reinterpret_cast<int64_t>(from.data));
  destinations_.push_back(reinterpret_cast<int64_t>(to.data));
  bytes_.push_back(static_cast<int64_t>(to.bytes()));
}

Status BlockCopies::run() {
  if (empty()) return ok_status();
  // The three tables in one upload: rows of one [3, n] tensor.
  const auto n = static_cast<int64_t>(bytes_.size());
  std::vector<int64_t> tables = std::move(sources_);
  tables.insert(tables.end(), destinations_.begin(), destinations_.end());
  tables.insert(tables.end(), bytes_.begin(), bytes_.end());
  sources_.clear();
  destinations_.clear();
  bytes_.clear();
  DSV4_ASSIGN_OR_RETURN(const Tensor uploaded, upload(tables, {3, n}, device_));
  const auto row = [&](int64_t i) { return uploaded.view().rows(i, i + 1).reshaped({n}); };
  return kernels::copy_blocks(row(0), row(1), row(2));
}

}  // namespace dsv4::model
