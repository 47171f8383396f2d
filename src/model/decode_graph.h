// The decode step replayed as a CUDA graph (issue 30; docs/decode_graph.md): a step of B
// sequences, one token each, is captured once for its B and then replayed, one launch for its
// few hundred kernels instead of a host call each. What makes that possible is that such a
// step's launches do not change from one step to the next: every count a kernel needs it reads
// on the device (from the rows' positions and the caches' address table), the compressed
// sources are as wide as the caches' capacity (RowPositions::capacity_entry_ids), and the step's
// four host inputs (token ids, positions, window rows, the address table) are copied from
// pinned slots that each replay rewrites. The host keeps its own counts of each cache (checked
// and advanced as the eager step does: check_decode_step, advance_decode_step). The eager step
// is the reference: a replay gives its bits (tests/model/decode_graph_cuda_test.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "dsv4/status.h"
#include "model/deepseek_v4.h"

namespace dsv4::model {

class DecodeGraphs {
 public:
  DecodeGraphs();
  ~DecodeGraphs();

  // Whether `chunks` is a step a graph runs: on the GPU, every chunk one token of its sequence
  // (logits of that token only), no snapshot, no streams out, no compressor step kept for a
  // rollback, and every layer's rings of one size.
  static bool serves(const Model& model, std::span<const SequenceChunk> chunks);

  // Model::forward of such a step. A batch size's first step runs eagerly (each op's one-time
  // setup), its second is captured, later ones replay; a graph whose caches' rings or capacities
  // no longer fit is captured again. A capture that fails leaves the caches as they were and
  // runs the step eagerly, says so once on stderr, and keeps that batch size eager.
  Status run(const Model& model, std::span<const SequenceChunk> chunks);

 private:
  struct Graph;
  Status capture(const Model& model, std::span<const SequenceChunk> chunks);
  Status replay(const Model& model, Graph& graph, std::span<const SequenceChunk> chunks);

  std::map<int64_t, std::unique_ptr<Graph>> graphs_;  // by batch size
  std::map<int64_t, bool> eager_;                     // sizes seen: true = stays eager
};

}  // namespace dsv4::model
