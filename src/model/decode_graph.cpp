#include "model/decode_graph.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "base/buffer.h"
#include "base/device_graph.h"
#include "model/attention.h"
#include "model/upload.h"

namespace dsv4::model {
namespace {

// Pinned host slots a captured step's uploads copy from, one an upload in order, 256-byte
// aligned, in one allocation made before the capture.
class PinnedSlots final : public UploadSlots {
 public:
  Status reserve(size_t bytes) {
    DSV4_ASSIGN_OR_RETURN(buffer_, Buffer::allocate_mapped_host(bytes));
    return ok_status();
  }

  Result<void*> next(size_t bytes) override {
    const size_t at = (used_ + 255) / 256 * 256;
    if (at + bytes > buffer_.bytes()) {
      return resource_exhausted("decode graph: the step's uploads exceed their " +
                                std::to_string(buffer_.bytes()) + " bytes of slots");
    }
    used_ = at + bytes;
    slots_.push_back({at, bytes});
    return static_cast<char*>(buffer_.data()) + at;
  }

  size_t size() const { return slots_.size(); }
  size_t bytes(size_t slot) const { return slots_[slot].second; }

  // Slot `slot` rewritten with `values`, which fill it exactly.
  template <typename T>
  void write(size_t slot, const std::vector<T>& values) {
    DSV4_CHECK(values.size() * sizeof(T) == slots_[slot].second,
               "decode graph: %zu bytes for an upload slot of %zu", values.size() * sizeof(T),
               slots_[slot].second);
    std::memcpy(static_cast<char*>(buffer_.data()) + slots_[slot].first, values.data(),
                slots_[slot].second);
  }

 private:
  Buffer buffer_;
  size_t used_ = 0;
  std::vector<std::pair<size_t, size_t>> slots_;  // offset, bytes
};

// The host's counts of one layer's cache of one sequence: what a capture's host side moves on
// and a failed capture puts back.
struct HostCounts {
  int64_t n_tokens = 0;
  int64_t rows[2] = {0, 0};
  int64_t entries[2] = {0, 0};
};

std::vector<AttentionCache*> layer_caches(std::span<const SequenceChunk> chunks, int64_t layer) {
  std::vector<AttentionCache*> caches;
  for (const SequenceChunk& chunk : chunks) caches.push_back(&chunk.cache->layers[layer]);
  return caches;
}

std::vector<HostCounts> save_counts(std::span<const SequenceChunk> chunks) {
  std::vector<HostCounts> counts;
  for (const SequenceChunk& chunk : chunks) {
    for (const AttentionCache& cache : chunk.cache->layers) {
      HostCounts c{cache.n_tokens};
      int i = 0;
      for (const std::optional<CompressorCache>* k : {&cache.compressor, &cache.indexer}) {
        if (k->has_value()) c.rows[i] = (*k)->n_rows, c.entries[i] = (*k)->n_entries;
        ++i;
      }
      counts.push_back(c);
    }
  }
  return counts;
}

void restore_counts(std::span<const SequenceChunk> chunks, const std::vector<HostCounts>& counts) {
  size_t next = 0;
  for (const SequenceChunk& chunk : chunks) {
    for (AttentionCache& cache : chunk.cache->layers) {
      const HostCounts& c = counts[next++];
      cache.n_tokens = c.n_tokens;
      int i = 0;
      for (std::optional<CompressorCache>* k : {&cache.compressor, &cache.indexer}) {
        if (k->has_value()) (*k)->n_rows = c.rows[i], (*k)->n_entries = c.entries[i];
        ++i;
      }
    }
  }
}

// Per layer: the rings' rows and the largest entry capacity of the step's caches (what the
// captured shapes were made for), and the compress RoPE frequencies the step reads (the first
// sequence's cache's: a captured kernel keeps that address, so a replay needs it still there;
// every cache of a layer holds the same values).
struct StepShape {
  std::vector<int64_t> ring_rows;
  std::vector<int64_t> capacity;
  std::vector<const void*> inv_freq;

  static StepShape of(std::span<const SequenceChunk> chunks) {
    StepShape shape;
    for (size_t l = 0; l < chunks.front().cache->layers.size(); ++l) {
      int64_t capacity = 0;
      for (const SequenceChunk& chunk : chunks) {
        const AttentionCache& cache = chunk.cache->layers[l];
        for (const std::optional<CompressorCache>* k : {&cache.compressor, &cache.indexer}) {
          if (k->has_value()) capacity = std::max(capacity, (*k)->entries.shape()[0]);
        }
      }
      shape.ring_rows.push_back(chunks.front().cache->layers[l].window.shape()[0]);
      shape.capacity.push_back(capacity);
      shape.inv_freq.push_back(chunks.front().cache->layers[l].inv_freq.view().data);
    }
    return shape;
  }

