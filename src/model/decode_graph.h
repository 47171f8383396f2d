// The steps of decoding replayed as CUDA graphs (issue 30; docs/decode_graph.md): a step is
// captured once for its shape and then replayed, one launch for its few hundred kernels instead
// of a host call each. Three kinds of step:
//   - a decode step: B sequences, one token each (Model::forward), captured per batch bucket;
//   - a verify step of speculative decoding: each sequence its token and drafts, a run of up to
//     AttentionCache::kMaxDecodeRun rows with every row's logits and final streams
//     (Model::forward; runtime/speculative.h);
//   - a draft step: the MTP block over each sequence's kept rows or its last draft, the head at
//     its last row (Model::mtp_forward; model/mtp.h).
// What makes that possible is that such a step's launches do not change from one step to the
// next: every count a kernel needs it reads on the device (from the rows' positions and the
// caches' address table), the compressed sources are as wide as the caches' capacity
// (RowPositions::capacity_entry_ids), and the step's four host inputs (token ids, positions,
// window rows, the address table) are copied from pinned slots that each replay rewrites. The
// host keeps its own counts of each cache (checked and advanced as the eager step does:
// check_decode_step, advance_decode_step). The eager step is the reference: a replay gives its
// bits (tests/model/decode_graph_cuda_test.cpp). A decode step between buckets (1, 2, 4, 8, …)
// runs with padding rows over a cache of their own, so a server whose batch wanders holds a
// graph a bucket, not one a batch size; verify and draft steps are keyed by their rows.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "dsv4/status.h"
#include "model/deepseek_v4.h"

namespace dsv4::model {

// ModelOptions::cuda_graph_max_batch where padding rows leave the real rows' bits alone, else 0
// (every batch size its own graph, no padding). Not so with W4A4 routed experts staged with
// dynamic scales (a layer without the checkpoint's calibrated input scales): stage_activation
// takes one global scale from the amax of all of the step's rows (kernels/ops.h), so a padding
// row with a larger amax would change every real row's NVFP4 codes.
int64_t padding_max_batch(const checkpoint::ModelWeights& weights, const ModelOptions& options);

// What a captured step's launches were made for, per layer: the rings' rows and the largest
// entry capacity of the step's caches. Sizes only, no address: a captured step reaches its
// caches through the address table each replay rewrites, and reads the model's RoPE tables, so
// one graph replays over any sequences whose caches have these sizes.
struct DecodeStepShape {
  std::vector<int64_t> ring_rows;
  std::vector<int64_t> capacity;

  // Of a step of `chunks` (DecodeGraphs::serves: every cache with the first's layers and rings).
  static DecodeStepShape of(std::span<const SequenceChunk> chunks);
  // Of caches given layer by layer, [layer][chunk].
  static DecodeStepShape of(std::span<const std::vector<AttentionCache*>> layers);
  // Whether a graph made for `this` runs a step of `other`: the same rings, and no capacity
  // past this one's (the padding covers fewer entries).
  bool holds(const DecodeStepShape& other) const;
};

class DecodeGraphs {
 public:
  // Held at most of verify steps and of draft steps (each an exact pattern of rows a sequence;
  // past it a new pattern runs eagerly): at B = 1 a verify step has k + 1 ≤ 5 rows and a draft
  // step 1 to k + 1, with or without the streams the next depth reads.
  static constexpr int64_t kMaxGraphsAKind = 16;

  // max_batch > 0: a decode step of B sequences runs as one of the bucket's size, the next of 1,
  // 2, 4, 8, … at most max_batch (or B past it), its other rows padding (bucket_size). 0: a
  // graph for each batch size.
  explicit DecodeGraphs(int64_t max_batch);
  ~DecodeGraphs();

  // Whether `chunks` is a step a graph runs: on the GPU, every chunk a run of 1 to
  // kMaxDecodeRun tokens of its sequence within its cache's step, no snapshot, every layer's
  // rings of one size; and either every chunk one token with its logits and no streams (a
  // decode step), or every chunk keeping its final streams (a verify step) and, with several
  // chunks, every row's logits and streams (else the forward gathers them, by addresses it
  // uploads).
  static bool serves(const Model& model, std::span<const SequenceChunk> chunks);
  // Whether the MTP block's call `chunks` is a draft step a graph runs: on the GPU, every chunk
  // 1 to kMaxDecodeRun rows within its cache's step, rings of one size, and either one chunk or
  // one row each (else the head's rows and the kept streams are gathered, by addresses uploaded
  // a call).
  static bool serves_draft(const Model& model, std::span<const MtpChunk> chunks);

