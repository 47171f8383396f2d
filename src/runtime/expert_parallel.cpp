#include "runtime/expert_parallel.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>

#include "base/device.h"
#include "kernels/ep/ep_moe.h"
#include "runtime/expert_shards.h"
#ifdef DSV4_WITH_CUDA
#include "kernels/ep/cuda/shared_device_moe.h"
#endif

namespace dsv4::runtime {

using kernels::ep::ExpertSharding;
using kernels::ep::HostRankGroup;

namespace {

// A call's device buffers, on the leader's GPU (ranks on other GPUs reach them through peer
// access), kept between calls and grown when one needs more: x and the token ids copied from the
// model's scratch, y, the MoE workspace the ranks share, and their group lists
// (kernels/ep/cuda/shared_device_moe.h).
struct DeviceStep {
  Tensor x, tokens, y, workspace, groups;
};

// One call as the ranks see it. The activations are copies the job owns (host tensors on the
// CPU, `device` on a GPU), so a rank that outlives the call (stalled past the watchdog) reads
// and writes only these and the weights, never the model's scratch, which the leader frees when
// it returns the error.
struct Job {
  int64_t layer = 0;
  int64_t n_tokens = 0;
  std::vector<kernels::MoeWeightsView> weights;  // R: each rank's (ExpertShards::rank_view)
  kernels::MoeConfig config;
  Tensor x, tokens, y;
  std::shared_ptr<const DeviceStep> device;
  bool hash_tokens = false;  // device->tokens holds the call's token ids
  std::shared_ptr<HostRankGroup> symmetric;

  // The routed sum once every rank is done.
  TensorView result() const { return device ? device->y.view().rows(0, n_tokens) : y.view(); }
};

// The rows of a step rank r is the home of: contiguous slices, rank 0 first, so their
// concatenation is the step's order and the combine gives moe_ffn's bits.
std::pair<int64_t, int64_t> home_rows(int64_t n_tokens, int rank, int n_ranks) {
  return {n_tokens * rank / n_ranks, n_tokens * (rank + 1) / n_ranks};
}

Result<Tensor> copy_of(const TensorView& from) {
  DSV4_ASSIGN_OR_RETURN(Tensor to, Tensor::empty(from.dtype, from.shape));
  DSV4_RETURN_IF_ERROR(copy_tensor(to.view(), from));
  return to;
}

// Fills options.rank_devices when empty and checks it: one device a rank, each able to reach the
// leader's memory. On the CPU there are no devices to name.
Status place_ranks(ExpertParallelOptions& options) {
  std::vector<int>& devices = options.rank_devices;
  if (options.device == Device::kCpu) {
    if (devices.empty()) return ok_status();
    return invalid_argument("expert parallelism: ranks on the CPU take no device ordinals");
  }
  if (devices.empty()) devices.assign(options.n_ranks, current_device());
  if (static_cast<int>(devices.size()) != options.n_ranks) {
    return invalid_argument("expert parallelism: " + std::to_string(devices.size()) +
                            " rank devices for " + std::to_string(options.n_ranks) + " ranks");
  }
  for (int rank = 1; rank < options.n_ranks; ++rank) {
    DSV4_RETURN_IF_ERROR(reach_leader(devices[rank], devices[0], rank));
  }
  return ok_status();
}

// Whether the ranks need copies of their experts: asked for, or ranks on several devices (each
// then holds its share only).
bool copies_experts(const ExpertParallelOptions& options) {
  const std::vector<int>& devices = options.rank_devices;
  return options.copy_shards ||
         std::any_of(devices.begin(), devices.end(), [&](int d) { return d != devices[0]; });
}

// Whether `have` holds at least `need` of the first dimension (and exists).
bool holds(const Tensor& have, int64_t need) {
  return !have.empty_tensor() && have.shape()[0] >= need;
}

}  // namespace

Status reach_leader(int device, int leader, int rank) {
  for (const auto& [from, to] : {std::pair{device, leader}, std::pair{leader, device}}) {
    const Status peer = enable_peer_access(from, to);
    if (!peer.ok()) {
      return Status(peer.code(), "expert parallelism: rank " + std::to_string(rank) +
                                     (from == device ? " cannot reach the leader's buffers: "
                                                     : "'s experts cannot reach the leader: ") +
                                     peer.message());
    }
  }
  return ok_status();
}

struct ExpertParallel::Group {
  Group(const ExpertParallelOptions& asked, ExpertSharding sharded, ExpertShards copies,
        int64_t model_width, int64_t experts_per_token)
      : options(asked),
        sharding(sharded),
        shards(std::move(copies)),
        hidden(model_width),
        top_k(experts_per_token),
        done(asked.n_ranks, 0),
        status(asked.n_ranks) {}

