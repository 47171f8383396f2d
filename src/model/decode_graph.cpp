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
#include "model/gather_views.h"
#include "model/layer.h"
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

// The host's counts of one layer's cache of one sequence, each compressor's with its journal's
// (a verify step moves those): what a capture's host side moves on and a failed capture puts
// back.
struct HostCounts {
  int64_t n_tokens = 0;
  int64_t rows[2] = {0, 0};
  int64_t entries[2] = {0, 0};
  int64_t fed[2] = {0, 0};
  bool pooled[2] = {false, false};
};

HostCounts counts_of(const AttentionCache& cache) {
  HostCounts c{cache.n_tokens};
  int i = 0;
  for (const std::optional<CompressorCache>* k : {&cache.compressor, &cache.indexer}) {
    if (k->has_value()) {
      c.rows[i] = (*k)->n_rows, c.entries[i] = (*k)->n_entries;
      c.fed[i] = (*k)->journal.n_fed, c.pooled[i] = (*k)->journal.pooled;
    }
    ++i;
  }
  return c;
}

void set_counts(AttentionCache& cache, const HostCounts& c) {
  cache.n_tokens = c.n_tokens;
  int i = 0;
  for (std::optional<CompressorCache>* k : {&cache.compressor, &cache.indexer}) {
    if (k->has_value()) {
      (*k)->n_rows = c.rows[i], (*k)->n_entries = c.entries[i];
      (*k)->journal.n_fed = c.fed[i], (*k)->journal.pooled = c.pooled[i];
    }
    ++i;
  }
}

// The step's host inputs in the order its forward uploads them (token ids, RowPositions'
// positions and window rows, the address table of every layer the step runs), as a replay
// writes them into the slots.
struct StepUploads {
  std::vector<int64_t> ids, positions;
  std::vector<int32_t> window_rows;
  std::vector<int64_t> cache_addresses;

  size_t bytes(size_t slot) const {
    const size_t sizes[] = {ids.size() * 8, positions.size() * 8, window_rows.size() * 4,
                            cache_addresses.size() * 8};
    return sizes[slot];
  }
};
constexpr size_t kStepUploads = 4;

// Rows [begin, end) of each of chunks of `n_rows` rows laid one after the other.
std::vector<std::pair<int64_t, int64_t>> row_ranges(std::span<const int64_t> n_rows) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t begin = 0;
  for (const int64_t n : n_rows) {
    ranges.emplace_back(begin, begin + n);
    begin += n;
  }
  return ranges;
}

// Each chunk's rows of `t` (f32 [Σ n_rows, …]): an empty view for a chunk of none.
std::vector<TensorView> rows_of(const Tensor& t, std::span<const int64_t> n_rows) {
  std::vector<TensorView> views;
  for (const auto& [begin, end] : row_ranges(n_rows)) {
    views.push_back(begin == end ? TensorView{} : t.view().rows(begin, end));
  }
  return views;
}

int64_t sum(std::span<const int64_t> values) {
  return std::accumulate(values.begin(), values.end(), int64_t{0});
}

int64_t held_bytes(const Tensor& t) { return static_cast<int64_t>(t.view().bytes()); }

// The padding rows' token.
constexpr int64_t kPadToken = 0;

// Whether a chunk of `n` rows over caches of `step_tokens` a step runs as decode rows
// (is_decode_run: its rows in the step's one launch an op, each reaching its cache by address).
bool decode_run(int64_t n, int64_t step_tokens) {
  return n >= 1 && n <= AttentionCache::kMaxDecodeRun && n <= step_tokens;
}

// A capture runs the step's host side; on a CPU model that is the step itself, which a capture
// that then failed would have run once already.
Status can_capture(const Model& model) {
  if (model.device() != Device::kCpu) return ok_status();
  return unimplemented("a CPU model's step runs op by op (no device work to capture)");
}

// Whether `view` is f32 [1 or n, …] of `rank` dimensions.
bool last_or_every_row(const TensorView& view, int64_t rank, int64_t n) {
  return view.dtype == DType::kF32 && view.rank() == rank &&
         (view.size(0) == 1 || view.size(0) == n);
}

}  // namespace