  // The rows a decode step of `batch` sequences runs as: its bucket, the next of 1, 2, 4, 8, …
  // at most max_batch; `batch` itself past max_batch, or with max_batch 0 (no padding).
  static int64_t bucket_size(int64_t batch, int64_t max_batch);

  // The step sizes plan captures for a server of up to max_batch sequences: every bucket (1, 2,
  // 4, … max_batch) where steps are padded (padding_max_batch > 0), else every size 1 …
  // max_batch.
  static std::vector<int64_t> planned_sizes(int64_t padding_max_batch, int64_t max_batch);

  // Before the first request (Model::plan_decode_graphs): each of planned_sizes is run once
  // eagerly and then captured and launched, on one cache of max_positions (a Session's rings:
  // the default step size) and the padding rows, so its graph holds every cache a server of
  // that context makes (DecodeStepShape::holds) and the graphs' memory is taken now, not by a
  // request. The sizes go up, and the first that fails (a CPU model, or the device's memory
  // gone) ends the plan: it and the larger ones run eagerly from then on, as batches past the
  // largest planned bucket do (unpadded), said in the plan's note. From then on no decode step
  // captures: one that no graph holds runs eagerly, with one note a size on stderr. Verify and
  // draft steps are not planned (their shapes follow the drafts kept): they capture as met.
  Result<DecodeGraphPlan> plan(const Model& model, int64_t max_batch, int64_t max_positions);

  // Model::forward of such a step, and Model::mtp_forward of a draft step. Without a plan (and
  // for verify and draft steps), a shape's first step runs eagerly (each op's one-time setup at
  // that size), its second is captured, later ones replay; a graph whose caches' rings or
  // capacities no longer fit is captured again. A capture that fails, or whose first launch
  // does, or that cannot be prepared (its pinned slots or outputs not to be had; a CPU model),
  // leaves the caches as they were and runs the step eagerly, says so once on stderr, and keeps
  // that shape eager. A replay that cannot launch (resource_exhausted when the device's memory
  // is gone) leaves every cache as it was.
  Status run(const Model& model, std::span<const SequenceChunk> chunks);
  Status run_draft(const Model& model, std::span<const MtpChunk> chunks);

  // Safe from any thread while another runs steps.
  DecodeGraphStats stats() const;

 private:
  struct Graph;
  struct PadRows;
  struct Step;
  using Key = std::vector<int64_t>;  // the step's kind, then each chunk's rows and outputs
  Status run_step(const Model& model, const Step& step);
  Result<Step> pad(const Model& model, std::span<const SequenceChunk> chunks, int64_t size);
  Status run_eagerly(const Model& model, const Step& step);
  // A graph for `step` with its outputs, entry ids and `slot_bytes` of upload slots, not yet
  // captured.
  Result<std::unique_ptr<Graph>> prepare(const Model& model, const Step& step, size_t slot_bytes);
  // The step captured and launched, its graph held from now on; or why not, with every count
  // as it was and the step not run.
  Status try_capture(const Model& model, const Step& step);
  Status capture(const Model& model, const Step& step);
  Status replay(const Model& model, Graph& graph, const Step& step);
  // The step's forward with the graph's inputs and outputs (what a capture records).
  Status forward_into(const Model& model, const Step& step, const Graph& graph) const;
  // The graph's outputs into the step's.
  Status copy_out(const Step& step, const Graph& graph) const;
  // The step runs eagerly from now on, said once on stderr.
  Status give_up(const Model& model, const Step& step, const Status& why);
  // One decode step of `size` rows on `cache` at position 0 (and padding rows) run eagerly and
  // then captured; `cache` is back at position 0 after either.
  Status warm_up(const Model& model, SequenceCache& cache, const TensorView& logits, int64_t size);
  void count_held();

  int64_t max_batch_;
  std::map<Key, std::unique_ptr<Graph>> graphs_;
  std::map<Key, bool> eager_;     // shapes seen: true = stays eager
  std::unique_ptr<PadRows> pad_;  // the padding rows' cache, made at the first padded step
  bool planned_ = false;          // plan ran: no decode step captures from then on
  std::atomic<int64_t> held_graphs_{0}, held_bytes_{0}, captures_{0};
  std::atomic<int64_t> planned_batch_{0}, planned_bytes_{0};
  std::atomic<int64_t> verify_replays_{0}, draft_replays_{0};
};

}  // namespace dsv4::model