  // Symmetric buffers holding `per_rank` tokens a rank, made anew when a call needs more.
  Status reserve(int64_t per_rank) {
    if (symmetric && symmetric->layout().max_tokens >= per_rank) return ok_status();
    DSV4_ASSIGN_OR_RETURN(const kernels::ep::SymmetricLayout layout,
                          kernels::ep::SymmetricLayout::create(std::max<int64_t>(per_rank, 1),
                                                               hidden, top_k, options.n_ranks));
    DSV4_ASSIGN_OR_RETURN(std::unique_ptr<HostRankGroup> made,
                          HostRankGroup::create(layout, options.watchdog));
    symmetric = std::move(made);
    return ok_status();
  }

  // Rank `rank`'s part of `job`; its peers learn of its failure through the group.
  Status rank_forward(int rank, const Job& job) const {
    if (options.before_rank) {
      const Status fault = options.before_rank(rank, job.layer);
      if (!fault.ok()) {
        job.symmetric->abort(rank, fault);
        return fault;
      }
    }
    if (job.device) {
      const Status result = gpu_forward(rank, job);
      if (!result.ok()) job.symmetric->abort(rank, result);
      return result;
    }
    const auto [begin, end] = home_rows(job.n_tokens, rank, options.n_ranks);
    const kernels::ep::EpMoeIo io{job.x.view().rows(begin, end), job.tokens.view().rows(begin, end),
                                  job.y.view().rows(begin, end)};
    return kernels::ep::ep_moe_forward(*job.symmetric, rank, sharding, job.weights[rank],
                                       job.config, io);
  }

  // Rank `rank`'s part of a call on the GPU, on its device: the phases of
  // kernels/ep/cuda/shared_device_moe.h, each closed by a wait for this thread's stream (under
  // the watchdog: a hung kernel is an error, not a hang) and then a host barrier, so no rank
  // reads what a peer's kernels have not finished writing.
  Status gpu_forward(int rank, const Job& job) const {
#ifdef DSV4_WITH_CUDA
    namespace epc = kernels::ep::cuda;
    DSV4_RETURN_IF_ERROR(use_device(options.rank_devices[rank]));
    const DeviceStep& d = *job.device;
    const int64_t n = job.n_tokens;
    const epc::SharedDeviceIo io{d.x.view().rows(0, n),
                                 job.hash_tokens ? d.tokens.view().rows(0, n) : TensorView{},
                                 d.y.view().rows(0, n), d.workspace.view(), d.groups.view()};
    DSV4_ASSIGN_OR_RETURN(const epc::SharedDeviceMoe moe,
                          epc::SharedDeviceMoe::plan(job.weights[rank], job.config, sharding, io));
    const bool leader = rank == 0;
    // Launched work, then this rank's stream drained, then the peers met.
    const auto phase = [&](kernels::ep::EpPhase at, const Status& launched) -> Status {
      DSV4_RETURN_IF_ERROR(launched);
      DSV4_RETURN_IF_ERROR(epc::fence_stream(
          options.watchdog,
          "rank " + std::to_string(rank) + "'s work before " + kernels::ep::phase_name(at)));
      return job.symmetric->barrier(rank, at);
    };
    using kernels::ep::EpPhase;
    DSV4_RETURN_IF_ERROR(phase(EpPhase::kDispatch, leader ? moe.front() : ok_status()));
    DSV4_RETURN_IF_ERROR(phase(EpPhase::kHiddenScale, moe.gate_up(rank)));
    DSV4_RETURN_IF_ERROR(phase(EpPhase::kHiddenStaged, leader ? moe.stage_hidden() : ok_status()));
    DSV4_RETURN_IF_ERROR(phase(EpPhase::kCombine, moe.down(rank)));
    const auto [begin, end] = home_rows(n, rank, options.n_ranks);
    DSV4_RETURN_IF_ERROR(moe.combine(begin, end));
    return epc::fence_stream(options.watchdog, "rank " + std::to_string(rank) + "'s combine");
#else
    (void)rank, (void)job;
    return unimplemented("this build of dsv4 has no CUDA support");
#endif
  }

