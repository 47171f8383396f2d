// Where each expert-parallel rank (expert_parallel.h) reads its routed experts from: its range of
// every main layer's NVFP4 stacks (kernels::ep::ExpertSharding: first_expert(r) …).
//
// A rank always reads a stack-shaped view (kernels::ep::shard_as_stack) whose matrices
// first_expert(r) … are its own, so the expert ids of its group lists address them unchanged,
// on the CPU (kernels/ep/ep_moe.h slices its range back out) and on a GPU (the fused expert
// kernels index the stack by group). Behind that view is either the rank's own copy, made here
// on its device, or the range of the model's stacks where they are. Every rank gets a copy when
// the ranks span several GPUs (each GPU then holds its share only; the loader left the stacks in
// host memory, placement.h), or when asked (tests: one device running the indexing of several).
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

  // Each rank's copy of its experts of every main layer of `weights` that has NVFP4 ones, made
  // on its device: `devices[r]` a GPU ordinal (memory from that GPU's pool), or empty for the
  // CPU. resource_exhausted names the rank and layer whose copy did not fit.
  static Result<ExpertShards> copy(const checkpoint::ModelWeights& weights,
                                   const kernels::ep::ExpertSharding& sharding,
                                   const std::vector<int>& devices);

  ExpertShards(ExpertShards&&) = default;
  ExpertShards& operator=(ExpertShards&&) = default;
  ~ExpertShards();  // each GPU's copies freed with that GPU current

  bool copied() const { return !ranks_.empty(); }

  // Rank `rank`'s view of `call`'s weights: the call's router and scales, and the routed stacks
  // as shard_as_stack gives them, from its copy of layer call.layer or from the call's stacks.
  // A layer with no copy where there are copies is an error.
  Result<kernels::MoeWeightsView> rank_view(const model::RoutedExpertsCall& call, int rank) const;

 private:
  struct Stacks {
    format::Nvfp4Tensor w13, w2;  // [El, 2F, D], [El, D, F]
  };
  // A rank's copies by layer (no NVFP4 experts: empty stacks) and the device they are on.
  struct Rank {
    int device = -1;  // -1: the CPU
    std::vector<Stacks> layers;
  };

  kernels::ep::ExpertSharding sharding_;
  std::vector<Rank> ranks_;  // R when copied(), else empty
};

}  // namespace dsv4::runtime