  // Whether a graph made for `this` runs a step of `other` (its padding covers fewer entries).
  bool holds(const StepShape& other) const {
    if (other.ring_rows != ring_rows || other.inv_freq != inv_freq) return false;
    for (size_t l = 0; l < capacity.size(); ++l) {
      if (other.capacity[l] > capacity[l]) return false;
    }
    return true;
  }
};

// The step's host inputs in the order Model::forward uploads them (token ids, RowPositions'
// positions and window rows, cache_addresses), as a replay writes them into the slots.
struct StepUploads {
  std::vector<int64_t> ids, positions;
  std::vector<int32_t> window_rows;
  std::vector<int64_t> cache_addresses;

  static StepUploads of(const Model& model, std::span<const SequenceChunk> chunks) {
    StepUploads up;
    std::vector<SequenceRows> rows;
    std::vector<AttentionCache*> caches;
    for (size_t i = 0; i < chunks.size(); ++i) {
      up.ids.push_back(chunks[i].tokens.front());
      up.positions.push_back(chunks[i].start_pos);
      const auto row = static_cast<int64_t>(i);
      rows.push_back({row, row + 1, chunks[i].start_pos, &chunks[i].cache->layers[0]});
    }
    const int64_t n_layers = model.config().n_layer;
    for (int64_t l = 0; l < n_layers; ++l) {
      for (AttentionCache* cache : layer_caches(chunks, l)) caches.push_back(cache);
    }
    up.window_rows = window_index_values(rows, up.positions, model.config().sliding_window);
    up.cache_addresses = cache_address_values(caches, n_layers);
    return up;
  }

  size_t bytes(size_t slot) const {
    const size_t sizes[] = {ids.size() * 8, positions.size() * 8, window_rows.size() * 4,
                            cache_addresses.size() * 8};
    return sizes[slot];
  }
};
constexpr size_t kStepUploads = 4;

// The graph's logits rows into each chunk's.
Status copy_logits(const Tensor& logits, std::span<const SequenceChunk> chunks) {
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto row = static_cast<int64_t>(i);
    DSV4_RETURN_IF_ERROR(copy_tensor(chunks[i].logits, logits.view().rows(row, row + 1)));
  }
  return ok_status();
}

}  // namespace

struct DecodeGraphs::Graph {
  StepShape shape;
  Tensor logits;     // f32 [B, V]: the head's output, copied into the chunks' logits
  Tensor entry_ids;  // i32 [C]: 0 … C − 1 (RowPositions::capacity_entry_ids)
  PinnedSlots slots;
  DeviceGraph graph;
};

DecodeGraphs::DecodeGraphs() = default;
DecodeGraphs::~DecodeGraphs() = default;

bool DecodeGraphs::serves(const Model& model, std::span<const SequenceChunk> chunks) {
  if (model.device() == Device::kCpu || chunks.empty()) return false;
  const SequenceCache* front = chunks.front().cache;
  for (const SequenceChunk& chunk : chunks) {
    if (chunk.tokens.size() != 1 || chunk.snapshot != nullptr ||
        chunk.streams_out.data != nullptr || chunk.logits.rank() != 2 ||
        chunk.logits.size(0) != 1 || chunk.cache == nullptr ||
        chunk.cache->layers.size() != front->layers.size()) {
      return false;
    }
    for (size_t l = 0; l < front->layers.size(); ++l) {
      const AttentionCache& cache = chunk.cache->layers[l];
      if (cache.window.shape() != front->layers[l].window.shape()) return false;
      for (const std::optional<CompressorCache>* k : {&cache.compressor, &cache.indexer}) {
        if (k->has_value() && (*k)->journal.armed) return false;
      }
    }
  }
  return true;
}

Status DecodeGraphs::run(const Model& model, std::span<const SequenceChunk> chunks) {
  const auto batch = static_cast<int64_t>(chunks.size());
  const auto seen = eager_.find(batch);
  if (seen == eager_.end() || seen->second) {
    eager_[batch] = seen != eager_.end();  // a first step: eager, the next one captures
    return model.forward_rows(chunks, TensorView{});
  }
  const auto graph = graphs_.find(batch);
  if (graph != graphs_.end() && graph->second->shape.holds(StepShape::of(chunks))) {
    return replay(model, *graph->second, chunks);
  }
  return capture(model, chunks);
}