  // The device buffers of a call of `n_tokens` tokens (allocated on the calling thread's GPU).
  Status reserve_device(const model::RoutedExpertsCall& call) {
    const int64_t n_tokens = call.x.size(0), n_experts = call.weights.w13.n_matrices();
    const int64_t bytes = kernels::moe_ffn_workspace_bytes(n_tokens, call.weights, call.config);
    if (device && holds(device->x, n_tokens) && holds(device->workspace, bytes) &&
        device->groups.shape()[1] == n_experts + 2) {
      return ok_status();
    }
    const int64_t rows = std::max<int64_t>({n_tokens, 1, device ? device->x.shape()[0] : 0});
    const int64_t size = std::max(bytes, device ? device->workspace.shape()[0] : 0);
    auto made = std::make_shared<DeviceStep>();
    DSV4_ASSIGN_OR_RETURN(made->x, Tensor::empty(DType::kF32, {rows, hidden}, Device::kCuda));
    DSV4_ASSIGN_OR_RETURN(made->tokens, Tensor::empty(DType::kI64, {rows}, Device::kCuda));
    DSV4_ASSIGN_OR_RETURN(made->y, Tensor::empty(DType::kF32, {rows, hidden}, Device::kCuda));
    DSV4_ASSIGN_OR_RETURN(made->workspace, Tensor::empty(DType::kU8, {size}, Device::kCuda));
    DSV4_ASSIGN_OR_RETURN(
        made->groups, Tensor::empty(DType::kI32, {options.n_ranks, n_experts + 2}, Device::kCuda));
    device = std::move(made);
    return ok_status();
  }

  // Ranks 1 … R−1: wait for a job, run their part, report.
  void serve(int rank) {
    uint64_t seen = 0;
    for (;;) {
      std::shared_ptr<const Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex);
        posted.wait(lock, [&] { return stopping || job_id != seen; });
        if (stopping) return;
        seen = job_id;
        job = current;
      }
      const Status result = rank_forward(rank, *job);
      {
        std::lock_guard<std::mutex> lock(mutex);
        status[rank] = result;
        done[rank] = seen;
      }
      finished.notify_all();
    }
  }

  const ExpertParallelOptions options;
  const ExpertSharding sharding;
  const ExpertShards shards;
  const int64_t hidden, top_k;
  std::shared_ptr<HostRankGroup> symmetric;  // the leader's between calls
  std::shared_ptr<DeviceStep> device;        // likewise, when the ranks run on GPUs
  // A grouped step's whole stacks gathered on the leader's GPU, kept by the group rather than the
  // job so that the leader frees them, on its GPU, at the next call.
  std::vector<Tensor> leader_experts;

  std::mutex mutex;
  std::condition_variable posted, finished;
  std::shared_ptr<const Job> current;
  uint64_t job_id = 0;
  bool stopping = false;
  std::vector<uint64_t> done;  // per rank: the last job it finished
  std::vector<Status> status;  // per rank: that job's result
  Status failed;               // the first failure; every later call returns it
};

Result<ExpertSharding> rank_sharding(int64_t n_experts, int n_ranks, int64_t leader_experts) {
  return leader_experts > 0 ? ExpertSharding::with_leader(n_experts, n_ranks, leader_experts)
                            : ExpertSharding::create(n_experts, n_ranks);
}

