#include "model/cache_copy.h"

#include <algorithm>
#include <string>

namespace dsv4::model {
namespace {

Status mismatch(const std::string& what) { return invalid_argument("cache state copy: " + what); }

Status check_compressor(const std::optional<CompressorCache>& from,
                        const std::optional<CompressorCache>& to, const char* which) {
  if (from.has_value() != to.has_value()) {
    return mismatch(std::string(which) + " in one cache and not the other");
  }
  if (!from) return ok_status();
  if (from->ratio != to->ratio || from->overlap != to->overlap || from->width != to->width) {
    return mismatch(std::string(which) + "s of different ratio, overlap or width");
  }
  if (from->n_entries > to->entries.shape()[0]) {
    return mismatch(std::string(which) + " entries " + std::to_string(from->n_entries) +
                    " exceed the capacity " + std::to_string(to->entries.shape()[0]));
  }
  return ok_status();
}

Status check_copy(const AttentionCache& from, const AttentionCache& to) {
  if (from.n_tokens > to.max_positions) {
    return mismatch("a state of " + std::to_string(from.n_tokens) + " tokens into a cache of " +
                    std::to_string(to.max_positions) + " positions");
  }
  // (The RoPE tables are not compared: a kept state has none, CacheStart::kForCopy.)
  if (from.sliding_window() != to.sliding_window() ||
      from.window.shape()[1] != to.window.shape()[1]) {
    return mismatch("caches of different layers (window or head sizes differ)");
  }
  DSV4_RETURN_IF_ERROR(check_compressor(from.compressor, to.compressor, "compressor"));
  return check_compressor(from.indexer, to.indexer, "indexer");
}

// The window rows of positions [first, end) from one ring to the other; a position p sits in row
// p mod R of each, so the copy breaks where either ring wraps.
Status copy_window(const AttentionCache& from, AttentionCache& to, int64_t first, int64_t end) {
  const int64_t from_rows = from.window.shape()[0], to_rows = to.window.shape()[0];
  for (int64_t p = first; p < end;) {
    const int64_t from_slot = p % from_rows, to_slot = p % to_rows;
    const int64_t n = std::min({end - p, from_rows - from_slot, to_rows - to_slot});
    DSV4_RETURN_IF_ERROR(copy_tensor(to.window.view().rows(to_slot, to_slot + n),
                                     from.window.view().rows(from_slot, from_slot + n)));
    p += n;
  }
  return ok_status();
}

Status copy_compressor(const CompressorCache& from, CompressorCache& to) {
  DSV4_RETURN_IF_ERROR(
      copy_tensor(to.kv.view().rows(0, from.n_rows), from.kv.view().rows(0, from.n_rows)));
  DSV4_RETURN_IF_ERROR(
      copy_tensor(to.gate.view().rows(0, from.n_rows), from.gate.view().rows(0, from.n_rows)));
  DSV4_RETURN_IF_ERROR(copy_tensor(to.entries.view().rows(0, from.n_entries),
                                   from.entries.view().rows(0, from.n_entries)));
  to.n_rows = from.n_rows;
  to.n_entries = from.n_entries;
  return ok_status();
}

int64_t held_bytes(const Tensor& t) {
  return t.empty_tensor() ? 0 : static_cast<int64_t>(t.view().bytes());
}

int64_t compressor_bytes(const std::optional<CompressorCache>& c) {
  if (!c) return 0;
  return held_bytes(c->kv) + held_bytes(c->gate) + held_bytes(c->entries);
}

}  // namespace

Status copy_cache_state(const AttentionCache& from, AttentionCache& to) {
  DSV4_RETURN_IF_ERROR(check_copy(from, to));
  // A step at position n reads the window back to n − W + 1.
  const int64_t n = from.n_tokens;
  DSV4_RETURN_IF_ERROR(copy_window(from, to, std::max<int64_t>(0, n - from.sliding_window()), n));
  if (from.compressor) DSV4_RETURN_IF_ERROR(copy_compressor(*from.compressor, *to.compressor));
  if (from.indexer) DSV4_RETURN_IF_ERROR(copy_compressor(*from.indexer, *to.indexer));
  to.n_tokens = n;
  return ok_status();
}

Status copy_cache_state(const SequenceCache& from, SequenceCache& to) {
  if (from.layers.size() != to.layers.size()) {
    return mismatch("caches of " + std::to_string(from.layers.size()) + " and " +
                    std::to_string(to.layers.size()) + " layers");
  }
  for (size_t layer = 0; layer < from.layers.size(); ++layer) {
    DSV4_RETURN_IF_ERROR(check_copy(from.layers[layer], to.layers[layer]));
  }
  for (size_t layer = 0; layer < from.layers.size(); ++layer) {
    DSV4_RETURN_IF_ERROR(copy_cache_state(from.layers[layer], to.layers[layer]));
  }
  return ok_status();
}

int64_t cache_bytes(const SequenceCache& cache) {
  int64_t bytes = 0;
  for (const AttentionCache& c : cache.layers) {
    bytes += held_bytes(c.window) + compressor_bytes(c.compressor) + compressor_bytes(c.indexer);
  }
  return bytes;
}

}  // namespace dsv4::model