Status DecodeGraphs::capture(const Model& model, std::span<const SequenceChunk> chunks) {
  const auto batch = static_cast<int64_t>(chunks.size());
  DSV4_RETURN_IF_ERROR(finish_device_work());  // nothing in flight uses the graph dropped here
  graphs_.erase(batch);
  const checkpoint::ModelConfig& c = model.config();
  auto made = std::make_unique<Graph>();
  Graph& g = *made;
  g.shape = StepShape::of(chunks);
  const int64_t n_ids =
      std::max<int64_t>(1, *std::max_element(g.shape.capacity.begin(), g.shape.capacity.end()));
  std::vector<int32_t> ids(static_cast<size_t>(n_ids));
  std::iota(ids.begin(), ids.end(), 0);
  DSV4_ASSIGN_OR_RETURN(g.entry_ids, upload(ids, {n_ids}, model.device()));
  DSV4_ASSIGN_OR_RETURN(g.logits,
                        Tensor::empty(DType::kF32, {batch, c.vocab_size}, model.device()));
  const StepUploads values = StepUploads::of(model, chunks);
  size_t slot_bytes = 0;
  for (size_t i = 0; i < kStepUploads; ++i) slot_bytes += values.bytes(i) + 256;
  DSV4_RETURN_IF_ERROR(g.slots.reserve(slot_bytes));
  DSV4_RETURN_IF_ERROR(finish_device_work());  // the ids' upload read its vector

  std::vector<SequenceChunk> step(chunks.begin(), chunks.end());
  for (int64_t i = 0; i < batch; ++i) step[i].logits = g.logits.view().rows(i, i + 1);
  const std::vector<HostCounts> counts = save_counts(chunks);
  capturing_upload_slots() = &g.slots;
  Result<DeviceGraph> captured =
      DeviceGraph::capture([&] { return model.forward_rows(step, g.entry_ids.view()); });
  capturing_upload_slots() = nullptr;
  Status usable = captured.status();
  if (usable.ok() && g.slots.size() != kStepUploads) {
    usable = internal_error("the step made " + std::to_string(g.slots.size()) + " uploads, not " +
                            std::to_string(kStepUploads));
  }
  for (size_t i = 0; usable.ok() && i < kStepUploads; ++i) {
    if (g.slots.bytes(i) != values.bytes(i)) usable = internal_error("an upload of another size");
  }
  if (!usable.ok()) {
    restore_counts(chunks, counts);
    eager_[batch] = true;
    std::fprintf(stderr, "dsv4: note: the decode step of %lld sequences runs without a CUDA graph: %s\n",
                 static_cast<long long>(batch), usable.to_string().c_str());
    return model.forward_rows(chunks, TensorView{});
  }
  g.graph = std::move(captured).value();
  DSV4_RETURN_IF_ERROR(g.graph.launch());
  DSV4_RETURN_IF_ERROR(copy_logits(g.logits, chunks));
  graphs_[batch] = std::move(made);
  return ok_status();
}

Status DecodeGraphs::replay(const Model& model, Graph& g, std::span<const SequenceChunk> chunks) {
  const int64_t n_layers = model.config().n_layer;
  std::vector<int64_t> positions;
  for (const SequenceChunk& chunk : chunks) {
    DSV4_RETURN_IF_ERROR(model.check_chunk(chunk));
    positions.push_back(chunk.start_pos);
  }
  // Every check before any count moves, so that a refused step leaves every cache as it was.
  for (int64_t l = 0; l < n_layers; ++l) {
    DSV4_RETURN_IF_ERROR(check_decode_step(model.config(), l, layer_caches(chunks, l), positions));
  }
  const StepUploads values = StepUploads::of(model, chunks);
  // The last replay's copies have read the slots (its logits came back since).
  DSV4_RETURN_IF_ERROR(finish_device_work());
  g.slots.write(0, values.ids);
  g.slots.write(1, values.positions);
  g.slots.write(2, values.window_rows);
  g.slots.write(3, values.cache_addresses);
  for (int64_t l = 0; l < n_layers; ++l) advance_decode_step(layer_caches(chunks, l), positions);
  DSV4_RETURN_IF_ERROR(g.graph.launch());
  return copy_logits(g.logits, chunks);
}

}  // namespace dsv4::model
