#include "model/decode_graph.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "base/buffer.h"
#include "base/device.h"
#include "base/device_graph.h"
#include "model/attention.h"
#include "model/cache_copy.h"
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

int64_t held_bytes(const Tensor& t) { return static_cast<int64_t>(t.view().bytes()); }

// The padding rows' token.
constexpr int64_t kPadToken = 0;

// A capture runs the step's host side; on a CPU model that is the step itself, which a capture
// that then failed would have run once already.
Status can_capture(const Model& model) {
  if (model.device() != Device::kCpu) return ok_status();
  return unimplemented("a CPU model's step runs op by op (no device work to capture)");
}

}  // namespace

DecodeStepShape DecodeStepShape::of(std::span<const SequenceChunk> chunks) {
  DecodeStepShape shape;
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
  }
  return shape;
}

bool DecodeStepShape::holds(const DecodeStepShape& other) const {
  if (other.ring_rows != ring_rows) return false;
  for (size_t l = 0; l < capacity.size(); ++l) {
    if (other.capacity[l] > capacity[l]) return false;
  }
  return true;
}

struct DecodeGraphs::Graph {
  DecodeStepShape shape;
  Tensor logits;     // f32 [B, V]: the head's output, copied into the chunks' logits
  Tensor entry_ids;  // i32 [C]: 0 … C − 1 (RowPositions::capacity_entry_ids)
  PinnedSlots slots;
  DeviceGraph graph;
};

// Padding rows run token 0 at position 0 of one cache of their own (all of them: they write the
// same values to the same rows), whose host counts go back to their start after every step, so
// the cache stays at position 0 and its device state is rewritten the same each time. At
// position 0 a row reads only what its step wrote (its ring row 0; no compressed entry is
// visible), so the padding rows read no stale memory, and every op of a decode row computes
// each row from its own inputs and cache (the per-row address tables), so the real rows' values
// do not depend on them.
struct DecodeGraphs::PadRows {
  SequenceCache cache;
  std::vector<HostCounts> start;  // the cache's host counts at position 0
  Tensor logits;                  // f32 [n, V]: the eager steps' padding rows' logits

  void reset() {
    const SequenceChunk chunk{{}, 0, &cache, TensorView{}};
    restore_counts(std::span(&chunk, 1), start);
  }
};

// A step's chunks and then its padding rows (none when the bucket is the batch's size).
struct DecodeGraphs::Padded {
  std::vector<SequenceChunk> chunks;
  int64_t n_real = 0;

  std::span<const SequenceChunk> real() const { return std::span(chunks).first(n_real); }
  bool padded() const { return static_cast<int64_t>(chunks.size()) > n_real; }
};

int64_t padding_max_batch(const checkpoint::ModelWeights& weights, const ModelOptions& options) {
  if (options.expert_mode != ExpertMode::kW4A4) return options.cuda_graph_max_batch;
  for (const checkpoint::LayerWeights& layer : weights.layers) {
    const checkpoint::RoutedExpertWeights& experts = layer.ffn.experts;
    if (experts.is_nvfp4() &&
        (experts.w13_input_scale.empty_tensor() || experts.w2_input_scale.empty_tensor())) {
      return 0;
    }
  }
  return options.cuda_graph_max_batch;
}

DecodeGraphs::DecodeGraphs(int64_t max_batch) : max_batch_(max_batch) {}
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

int64_t DecodeGraphs::bucket_size(int64_t batch, int64_t max_batch) {
  if (max_batch <= 0 || batch >= max_batch) return batch;
  int64_t size = 1;
  while (size < batch) size *= 2;
  return std::min(size, max_batch);
}

Result<DecodeGraphs::Padded> DecodeGraphs::pad(const Model& model,
                                               std::span<const SequenceChunk> chunks,
                                               int64_t size) {
  Padded step{{chunks.begin(), chunks.end()}, static_cast<int64_t>(chunks.size())};
  const int64_t n_pad = size - step.n_real;
  if (n_pad <= 0) return step;
  // The padding rows' rings must be the step's size (one run of decode rows): a cache made with
  // the step's step size has them.
  const SequenceCache& front = *chunks.front().cache;
  const auto same_rings = [&](const SequenceCache& cache) {
    for (size_t l = 0; l < front.layers.size(); ++l) {
      if (cache.layers[l].window.shape() != front.layers[l].window.shape()) return false;
    }
    return true;
  };
  if (pad_ == nullptr || !same_rings(pad_->cache)) {
    auto made = std::make_unique<PadRows>();
    DSV4_ASSIGN_OR_RETURN(made->cache,
                          model.new_cache(/*max_positions=*/1, front.layers.front().max_step_tokens));
    if (!same_rings(made->cache)) return step;  // rings of another make: no padding
    const SequenceChunk chunk{{}, 0, &made->cache, TensorView{}};
    made->start = save_counts(std::span(&chunk, 1));
    if (pad_ != nullptr) made->logits = std::move(pad_->logits);
    pad_ = std::move(made);
  }
  const int64_t v = model.config().vocab_size;
  if (pad_->logits.numel() < n_pad * v) {
    DSV4_ASSIGN_OR_RETURN(pad_->logits, Tensor::empty(DType::kF32, {n_pad, v}, model.device()));
  }
  for (int64_t i = 0; i < n_pad; ++i) {
    step.chunks.push_back(
        {std::span(&kPadToken, 1), 0, &pad_->cache, pad_->logits.view().rows(i, i + 1)});
  }
  return step;
}

