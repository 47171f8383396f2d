// Where each expert-parallel rank (expert_parallel.h) reads its routed experts from: its range of
// every main layer's NVFP4 stacks (kernels::ep::ExpertSharding: first_expert(r) …).
//
// A rank always reads a stack-shaped view (kernels::ep::shard_as_stack) whose matrices
// first_expert(r) … are its own, so the expert ids of its group lists address them unchanged,
// on the CPU (kernels/ep/ep_moe.h slices its range back out) and on a GPU (the fused expert
// kernels index the stack by group). Behind that view is either the rank's own copy, made here
// on its device, or the range of the model's stacks where they are. Every rank gets a copy when
// the ranks span several GPUs (each GPU then holds its share only: under --gpus N the loader
// hands each main layer's experts over as it loads them, take_layer copies every rank's share
// and frees the host's, placement.h), or when asked (tests: one device running the indexing of
// several).
//
// Dimension letters: E routed experts, R ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "checkpoint/weights.h"
#include "dsv4/status.h"
#include "format/nvfp4.h"
#include "kernels/ep/expert_sharding.h"
#include "model/expert_placement.h"

namespace dsv4::runtime {

class ExpertShards {
 public:
  // No copies: every rank reads its range of the model's stacks.
  explicit ExpertShards(const kernels::ep::ExpertSharding& sharding) : sharding_(sharding) {}

  // Ranks that will each hold a copy of their experts, of no layer yet: rank r's on
  // `devices[r]`, a GPU ordinal (memory from that GPU's pool), or all on the CPU when `devices`
  // is empty. copy_layer or take_layer fills them a layer at a time.
  static ExpertShards for_ranks(const kernels::ep::ExpertSharding& sharding,
                                const std::vector<int>& devices);

  // Each rank's copy of its experts of every main layer of `weights` that has NVFP4 ones, made
  // on its device (for_ranks' `devices`), the weights left as they are: for ranks sharing one
  // device that are asked for copies (tests), or a model whose stacks stay where they are.
  static Result<ExpertShards> copy(const checkpoint::ModelWeights& weights,
                                   const kernels::ep::ExpertSharding& sharding,
                                   const std::vector<int>& devices);

  // Each rank's range of main layer `layer`'s NVFP4 stacks copied to its device, each with its
  // GPU current, and finished there when this returns, so `experts` may be freed at once.
  // resource_exhausted names the rank and layer whose copy did not fit; a layer of another
  // expert count than the ranks shard is invalid_argument.
  Status copy_layer(int64_t layer, const checkpoint::RoutedExpertWeights& experts);

  // copy_layer, then the codes and block scales of `experts` freed (the per-matrix scales, on
  // the GPU, stay): the loader's per-layer hook under --gpus N (placement.h), so the host
  // holds one layer's experts at a time and nothing once loaded. Nothing reads the freed stacks
  // after: sized gives a call their shapes again with no memory behind them, a step that needs
  // the layer whole gathers it from the ranks, and run_in_place refuses a layer without codes.
  Status take_layer(int64_t layer, checkpoint::RoutedExpertWeights& experts);

  const kernels::ep::ExpertSharding& sharding() const { return sharding_; }
  // Each rank's device ordinal (-1: the CPU); empty without copies.
  std::vector<int> devices() const;

  ExpertShards(ExpertShards&&) = default;
  ExpertShards& operator=(ExpertShards&&) = default;
  ~ExpertShards();  // each GPU's copies freed with that GPU current

  bool copied() const { return !ranks_.empty(); }

  // Rank `rank`'s view of `call`'s weights: the call's router and scales, and the routed stacks
  // as shard_as_stack gives them, from its copy of layer call.layer or from the call's stacks.
  // A layer with no copy where there are copies is an error.
  Result<kernels::MoeWeightsView> rank_view(const model::RoutedExpertsCall& call, int rank) const;

  // `call` as the ranks take it. Where its stacks' codes and block scales were freed
  // (take_layer; the views then have no shape), they get the whole stacks' shapes back
  // as views of no memory (data null): the call's sizes for rank_view, gather and the step's
  // buffers, and nothing to read, since each rank reads its own copy and a grouped step what
  // gather makes. Otherwise `call` as it is.
  Result<model::RoutedExpertsCall> sized(const model::RoutedExpertsCall& call) const;

  // `view` (the call's weights) with its routed stacks' codes and block scales gathered whole
  // from every rank's copy of layer call.layer into fresh memory on the current GPU (kept alive
  // by `keep`), in the call's stream order: what a step that runs every expert on one GPU reads
  // (expert_parallel.h, the grouped path). A copy on another GPU comes peer to peer, so no host
  // copy of the experts is needed (docs/ep.md §7 says why). Copies on the GPU only.
  Status gather(const model::RoutedExpertsCall& call, kernels::MoeWeightsView& view,
                std::vector<Tensor>& keep) const;

 private:
  struct Stacks {
    format::Nvfp4Tensor w13, w2;  // [El, 2F, D], [El, D, F]
  };
  // Rank `rank`'s copy of layer call.layer, checked against the call's stacks' shapes.
  Result<const Stacks*> own_copy(const model::RoutedExpertsCall& call, int rank) const;
  // A rank's copies by layer (no NVFP4 experts: empty stacks) and the device they are on.
  struct Rank {
    int device = -1;  // -1: the CPU
    std::vector<Stacks> layers;
  };

  kernels::ep::ExpertSharding sharding_;
  std::vector<Rank> ranks_;  // R when copied(), else empty
};

}  // namespace dsv4::runtime