Result<std::unique_ptr<ExpertParallel>> ExpertParallel::create(
    const checkpoint::ModelConfig& config, const ExpertParallelOptions& asked) {
  DSV4_ASSIGN_OR_RETURN(
      const ExpertSharding sharding,
      rank_sharding(config.n_routed_experts, asked.n_ranks, asked.leader_experts));
  ExpertParallelOptions options = asked;
  DSV4_RETURN_IF_ERROR(place_ranks(options));
  ExpertShards shards(sharding);
  if (copies_experts(options)) {
    if (options.weights == nullptr) {
      return invalid_argument(
          "expert parallelism: the ranks' own copies of their experts need the loaded weights");
    }
    DSV4_ASSIGN_OR_RETURN(shards,
                          ExpertShards::copy(*options.weights, sharding, options.rank_devices));
  }
  return start(config, options, std::move(shards));
}

Result<std::unique_ptr<ExpertParallel>> ExpertParallel::create(
    const checkpoint::ModelConfig& config, const ExpertParallelOptions& asked,
    ExpertShards copies) {
  DSV4_ASSIGN_OR_RETURN(
      const ExpertSharding sharding,
      rank_sharding(config.n_routed_experts, asked.n_ranks, asked.leader_experts));
  ExpertParallelOptions options = asked;
  DSV4_RETURN_IF_ERROR(place_ranks(options));
  const ExpertSharding& made = copies.sharding();
  bool same = copies.copied() && made.n_experts() == sharding.n_experts() &&
              made.n_ranks() == sharding.n_ranks();
  for (int r = 0; same && r < sharding.n_ranks(); ++r) {
    same = made.first_expert(r) == sharding.first_expert(r) &&
           made.n_local_experts(r) == sharding.n_local_experts(r);
  }
  const std::vector<int> devices = options.device == Device::kCpu
                                       ? std::vector<int>(options.n_ranks, -1)
                                       : options.rank_devices;
  if (!same || copies.devices() != devices) {
    return invalid_argument(
        "expert parallelism: the ranks' copies made while loading are not of the sharding or "
        "on the devices the ranks were asked for");
  }
  return start(config, options, std::move(copies));
}

Result<std::unique_ptr<ExpertParallel>> ExpertParallel::start(
    const checkpoint::ModelConfig& config, const ExpertParallelOptions& placed,
    ExpertShards shards) {
  ExpertParallelOptions options = placed;
  options.weights = nullptr;  // the calls carry the weights from here on
  const ExpertSharding sharding = shards.sharding();
  auto group = std::make_shared<Group>(options, sharding, std::move(shards), config.hidden_size,
                                       config.n_expert_used);
  // On a GPU the host group only carries the barriers; the rows stay in device memory.
  DSV4_RETURN_IF_ERROR(group->reserve(
      options.device == Device::kCpu ? (options.max_tokens + options.n_ranks - 1) / options.n_ranks
                                     : 1));
  std::unique_ptr<ExpertParallel> ep(new ExpertParallel(std::move(group)));
  for (int rank = 1; rank < options.n_ranks; ++rank) {
    ep->ranks_.emplace_back([group = ep->group_, rank] { group->serve(rank); });
  }
  return ep;
}

ExpertParallel::ExpertParallel(std::shared_ptr<Group> group) : group_(std::move(group)) {}

ExpertParallel::~ExpertParallel() {
  {
    std::lock_guard<std::mutex> lock(group_->mutex);
    group_->stopping = true;
  }
  group_->posted.notify_all();
  for (std::thread& rank : ranks_) rank.join();
}