Status DecodeGraphs::run(const Model& model, std::span<const SequenceChunk> chunks) {
  DSV4_ASSIGN_OR_RETURN(
      const Padded step,
      pad(model, chunks, bucket_size(static_cast<int64_t>(chunks.size()), max_batch_)));
  // Keyed by the rows the step runs (its bucket, or its own size where pad could not pad it), as
  // capture and give_up key them.
  const auto size = static_cast<int64_t>(step.chunks.size());
  const auto graph = graphs_.find(size);
  const bool held =
      graph != graphs_.end() && graph->second->shape.holds(DecodeStepShape::of(step.chunks));
  if (planned_) {
    if (held) return replay(model, *graph->second, step);
    if (!eager_[size]) {
      eager_[size] = true;
      std::fprintf(stderr,
                   "dsv4: note: the decode step of %lld rows runs without a CUDA graph: none "
                   "was planned for its sizes\n",
                   static_cast<long long>(size));
    }
    return run_eagerly(model, step);
  }
  const auto seen = eager_.find(size);
  if (seen == eager_.end() || seen->second) {
    eager_[size] = seen != eager_.end();  // a first step: eager, the next one captures
    return run_eagerly(model, step);
  }
  if (held) return replay(model, *graph->second, step);
  return capture(model, step);
}

std::vector<int64_t> DecodeGraphs::planned_sizes(int64_t padding_max_batch, int64_t max_batch) {
  std::vector<int64_t> sizes;
  for (int64_t batch = 1; batch <= max_batch; ++batch) {
    const int64_t size = bucket_size(batch, padding_max_batch);
    if (sizes.empty() || sizes.back() != size) sizes.push_back(size);
  }
  return sizes;
}

Result<DecodeGraphPlan> DecodeGraphs::plan(const Model& model, int64_t max_batch,
                                           int64_t max_positions) {
  DecodeGraphPlan made;
  const std::vector<int64_t> sizes = planned_sizes(max_batch_, max_batch);
  Status why = can_capture(model);
  // A Session's cache (runtime/session.cpp: the default step size) of the most positions any
  // request may have: its entry capacity is the largest a server's steps have.
  Result<SequenceCache> cache =
      why.ok() ? model.new_cache(max_positions) : Result<SequenceCache>(why);
  Result<Tensor> logits =
      cache.ok() ? Tensor::empty(DType::kF32, {1, model.config().vocab_size}, model.device())
                 : Result<Tensor>(cache.status());
  why = logits.status();
  for (const int64_t size : sizes) {
    if (why.ok()) why = warm_up(model, *cache, logits->view(), size);
    if (!why.ok()) {
      made.note = "decode steps of " + std::to_string(size) +
                  " rows and more run without a CUDA graph: " + why.to_string();
      break;
    }
    made.sizes.push_back(size);
  }
  planned_ = true;
  // Past the largest graph a batch runs as its own size: padding it to a bucket that stays
  // eager would only add rows.
  if (max_batch_ > 0) max_batch_ = made.sizes.empty() ? 0 : made.sizes.back();
  // The step's cache goes below; the graphs and padding rows are read by the thread that steps
  // the model from now on (a server's worker), there only once made.
  if (model.device() != Device::kCpu) DSV4_RETURN_IF_ERROR(finish_device_work());
  count_held();
  made.device_bytes = held_bytes_.load();
  planned_batch_ = made.sizes.empty() ? 0 : made.sizes.back();
  planned_bytes_ = made.device_bytes;
  return made;
}

Status DecodeGraphs::warm_up(const Model& model, SequenceCache& cache, const TensorView& logits,
                             int64_t size) {
  const SequenceChunk chunk{std::span(&kPadToken, 1), 0, &cache, logits};
  const std::span<const SequenceChunk> one(&chunk, 1);
  DSV4_ASSIGN_OR_RETURN(const Padded step, pad(model, one, size));
  if (static_cast<int64_t>(step.chunks.size()) != size) {
    return unimplemented("no padding rows with the rings of a session's cache");
  }
  const std::vector<HostCounts> start = save_counts(one);
  // Each op's one-time setup at this size, as an unplanned bucket's first step.
  Status warmed = run_eagerly(model, step);
  restore_counts(one, start);
  if (warmed.ok()) warmed = try_capture(model, step);
  restore_counts(one, start);
  eager_[size] = !warmed.ok();
  return warmed;
}

Status DecodeGraphs::run_eagerly(const Model& model, const Padded& step) {
  const Status ran = model.forward_rows(step.chunks, TensorView{});
  if (step.padded()) pad_->reset();
  return ran;
}