// A step as its graph sees it, whatever forward runs it: its chunks (a decode or verify step's,
// padding rows last; or a draft step's MTP chunks), each chunk's rows and what it reads and
// writes, and its caches layer by layer.
struct DecodeGraphs::Step {
  enum Kind : int64_t { kDecode, kVerify, kDraft };
  Kind kind = kDecode;
  std::vector<SequenceChunk> chunks;                 // decode, verify
  std::vector<MtpChunk> drafts;                      // draft
  int64_t n_real = 0;                                // chunks before the padding rows
  std::vector<std::vector<AttentionCache*>> layers;  // [layer][chunk]
  int64_t first_layer = 0;  // the model's layer of layers[0] (the MTP block's: n_layer)
  // Per chunk: its tokens and first position, and the rows of its logits, of its final (or the
  // block's output) streams and of the block's input streams (draft steps).
  std::vector<std::span<const int64_t>> tokens;
  std::vector<int64_t> start_pos, n_rows, n_logits, n_streams;
  std::vector<TensorView> logits, streams, inputs;  // the caller's; empty: none

  // Whether `chunks` make a decode step: one token each, no streams out (else a verify step).
  static bool decodes(std::span<const SequenceChunk> chunks) {
    return std::all_of(chunks.begin(), chunks.end(), [](const SequenceChunk& chunk) {
      return chunk.tokens.size() == 1 && chunk.streams_out.data == nullptr;
    });
  }

  static Step of(std::span<const SequenceChunk> chunks, int64_t n_real) {
    Step step;
    step.chunks.assign(chunks.begin(), chunks.end());
    step.n_real = n_real;
    step.layers.resize(chunks.front().cache->layers.size());
    for (const SequenceChunk& chunk : chunks) {
      for (size_t l = 0; l < step.layers.size(); ++l) {
        step.layers[l].push_back(&chunk.cache->layers[l]);
      }
      step.add(chunk.tokens, chunk.start_pos, chunk.logits, chunk.streams_out, TensorView{});
    }
    step.kind = decodes(chunks) ? kDecode : kVerify;
    return step;
  }

  static Step of(const Model& model, std::span<const MtpChunk> chunks) {
    Step step;
    step.kind = kDraft;
    step.drafts.assign(chunks.begin(), chunks.end());
    step.n_real = static_cast<int64_t>(chunks.size());
    step.layers.resize(1);
    step.first_layer = model.config().n_layer;
    for (const MtpChunk& chunk : chunks) {
      step.layers[0].push_back(chunk.cache);
      step.add(chunk.next_tokens, chunk.start_pos, chunk.logits, chunk.out_streams, chunk.streams);
    }
    return step;
  }

  void add(std::span<const int64_t> ids, int64_t start, const TensorView& logits_out,
           const TensorView& streams_out, const TensorView& streams_in) {
    tokens.push_back(ids);
    start_pos.push_back(start);
    n_rows.push_back(static_cast<int64_t>(ids.size()));
    n_logits.push_back(logits_out.size(0));
    n_streams.push_back(streams_out.data == nullptr ? 0 : streams_out.size(0));
    logits.push_back(logits_out);
    streams.push_back(streams_out);
    inputs.push_back(streams_in);
  }

  size_t size() const { return tokens.size(); }
  bool padded() const { return static_cast<int64_t>(size()) > n_real; }
  const char* name() const {
    return kind == kDecode ? "decode" : kind == kVerify ? "verify" : "draft";
  }

  // What a graph is made for: the kind, then each chunk's rows, logits rows and streams rows.
  Key key() const {
    Key key{kind};
    for (size_t i = 0; i < size(); ++i) {
      key.insert(key.end(), {n_rows[i], n_logits[i], n_streams[i]});
    }
    return key;
  }

  // Each row's position.
  std::vector<int64_t> positions() const {
    std::vector<int64_t> at;
    for (size_t i = 0; i < size(); ++i) {
      for (int64_t t = 0; t < n_rows[i]; ++t) at.push_back(start_pos[i] + t);
    }
    return at;
  }

  // Layer l's chunks as the forward gives them to the attention.
  std::vector<SequenceRows> sequence_rows(size_t l) const {
    std::vector<SequenceRows> rows;
    const std::vector<std::pair<int64_t, int64_t>> ranges = row_ranges(n_rows);
    for (size_t i = 0; i < size(); ++i) {
      rows.push_back({ranges[i].first, ranges[i].second, start_pos[i], layers[l][i]});
    }
    return rows;
  }