Status ExpertParallel::run(const model::RoutedExpertsCall& asked) {
  Group& g = *group_;
  if (!g.failed.ok()) return g.failed;
  DSV4_ASSIGN_OR_RETURN(const model::RoutedExpertsCall call, g.shards.sized(asked));
  if (call.x.device != g.options.device) {
    return invalid_argument(std::string("expert parallelism: the ranks were made for the ") +
                            (g.options.device == Device::kCpu ? "CPU" : "GPU") +
                            ", the layer's activations are elsewhere");
  }
  const int n_ranks = g.options.n_ranks;
  const int64_t n_tokens = call.x.size(0);
  auto job = std::make_shared<Job>();
  job->layer = call.layer;
  job->n_tokens = n_tokens;
  job->config = call.config;
  for (int rank = 0; rank < n_ranks; ++rank) {
    DSV4_ASSIGN_OR_RETURN(kernels::MoeWeightsView own, g.shards.rank_view(call, rank));
    job->weights.push_back(own);
  }
  // Before anything is gathered or reserved there: the leader's buffers live on its GPU.
  if (call.x.device == Device::kCuda && current_device() != g.options.rank_devices[0]) {
    return invalid_argument("expert parallelism: the ranks' leader runs on GPU " +
                            std::to_string(g.options.rank_devices[0]) +
                            ", the layer was called on GPU " + std::to_string(current_device()));
  }
#ifdef DSV4_WITH_CUDA
  // The grouped path runs every group on rank 0: it reads the layer's whole stacks, which
  // with copies only the ranks hold (the loader's host copies are freed once the ranks have
  // theirs), so they are gathered from every rank's copy. The last call's are done with: every
  // rank returned from it (else the group failed and this call did not get here).
  g.leader_experts.clear();
  if (call.x.device == Device::kCuda && g.shards.copied() &&
      !kernels::ep::cuda::SharedDeviceMoe::splits_experts(n_tokens, call.config)) {
    DSV4_RETURN_IF_ERROR(g.shards.gather(call, job->weights[0], g.leader_experts));
  }
#endif
  if (call.x.device == Device::kCpu) {
    DSV4_RETURN_IF_ERROR(g.reserve((n_tokens + n_ranks - 1) / n_ranks));
    DSV4_ASSIGN_OR_RETURN(job->x, copy_of(call.x));
    DSV4_ASSIGN_OR_RETURN(job->tokens, copy_of(call.tokens));
    DSV4_ASSIGN_OR_RETURN(job->y, Tensor::empty(DType::kF32, call.y.shape));
  } else {
    DSV4_RETURN_IF_ERROR(g.reserve_device(call));
    job->device = g.device;
    DSV4_RETURN_IF_ERROR(copy_tensor(g.device->x.view().rows(0, n_tokens), call.x));
    job->hash_tokens = call.tokens.data != nullptr && call.tokens.numel() == n_tokens;
    if (job->hash_tokens) {
      DSV4_RETURN_IF_ERROR(copy_tensor(g.device->tokens.view().rows(0, n_tokens), call.tokens));
    }
  }
  job->symmetric = g.symmetric;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    g.current = job;
    id = ++g.job_id;
  }
  g.posted.notify_all();
  const Status leader = g.rank_forward(0, *job);

  // A peer blocked at a barrier returns at once when the group breaks; one stalled outside the
  // barriers is waited for one more watchdog period, then reported as not returning.
  std::unique_lock<std::mutex> lock(g.mutex);
  g.status[0] = leader;
  g.done[0] = id;
  const bool returned = g.finished.wait_for(lock, g.options.watchdog, [&] {
    return std::all_of(g.done.begin(), g.done.end(), [&](uint64_t d) { return d == id; });
  });
  if (leader.ok() && returned &&
      std::all_of(g.status.begin(), g.status.end(), [](const Status& s) { return s.ok(); })) {
    lock.unlock();
    return copy_tensor(call.y, job->result());
  }
  std::string report;
  StatusCode code = StatusCode::kInternal;
  for (int rank = n_ranks - 1; rank >= 0; --rank) {
    const bool back = g.done[rank] == id;
    const Status& s = g.status[rank];
    if (back && !s.ok()) code = s.code();
    report = "rank " + std::to_string(rank) + ": " +
             (!back ? "did not return within the watchdog (" +
                          std::to_string(g.options.watchdog.count()) + " ms)"
              : s.ok() ? "ok"
                       : s.message()) +
             (report.empty() ? "" : "; ") + report;
  }
  if (!returned) job->symmetric->abort(0, internal_error("a peer rank did not return"));
  g.failed = Status(code, "expert parallelism failed at layer " + std::to_string(call.layer) +
                              " (" + report + ")");
  return g.failed;
}

}  // namespace dsv4::runtime
