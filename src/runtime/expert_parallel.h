// Expert parallelism behind the placement seam (model/expert_placement.h): a step's routed
// experts sharded by expert over R ranks (kernels/ep: the dispatch plan, symmetric buffers
// carrying NVFP4 rows with their block and global scales, the combine at each token's home).
// All ranks step the same batch (docs/ep.md §7): the model runs once, on the thread that calls
// it (rank 0, the leader); at each MoE layer the step's T tokens are split into R contiguous
// slices, rank r the home of slice r, and every rank runs kernels::ep::ep_moe_forward on its
// slice while owning experts sharding.first_expert(r) … (docs/ep.md §2).
//
// Ranks are threads, each on its rank's device (ExpertParallelOptions::rank_devices: all the
// model's device on one GPU), with host-ordered phases: every cross-rank wait is a HostRankGroup
// barrier on the host, never a kernel spinning on a peer's, so ranks that share a GPU cannot
// deadlock by holding every SM while they wait (docs/ep.md §7). Each rank reads its experts
// through its own view (expert_shards.h): its copy on its device where it has one, else its
// range of the call's stacks. On the CPU each rank runs kernels::ep::ep_moe_forward on its home
// slice; on the GPU the ranks run the phases of kernels/ep/cuda/shared_device_moe.h (rank 0 the
// step's routing and stagings, each rank its experts' kernels and its home slice's combine) over
// buffers on the leader's device, each phase closed by a wait for the rank's own stream under
// the watchdog before the barrier. A step on the grouped path (above the fused kernels' range)
// runs every group on rank 0, from the call's whole stacks (with copies, gathered on the leader's
// device from every rank's copy). Either way the result is bitwise the
// single-rank moe_ffn's on that device.
//
// Faults: the group's watchdog turns a rank that never reaches a phase into an error on every
// rank; a rank that fails tells its peers at once. Either way the group stays broken and every
// later call fails at once with the first cause: the engine reports it, never a wrong token.
//
// Dimension letters: T tokens of a step, D model width, R ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/weights.h"
#include "kernels/ep/expert_sharding.h"
#include "model/expert_placement.h"
#include "runtime/expert_shards.h"

namespace dsv4::runtime {

struct ExpertParallelOptions {
  int n_ranks = 1;
  // Rank 0's routed experts of each layer (kernels/ep/expert_sharding.h with_leader), fewer than
  // an even share where its GPU cannot hold that beside every other weight (ep_memory_plan.h
  // leader_experts_to_fit); 0: an even split.
  int64_t leader_experts = 0;
  // Where the model runs, and so the ranks: the CPU or the calling thread's GPU.
  Device device = Device::kCpu;
  // On a GPU, each rank's device ordinal (n_ranks of them). Rank 0's is the leader's, which holds
  // the model, the weights and the step's buffers; a rank on another device reads and writes
  // them through peer access, enabled by create. Empty: every rank on the device current on the
  // thread that calls create (ranks sharing one GPU: the same code with every ordinal equal).
  std::vector<int> rank_devices{};
  // The loaded weights the calls will come from, for the ranks' own copies of their experts
  // (expert_shards.h), when create is not handed copies made while loading: made from these, on
  // each rank's device, when the ranks span several devices or with copy_shards. Without copies
  // every rank reads its range of the call's stacks where they are.
  const checkpoint::ModelWeights* weights = nullptr;
  // Tests: every rank gets its own copy even where it shares the leader's device, so one GPU or
  // the CPU runs what ranks on several GPUs run.
  bool copy_shards = false;
  // Most tokens one call carries (the engine's step): sizes the CPU ranks' symmetric buffers,
  // which grow if a call carries more (on a GPU the device buffers grow with the calls).
  int64_t max_tokens = 1;
  // How long a rank waits at a phase for its peers, or on a GPU for its own stream, before the
  // group fails (the watchdog).
  std::chrono::milliseconds watchdog{60000};
  // Fault injection for tests: called on each rank before its part of every call; an error
  // fails that rank, a sleep stalls it.
  std::function<Status(int rank, int64_t layer)> before_rank = nullptr;
};

// How `n_ranks` ranks shard `n_experts` experts: rank 0 owning `leader_experts` of them and the
// others an even split of the rest, or all an even split where `leader_experts` is 0
// (ExpertParallelOptions::leader_experts); kernels::ep::ExpertSharding's refusals.
Result<kernels::ep::ExpertSharding> rank_sharding(int64_t n_experts, int n_ranks,
                                                  int64_t leader_experts);

// Peer access both ways between rank `rank`'s GPU `device` and the leader's, `leader`: the rank
// reads and writes the leader's step buffers, and the leader gathers the rank's copy of its
// experts for a grouped step (ExpertShards::gather), peer to peer. The error names the rank.
Status reach_leader(int device, int leader, int rank);

class ExpertParallel final : public model::ExpertPlacement {
 public:
  // Refuses rank counts kernels::ep cannot shard `config`'s experts over, naming both, rank
  // devices without peer access to the leader's, and copies asked for without options.weights;
  // a copy that does not fit its device is resource_exhausted.
  static Result<std::unique_ptr<ExpertParallel>> create(const checkpoint::ModelConfig& config,
                                                        const ExpertParallelOptions& options);
  // The same with every rank's copy of its experts made already (`copies`: under --gpus N, layer
  // by layer while loading, placement.h), so nothing is copied here and options.weights is not
  // read. Copies of another sharding or on other devices than the options ask for are
  // invalid_argument.
  static Result<std::unique_ptr<ExpertParallel>> create(const checkpoint::ModelConfig& config,
                                                        const ExpertParallelOptions& options,
                                                        ExpertShards copies);
  ~ExpertParallel() override;
  ExpertParallel(const ExpertParallel&) = delete;
  ExpertParallel& operator=(const ExpertParallel&) = delete;

  // Runs the call on every rank (this thread is rank 0). W4A4 only, on options.device. On
  // failure the error names every rank's status.
  Status run(const model::RoutedExpertsCall& call) override;

  struct Group;  // the state the rank threads share (expert_parallel.cpp)

 private:
  explicit ExpertParallel(std::shared_ptr<Group> group);
  // The group over `shards` and its rank threads; `options` with its rank devices placed.
  static Result<std::unique_ptr<ExpertParallel>> start(const checkpoint::ModelConfig& config,
                                                       const ExpertParallelOptions& options,
                                                       ExpertShards shards);
  std::shared_ptr<Group> group_;
  std::vector<std::thread> ranks_;  // ranks 1 … R−1
};

}  // namespace dsv4::runtime