  StepUploads uploads(const checkpoint::ModelConfig& config) const {
    StepUploads up;
    for (const std::span<const int64_t> ids : tokens) {
      up.ids.insert(up.ids.end(), ids.begin(), ids.end());
    }
    up.positions = positions();
    up.window_rows = window_index_values(sequence_rows(0), up.positions, config.sliding_window);
    std::vector<AttentionCache*> caches;
    for (size_t l = 0; l < layers.size(); ++l) {
      const std::vector<AttentionCache*> columns = address_columns(sequence_rows(l));
      caches.insert(caches.end(), columns.begin(), columns.end());
    }
    up.cache_addresses = cache_address_values(caches, static_cast<int64_t>(layers.size()));
    return up;
  }

  // What the eager step checks on the host before it moves anything, for a replay: the
  // chunks' token ids and, layer by layer, every run of rows against its cache.
  Status check(const Model& model) const {
    const std::vector<int64_t> at = positions();
    for (const std::span<const int64_t> ids : tokens) {
      DSV4_RETURN_IF_ERROR(check_token_ids(ids, model.config().vocab_size));
    }
    for (size_t l = 0; l < layers.size(); ++l) {
      DSV4_RETURN_IF_ERROR(check_decode_step(model.config(), first_layer + static_cast<int64_t>(l),
                                             address_columns(sequence_rows(l)), at));
    }
    return ok_status();
  }

  // The host counts moved as the eager step moves them.
  void advance() const {
    const std::vector<int64_t> at = positions();
    for (size_t l = 0; l < layers.size(); ++l) {
      advance_decode_step(address_columns(sequence_rows(l)), at);
    }
  }

  std::vector<HostCounts> save_counts() const {
    std::vector<HostCounts> counts;
    for (const std::vector<AttentionCache*>& layer : layers) {
      for (const AttentionCache* cache : layer) counts.push_back(counts_of(*cache));
    }
    return counts;
  }
  void restore_counts(const std::vector<HostCounts>& counts) const {
    size_t next = 0;
    for (const std::vector<AttentionCache*>& layer : layers) {
      for (AttentionCache* cache : layer) set_counts(*cache, counts[next++]);
    }
  }
};

DecodeStepShape DecodeStepShape::of(std::span<const SequenceChunk> chunks) {
  std::vector<std::vector<AttentionCache*>> layers(chunks.front().cache->layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    for (const SequenceChunk& chunk : chunks) layers[l].push_back(&chunk.cache->layers[l]);
  }
  return of(layers);
}