Status DecodeGraphs::give_up(const Model& model, const Padded& step, const Status& why) {
  const auto size = static_cast<int64_t>(step.chunks.size());
  eager_[size] = true;
  graphs_.erase(size);
  count_held();
  std::fprintf(stderr, "dsv4: note: the decode step of %lld rows runs without a CUDA graph: %s\n",
               static_cast<long long>(size), why.to_string().c_str());
  return run_eagerly(model, step);
}

Result<std::unique_ptr<DecodeGraphs::Graph>> DecodeGraphs::prepare(
    const Model& model, std::span<const SequenceChunk> chunks, size_t slot_bytes) {
  DSV4_RETURN_IF_ERROR(can_capture(model));
  DSV4_RETURN_IF_ERROR(finish_device_work());  // nothing in flight uses the graph dropped next
  graphs_.erase(static_cast<int64_t>(chunks.size()));
  const checkpoint::ModelConfig& c = model.config();
  auto made = std::make_unique<Graph>();
  Graph& g = *made;
  g.shape = DecodeStepShape::of(chunks);
  const int64_t n_ids =
      std::max<int64_t>(1, *std::max_element(g.shape.capacity.begin(), g.shape.capacity.end()));
  std::vector<int32_t> ids(static_cast<size_t>(n_ids));
  std::iota(ids.begin(), ids.end(), 0);
  DSV4_ASSIGN_OR_RETURN(g.entry_ids, upload(ids, {n_ids}, model.device()));
  DSV4_ASSIGN_OR_RETURN(
      g.logits, Tensor::empty(DType::kF32, {static_cast<int64_t>(chunks.size()), c.vocab_size},
                              model.device()));
  DSV4_RETURN_IF_ERROR(g.slots.reserve(slot_bytes));
  DSV4_RETURN_IF_ERROR(finish_device_work());  // the ids' upload read its vector
  return made;
}

Status DecodeGraphs::try_capture(const Model& model, const Padded& padded) {
  const std::span<const SequenceChunk> chunks = padded.chunks;
  const auto size = static_cast<int64_t>(chunks.size());
  const StepUploads values = StepUploads::of(model, chunks);
  size_t slot_bytes = 0;
  for (size_t i = 0; i < kStepUploads; ++i) slot_bytes += values.bytes(i) + 256;
  // What fails before the capture (pinned slots or the graph's logits not to be had) moves no
  // count.
  DSV4_ASSIGN_OR_RETURN(std::unique_ptr<Graph> made, prepare(model, chunks, slot_bytes));
  Graph& g = *made;

  std::vector<SequenceChunk> step(chunks.begin(), chunks.end());
  for (int64_t i = 0; i < size; ++i) step[i].logits = g.logits.view().rows(i, i + 1);
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
  // The capture ran the step's host side only: its first launch does the step. A launch that
  // fails (its allocations' memory is mapped then) did none of it.
  if (usable.ok()) {
    g.graph = std::move(captured).value();
    usable = g.graph.launch();
  }
  if (!usable.ok()) {
    restore_counts(chunks, counts);
    return usable;
  }
  if (padded.padded()) pad_->reset();
  graphs_[size] = std::move(made);
  ++captures_;
  count_held();
  return ok_status();
}

// A capture that fails keeps the bucket eager rather than fail every step of it.
Status DecodeGraphs::capture(const Model& model, const Padded& padded) {
  const Status captured = try_capture(model, padded);
  if (!captured.ok()) return give_up(model, padded, captured);
  return copy_logits(graphs_.at(static_cast<int64_t>(padded.chunks.size()))->logits, padded.real());
}

Status DecodeGraphs::replay(const Model& model, Graph& g, const Padded& padded) {
  const std::span<const SequenceChunk> chunks = padded.chunks;
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
  // The counts move only once the step is on its way: a launch that fails leaves them.
  DSV4_RETURN_IF_ERROR(g.graph.launch());
  for (int64_t l = 0; l < n_layers; ++l) advance_decode_step(layer_caches(chunks, l), positions);
  if (padded.padded()) pad_->reset();
  return copy_logits(g.logits, padded.real());
}

void DecodeGraphs::count_held() {
  int64_t bytes = 0;
  for (const auto& [size, g] : graphs_) bytes += held_bytes(g->logits) + held_bytes(g->entry_ids);
  if (pad_ != nullptr) bytes += cache_bytes(pad_->cache) + held_bytes(pad_->logits);
  // The graphs' own allocations: what the device's graph memory pool holds for them (a query
  // that fails leaves them out rather than fail the step).
  const Result<int64_t> reserved =
      graphs_.empty() ? Result<int64_t>(int64_t{0}) : DeviceGraph::reserved_bytes();
  if (reserved.ok()) bytes += *reserved;
  held_graphs_ = static_cast<int64_t>(graphs_.size());
  held_bytes_ = bytes;
}

DecodeGraphStats DecodeGraphs::stats() const {
  return {held_graphs_.load(), held_bytes_.load(), captures_.load(), planned_batch_.load(),
          planned_bytes_.load()};
}

}  // namespace dsv4::model