DecodeStepShape DecodeStepShape::of(std::span<const std::vector<AttentionCache*>> layers) {
  DecodeStepShape shape;
  for (const std::vector<AttentionCache*>& caches : layers) {
    int64_t capacity = 0;
    for (const AttentionCache* cache : caches) {
      for (const std::optional<CompressorCache>* k : {&cache->compressor, &cache->indexer}) {
        if (k->has_value()) capacity = std::max(capacity, (*k)->entries.shape()[0]);
      }
    }
    shape.ring_rows.push_back(caches.front()->window.shape()[0]);
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
  Step::Kind kind = Step::kDecode;
  DecodeStepShape shape;
  Tensor logits;     // f32 [rows asked, V]: the head's output, copied into the chunks' logits
  Tensor streams;    // f32 [rows kept, M, D]: the streams the chunks keep (none: empty)
  Tensor inputs;     // draft steps: f32 [rows, M, D], the MTP block's input streams
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
  std::vector<HostCounts> start;  // the cache's host counts at position 0, layer by layer
  Tensor logits;                  // f32 [n, V]: the eager steps' padding rows' logits

  void reset() {
    for (size_t l = 0; l < cache.layers.size(); ++l) set_counts(cache.layers[l], start[l]);
  }
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
  if (front == nullptr) return false;
  bool decode = true, every_row = true, streams_all = true, streams_each = true;
  for (const SequenceChunk& chunk : chunks) {
    const auto n = static_cast<int64_t>(chunk.tokens.size());
    if (chunk.cache == nullptr || chunk.snapshot != nullptr ||
        chunk.cache->layers.size() != front->layers.size() ||
        !decode_run(n, chunk.cache->layers.front().max_step_tokens) ||
        !last_or_every_row(chunk.logits, 2, n) ||
        (chunk.streams_out.data != nullptr && !last_or_every_row(chunk.streams_out, 3, n))) {
      return false;
    }
    for (size_t l = 0; l < front->layers.size(); ++l) {
      if (chunk.cache->layers[l].window.shape() != front->layers[l].window.shape()) return false;
    }
    const bool streams = chunk.streams_out.data != nullptr;
    decode = decode && n == 1 && !streams;
    every_row = every_row && chunk.logits.size(0) == n;
    streams_each = streams_each && streams;
    streams_all = streams_all && streams && chunk.streams_out.size(0) == n;
  }
  // A verify step keeps streams for the MTP block; with several chunks, each every row's logits
  // and streams (else its forward gathers the head's rows or the kept streams, by addresses it
  // uploads).
  return decode || (streams_each && (chunks.size() == 1 || (every_row && streams_all)));
}

bool DecodeGraphs::serves_draft(const Model& model, std::span<const MtpChunk> chunks) {
  if (model.device() == Device::kCpu || chunks.empty() || chunks.front().cache == nullptr) {
    return false;
  }
  const int64_t m = model.config().hc_mult, d = model.config().hidden_size;
  for (const MtpChunk& chunk : chunks) {
    const auto n = static_cast<int64_t>(chunk.next_tokens.size());
    if (chunk.cache == nullptr || !decode_run(n, chunk.cache->max_step_tokens) ||
        chunk.cache->window.shape() != chunks.front().cache->window.shape() ||
        chunk.streams.dtype != DType::kF32 || chunk.streams.rank() != 3 ||
        chunk.streams.size(0) != n || chunk.streams.size(1) != m || chunk.streams.size(2) != d ||
        !last_or_every_row(chunk.logits, 2, n) ||
        (chunk.out_streams.data != nullptr && !last_or_every_row(chunk.out_streams, 3, n)) ||
        (chunks.size() > 1 && n != 1)) {
      return false;
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

Result<DecodeGraphs::Step> DecodeGraphs::pad(const Model& model,
                                             std::span<const SequenceChunk> chunks, int64_t size) {
  const auto n_real = static_cast<int64_t>(chunks.size());
  const int64_t n_pad = size - n_real;
  if (n_pad <= 0) return Step::of(chunks, n_real);
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
    if (!same_rings(made->cache)) return Step::of(chunks, n_real);  // rings of another make
    for (const AttentionCache& layer : made->cache.layers) made->start.push_back(counts_of(layer));
    if (pad_ != nullptr) made->logits = std::move(pad_->logits);
    pad_ = std::move(made);
  }
  const int64_t v = model.config().vocab_size;
  if (pad_->logits.numel() < n_pad * v) {
    DSV4_ASSIGN_OR_RETURN(pad_->logits, Tensor::empty(DType::kF32, {n_pad, v}, model.device()));
  }
  std::vector<SequenceChunk> padded(chunks.begin(), chunks.end());
  for (int64_t i = 0; i < n_pad; ++i) {
    padded.push_back(
        {std::span(&kPadToken, 1), 0, &pad_->cache, pad_->logits.view().rows(i, i + 1)});
  }
  return Step::of(padded, n_real);
}

Status DecodeGraphs::run(const Model& model, std::span<const SequenceChunk> chunks) {
  // A decode step's description is built once, padded to its bucket; a verify step's as it is.
  if (!Step::decodes(chunks)) {
    return run_step(model, Step::of(chunks, static_cast<int64_t>(chunks.size())));
  }
  DSV4_ASSIGN_OR_RETURN(
      const Step padded,
      pad(model, chunks, bucket_size(static_cast<int64_t>(chunks.size()), max_batch_)));
  return run_step(model, padded);
}

Status DecodeGraphs::run_draft(const Model& model, std::span<const MtpChunk> chunks) {
  return run_step(model, Step::of(model, chunks));
}

Status DecodeGraphs::run_step(const Model& model, const Step& step) {
  // Keyed by the rows the step runs (a decode step's bucket, or its own size where pad could not
  // pad it), as capture and give_up key them.
  const Key key = step.key();
  const auto graph = graphs_.find(key);
  const bool held = graph != graphs_.end() &&
                    graph->second->shape.holds(DecodeStepShape::of(std::span(step.layers)));
  if (planned_ && step.kind == Step::kDecode) {
    if (held) return replay(model, *graph->second, step);
    if (!eager_[key]) {
      eager_[key] = true;
      std::fprintf(stderr,
                   "dsv4: note: the decode step of %lld rows runs without a CUDA graph: none "
                   "was planned for its sizes\n",
                   static_cast<long long>(step.size()));
    }
    return run_eagerly(model, step);
  }
  const auto seen = eager_.find(key);
  if (seen == eager_.end() || seen->second) {
    eager_[key] = seen != eager_.end();  // a first step: eager, the next one captures
    return run_eagerly(model, step);
  }
  if (held) return replay(model, *graph->second, step);
  if (graph == graphs_.end() && step.kind != Step::kDecode) {
    const auto n_held = std::count_if(graphs_.begin(), graphs_.end(), [&](const auto& entry) {
      return entry.second->kind == step.kind;
    });
    if (n_held >= kMaxGraphsAKind) return run_eagerly(model, step);
  }
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
  if (max_batch_ > 0) max_batch_ = made.sizes.empty() ? 0 : std::min(max_batch_, made.sizes.back());
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
  DSV4_ASSIGN_OR_RETURN(const Step step, pad(model, one, size));
  if (static_cast<int64_t>(step.size()) != size) {
    return unimplemented("no padding rows with the rings of a session's cache");
  }
  const Step real = Step::of(one, 1);
  const std::vector<HostCounts> start = real.save_counts();
  // Each op's one-time setup at this size, as an unplanned bucket's first step.
  Status warmed = run_eagerly(model, step);
  real.restore_counts(start);
  if (warmed.ok()) warmed = try_capture(model, step);
  real.restore_counts(start);
  eager_[step.key()] = !warmed.ok();
  return warmed;
}

Status DecodeGraphs::forward_into(const Model& model, const Step& step, const Graph& g) const {
  const std::vector<TensorView> logits = rows_of(g.logits, step.n_logits);
  const std::vector<TensorView> streams = rows_of(g.streams, step.n_streams);
  if (step.kind == Step::kDraft) {
    const std::vector<TensorView> inputs = rows_of(g.inputs, step.n_rows);
    std::vector<MtpChunk> chunks = step.drafts;
    for (size_t i = 0; i < chunks.size(); ++i) {
      chunks[i].streams = inputs[i];
      chunks[i].logits = logits[i];
      chunks[i].out_streams = streams[i];
    }
    return model.mtp_rows(chunks, g.entry_ids.view());
  }
  std::vector<SequenceChunk> chunks = step.chunks;
  for (size_t i = 0; i < chunks.size(); ++i) {
    chunks[i].logits = logits[i];
    chunks[i].streams_out = streams[i];
  }
  return model.forward_rows(chunks, g.entry_ids.view());
}

Status DecodeGraphs::copy_out(const Step& step, const Graph& g) const {
  // The real chunks' outputs (not the padding rows'), each kind in one copy where the chunks'
  // are one buffer's consecutive rows (as the runtime lays them out).
  const auto real = static_cast<size_t>(step.n_real);
  const std::vector<TensorView> logits = rows_of(g.logits, step.n_logits);
  const std::vector<TensorView> streams = rows_of(g.streams, step.n_streams);
  std::vector<TensorView> from, to;
  for (size_t i = 0; i < real; ++i) from.push_back(logits[i]), to.push_back(step.logits[i]);
  DSV4_RETURN_IF_ERROR(copy_views(from, to));
  from.clear(), to.clear();
  for (size_t i = 0; i < real; ++i) {
    if (step.n_streams[i] > 0) from.push_back(streams[i]), to.push_back(step.streams[i]);
  }
  return copy_views(from, to);
}

Status DecodeGraphs::run_eagerly(const Model& model, const Step& step) {
  const Status ran = step.kind == Step::kDraft ? model.mtp_rows(step.drafts, TensorView{})
                                               : model.forward_rows(step.chunks, TensorView{});
  if (step.padded()) pad_->reset();
  return ran;
}

Status DecodeGraphs::give_up(const Model& model, const Step& step, const Status& why) {
  const Key key = step.key();
  eager_[key] = true;
  graphs_.erase(key);
  count_held();
  std::fprintf(stderr, "dsv4: note: the %s step of %lld rows runs without a CUDA graph: %s\n",
               step.name(), static_cast<long long>(sum(step.n_rows)), why.to_string().c_str());
  return run_eagerly(model, step);
}

Result<std::unique_ptr<DecodeGraphs::Graph>> DecodeGraphs::prepare(const Model& model,
                                                                   const Step& step,
                                                                   size_t slot_bytes) {
  DSV4_RETURN_IF_ERROR(can_capture(model));
  DSV4_RETURN_IF_ERROR(finish_device_work());  // nothing in flight uses the graph dropped next
  graphs_.erase(step.key());
  const checkpoint::ModelConfig& c = model.config();
  auto made = std::make_unique<Graph>();
  Graph& g = *made;
  g.kind = step.kind;
  g.shape = DecodeStepShape::of(std::span(step.layers));
  const int64_t n_ids =
      std::max<int64_t>(1, *std::max_element(g.shape.capacity.begin(), g.shape.capacity.end()));
  std::vector<int32_t> ids(static_cast<size_t>(n_ids));
  std::iota(ids.begin(), ids.end(), 0);
  DSV4_ASSIGN_OR_RETURN(g.entry_ids, upload(ids, {n_ids}, model.device()));
  DSV4_ASSIGN_OR_RETURN(
      g.logits, Tensor::empty(DType::kF32, {sum(step.n_logits), c.vocab_size}, model.device()));
  const auto streams = [&](std::span<const int64_t> n_rows) {
    return Tensor::empty(DType::kF32, {sum(n_rows), c.hc_mult, c.hidden_size}, model.device());
  };
  if (sum(step.n_streams) > 0) {
    DSV4_ASSIGN_OR_RETURN(g.streams, streams(step.n_streams));
  }
  if (step.kind == Step::kDraft) {
    DSV4_ASSIGN_OR_RETURN(g.inputs, streams(step.n_rows));
  }
  DSV4_RETURN_IF_ERROR(g.slots.reserve(slot_bytes));
  DSV4_RETURN_IF_ERROR(finish_device_work());  // the ids' upload read its vector
  return made;
}

Status DecodeGraphs::try_capture(const Model& model, const Step& step) {
  const StepUploads values = step.uploads(model.config());
  size_t slot_bytes = 0;
  for (size_t i = 0; i < kStepUploads; ++i) slot_bytes += values.bytes(i) + 256;
  // What fails before the capture (pinned slots or the graph's outputs not to be had) moves no
  // count.
  DSV4_ASSIGN_OR_RETURN(std::unique_ptr<Graph> made, prepare(model, step, slot_bytes));
  Graph& g = *made;
  // A draft step's input streams, into the rows the graph reads (before its first launch).
  if (step.kind == Step::kDraft) {
    DSV4_RETURN_IF_ERROR(copy_views(step.inputs, rows_of(g.inputs, step.n_rows)));
  }
  const std::vector<HostCounts> counts = step.save_counts();
  capturing_upload_slots() = &g.slots;
  Result<DeviceGraph> captured = DeviceGraph::capture([&] { return forward_into(model, step, g); });
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
    step.restore_counts(counts);
    return usable;
  }
  if (step.padded()) pad_->reset();
  graphs_[step.key()] = std::move(made);
  ++captures_;
  count_held();
  return ok_status();
}

// A capture that fails keeps the shape eager rather than fail every step of it.
Status DecodeGraphs::capture(const Model& model, const Step& step) {
  const Status captured = try_capture(model, step);
  if (!captured.ok()) return give_up(model, step, captured);
  return copy_out(step, *graphs_.at(step.key()));
}

Status DecodeGraphs::replay(const Model& model, Graph& g, const Step& step) {
  if (step.kind != Step::kDraft) {
    for (const SequenceChunk& chunk : step.chunks) DSV4_RETURN_IF_ERROR(model.check_chunk(chunk));
  }
  // Every check before any count moves, so that a refused step leaves every cache as it was.
  DSV4_RETURN_IF_ERROR(step.check(model));
  const StepUploads values = step.uploads(model.config());
  // The last replay's copies have read the slots (its logits came back since).
  DSV4_RETURN_IF_ERROR(finish_device_work());
  g.slots.write(0, values.ids);
  g.slots.write(1, values.positions);
  g.slots.write(2, values.window_rows);
  g.slots.write(3, values.cache_addresses);
  if (step.kind == Step::kDraft) {
    DSV4_RETURN_IF_ERROR(copy_views(step.inputs, rows_of(g.inputs, step.n_rows)));
  }
  // The counts move only once the step is on its way: a launch that fails leaves them.
  DSV4_RETURN_IF_ERROR(g.graph.launch());
  step.advance();
  if (step.padded()) pad_->reset();
  if (step.kind == Step::kVerify) ++verify_replays_;
  if (step.kind == Step::kDraft) ++draft_replays_;
  return copy_out(step, g);
}

void DecodeGraphs::count_held() {
  int64_t bytes = 0;
  for (const auto& [key, g] : graphs_) {
    for (const Tensor* t : {&g->logits, &g->streams, &g->inputs, &g->entry_ids}) {
      bytes += held_bytes(*t);
    }
  }
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
  return {held_graphs_.load(),   held_bytes_.load(),    captures_.load(),
          planned_batch_.load(), planned_bytes_.load(), verify_replays_.load(),
          draft_replays_.load()};
}

}  // namespace dsv4::model
