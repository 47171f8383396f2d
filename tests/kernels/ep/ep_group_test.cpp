// The pieces around the EP MoE: expert sharding (including the refused configurations), the
// dispatch plan, and the watchdog that turns a dead or stalled peer into an error.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/ep/dispatch_plan.h"
#include "kernels/ep/ep_fixture.h"
#include "kernels/ep/ep_moe.h"
#include "testing/compare.h"
#include "testing/tolerance.h"

namespace dsv4::kernels::ep {
namespace {

using namespace std::chrono_literals;

TEST(ExpertSharding, ContiguousRangesCoverEveryExpertOnce) {
  for (int n_ranks : {1, 2, 3, 4, 5, 7, 8}) {
    for (int64_t n_experts : {int64_t{8}, int64_t{16}, int64_t{17}, int64_t{256}}) {
      if (n_experts < n_ranks) continue;
      const ExpertSharding s = *ExpertSharding::create(n_experts, n_ranks);
      int64_t next = 0;
      for (int r = 0; r < n_ranks; ++r) {
        ASSERT_EQ(s.first_expert(r), next);
        ASSERT_GE(s.n_local_experts(r), n_experts / n_ranks);
        ASSERT_LE(s.n_local_experts(r), n_experts / n_ranks + 1);
        for (int64_t e = next; e < next + s.n_local_experts(r); ++e) ASSERT_EQ(s.owner(e), r);
        next += s.n_local_experts(r);
      }
      EXPECT_EQ(next, n_experts) << n_experts << " experts over " << n_ranks << " ranks";
    }
  }
}

TEST(ExpertSharding, UnevenSplitGivesTheFirstRanksOneMore) {
  const ExpertSharding s = *ExpertSharding::create(16, 3);
  EXPECT_EQ(s.n_local_experts(0), 6);
  EXPECT_EQ(s.n_local_experts(1), 5);
  EXPECT_EQ(s.n_local_experts(2), 5);
  EXPECT_EQ(s.owner(5), 0);
  EXPECT_EQ(s.owner(6), 1);
  EXPECT_EQ(s.owner(11), 2);
}

// A leader with fewer than its share: its range first, the rest split over the other ranks as
// create splits them, every expert owned once, owner() agreeing with the ranges.
TEST(ExpertSharding, ALeaderWithFewerExpertsLeavesTheRestEvenlySplit) {
  for (int n_ranks : {1, 2, 3, 8}) {
    for (int64_t n_experts : {int64_t{8}, int64_t{17}, int64_t{384}}) {
      if (n_experts < n_ranks) continue;
      const int64_t most = n_ranks == 1 ? n_experts : n_experts - (n_ranks - 1);
      for (int64_t leader : {int64_t{1}, most / 2, most}) {
        if (leader < 1 || (n_ranks == 1 && leader != n_experts)) continue;
        SCOPED_TRACE(std::to_string(n_experts) + " over " + std::to_string(n_ranks) +
                     ", leader " + std::to_string(leader));
        const ExpertSharding s = *ExpertSharding::with_leader(n_experts, n_ranks, leader);
        EXPECT_EQ(s.n_local_experts(0), leader);
        int64_t next = 0;
        for (int r = 0; r < n_ranks; ++r) {
          ASSERT_EQ(s.first_expert(r), next);
          ASSERT_GE(s.n_local_experts(r), 1);
          if (r > 0) {
            const int64_t rest = n_experts - leader;
            ASSERT_GE(s.n_local_experts(r), rest / (n_ranks - 1));
            ASSERT_LE(s.n_local_experts(r), rest / (n_ranks - 1) + 1);
          }
          for (int64_t e = next; e < next + s.n_local_experts(r); ++e) ASSERT_EQ(s.owner(e), r);
          next += s.n_local_experts(r);
        }
        EXPECT_EQ(next, n_experts);
      }
    }
  }
  // 384 over 8 (V4-Pro's experts) with the leader at 26: 51 or 52 on each other rank.
  const ExpertSharding pro = *ExpertSharding::with_leader(384, 8, 26);
  EXPECT_EQ(pro.n_local_experts(1), 52);
  EXPECT_EQ(pro.n_local_experts(7), 51);
  EXPECT_EQ(pro.owner(25), 0);
  EXPECT_EQ(pro.owner(26), 1);
  EXPECT_EQ(pro.owner(383), 7);
}

TEST(ExpertSharding, RefusesALeaderCountThatLeavesARankNone) {
  for (const auto& [n_experts, n_ranks, leader] :
       {std::tuple{int64_t{16}, 4, int64_t{0}}, {int64_t{16}, 4, int64_t{14}},
        {int64_t{16}, 1, int64_t{15}}, {int64_t{16}, 4, int64_t{-3}}}) {
    const Result<ExpertSharding> s = ExpertSharding::with_leader(n_experts, n_ranks, leader);
    ASSERT_FALSE(s.ok()) << leader;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("rank 0 cannot own " + std::to_string(leader)),
              std::string::npos)
        << s.status().message();
  }
  EXPECT_TRUE(ExpertSharding::with_leader(16, 4, 13).ok());
}

TEST(ExpertSharding, RefusesRankCountsItCannotServe) {
  const Result<ExpertSharding> too_many = ExpertSharding::create(4, 8);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("4 routed experts cannot be spread over 8 ranks"),
            std::string::npos)
      << too_many.status().message();
  EXPECT_FALSE(ExpertSharding::create(16, 0).ok());
  EXPECT_FALSE(ExpertSharding::create(256, 9).ok());
}

TEST(SymmetricLayout, RefusesWhatTheBufferCannotCarry) {
  EXPECT_EQ(SymmetricLayout::create(8, 64, 33, 2).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(SymmetricLayout::create(8, 60, 4, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SymmetricLayout::create(0, 64, 4, 2).status().code(), StatusCode::kInvalidArgument);
}

// Every field sits apart from the next, 256-byte aligned, big enough for its shape; what a rank
// publishes comes before the combine area (the NCCL baseline all-gathers that prefix).
TEST(SymmetricLayout, FieldsAreDisjointAlignedAndSized) {
  const int64_t t = 37, d = 4096, k = 6;
  const int n_ranks = 8;
  const SymmetricLayout l = SymmetricLayout::create(t, d, k, n_ranks).value();
  const std::vector<std::pair<size_t, size_t>> fields = {
      // offset, bytes
      {l.scales, 2 * sizeof(float)},
      {l.ids, t * k * sizeof(int32_t)},
      {l.send_count, n_ranks * sizeof(int32_t)},
      {l.sends, n_ranks * t * sizeof(TokenSend)},
      {l.slot_row, t * k * sizeof(int32_t)},
      {l.staged_packed, t * d / 2},
      {l.staged_scale, t * d / 16},
      {l.staged_global, sizeof(float)},
      {l.combine, t * (k + 1) * d * sizeof(float)},
      {l.signals, kMaxRanks * sizeof(uint32_t)}};
  for (size_t i = 0; i < fields.size(); ++i) {
    EXPECT_EQ(fields[i].first % 256, 0u) << "field " << i;
    const size_t end = fields[i].first + fields[i].second;
    EXPECT_LE(end, i + 1 < fields.size() ? fields[i + 1].first : l.total_bytes) << "field " << i;
  }
  EXPECT_EQ(l.published_bytes(), l.combine);
  EXPECT_EQ(l.combine_rows(), t * (k + 1));
}

// ids [3 tokens, K=3] over 4 experts on 2 ranks (experts 0-1 on rank 0, 2-3 on rank 1).
TEST(DispatchPlan, SendsEachTokenOncePerDestinationWithItsSlots) {
  const ExpertSharding s = *ExpertSharding::create(4, 2);
  const std::vector<int32_t> ids = {3, 0, 2,   // token 0: slots 1 -> rank 0; 0, 2 -> rank 1
                                    1, 0, 1,   // token 1: all to rank 0 (repeats allowed)
                                    2, 3, 2};  // token 2: all to rank 1
  const DispatchPlan plan = plan_dispatch(ids.data(), 3, 3, s);
  ASSERT_EQ(plan.send_offsets, (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(plan.sends[0].token, 0);
  EXPECT_EQ(plan.sends[0].slot_mask, 0b010u);
  EXPECT_EQ(plan.sends[1].token, 1);
  EXPECT_EQ(plan.sends[1].slot_mask, 0b111u);
  EXPECT_EQ(plan.sends[2].token, 0);
  EXPECT_EQ(plan.sends[2].slot_mask, 0b101u);
  EXPECT_EQ(plan.sends[3].token, 2);
  EXPECT_EQ(plan.sends[3].slot_mask, 0b111u);
}

// The receive side of the plan above, rank 1 alone: rows grouped by its experts 2 and 3 in
// (source, token, slot) order.
TEST(DispatchPlan, ReceiverGroupsRowsByLocalExpertInGlobalSlotOrder) {
  const ExpertSharding s = *ExpertSharding::create(4, 2);
  const std::vector<int32_t> ids = {3, 0, 2, 1, 0, 1, 2, 3, 2};
  const SymmetricLayout layout = *SymmetricLayout::create(3, 16, 3, 2);
  std::vector<std::vector<uint8_t>> memory(2, std::vector<uint8_t>(layout.total_bytes));
  std::vector<RankBuffer> buffers;
  for (auto& m : memory) buffers.emplace_back(m.data(), layout, Device::kCpu);
  const DispatchPlan plan = plan_dispatch(ids.data(), 3, 3, s);
  publish_plan(plan, ids.data(), 3, 3, buffers[0]);
  publish_plan(DispatchPlan{{0, 0, 0}, {}}, ids.data(), 0, 3, buffers[1]);  // rank 1: no tokens
  const ReceivePlan recv = plan_receive(1, s, 3, buffers);
  EXPECT_EQ(recv.src_offsets, (std::vector<int32_t>{0, 2, 2}));
  EXPECT_EQ(recv.recv_token, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(recv.group_offsets, (std::vector<int32_t>{0, 3, 5}));  // expert 2: 3 rows, 3: 2
  EXPECT_EQ(recv.row_slot, (std::vector<int32_t>{2, 6, 8, 0, 7}));
  EXPECT_EQ(recv.row_recv, (std::vector<int32_t>{0, 1, 1, 0, 1}));
  EXPECT_EQ(recv.row_home, (std::vector<int32_t>{0, 0, 0, 0, 0}));
}

// Runs `body(rank)` on one thread per rank and returns each rank's Status.
template <typename Body>
std::vector<Status> on_threads(int n_ranks, Body body) {
  std::vector<Status> status(n_ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < n_ranks; ++r) threads.emplace_back([&, r] { status[r] = body(r); });
  for (std::thread& t : threads) t.join();
  return status;
}

// Three ranks of four tokens each. The watchdog's timeout must outlast a healthy rank's work
// between two barriers on a loaded CI machine (milliseconds here), yet keep the dead-peer tests
// short.
struct Fixture {
  explicit Fixture(std::chrono::milliseconds timeout)
      : group(HostRankGroup::create(*SymmetricLayout::create(4, 64, 4, 3), timeout).value()) {}

  testing::SeededRng rng;
  MoeLayer layer{rng, LayerShape{}, 12, Routing::kScore};
  ExpertSharding sharding = *ExpertSharding::create(16, 3);
  std::unique_ptr<HostRankGroup> group;
  Tensor y = Tensor::host(DType::kF32, {12, 64});

  Status forward(int rank) {
    const EpMoeIo io{layer.x(4 * rank, 4 * rank + 4), layer.token_ids(4 * rank, 4 * rank + 4),
                     y.view().rows(4 * rank, 4 * rank + 4)};
    return ep_moe_forward(*group, rank, sharding, layer.weights(), layer.config(), io);
  }
};

void expect_watchdog_error(const Status& s, const std::string& phase, const std::string& missing) {
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.to_string();
  EXPECT_NE(s.message().find("ep watchdog"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("phase " + phase), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank(s) " + missing + " that never arrived"), std::string::npos)
      << s.message();
}

TEST(EpWatchdog, DeadPeerBeforeTheFirstPhaseTimesOutNamingIt) {
  Fixture f(1s);
  const std::vector<Status> status =
      on_threads(3, [&](int r) { return r == 2 ? ok_status() : f.forward(r); });
  expect_watchdog_error(status[0], "input-scale", "2");
  expect_watchdog_error(status[1], "input-scale", "2");
}

TEST(EpWatchdog, PeerDyingMidCallTimesOutAtTheNextPhase) {
  Fixture f(1s);
  const std::vector<Status> status = on_threads(3, [&](int r) {
    if (r != 1) return f.forward(r);
    // Rank 1 publishes its amax, passes the first barrier, then dies.
    f.group->buffers()[1].scales()[kInputAmax] = 1.0f;
    return f.group->barrier(1, EpPhase::kInputScale);
  });
  EXPECT_TRUE(status[1].ok()) << status[1].to_string();
  expect_watchdog_error(status[0], "dispatch", "1");
  expect_watchdog_error(status[2], "dispatch", "1");
}

TEST(EpWatchdog, FailingPeerStopsTheOthersWithItsCause) {
  Fixture f(1s);
  const std::vector<Status> status = on_threads(3, [&](int r) {
    if (r != 0) return f.forward(r);
    const Status cause = resource_exhausted("rank 0 ran out of memory");
    f.group->abort(0, cause);
    return cause;
  });
  for (int r : {1, 2}) {
    EXPECT_EQ(status[r].code(), StatusCode::kResourceExhausted) << status[r].to_string();
    EXPECT_NE(status[r].message().find("peer rank 0 failed"), std::string::npos)
        << status[r].message();
  }
}

// What the EP MoE refuses: the W4A16 mode (it moves NVFP4 rows only) and more tokens than the
// symmetric buffers hold. One rank, so no peer is left waiting.
TEST(EpMoeErrors, RefusesW4A16AndTooManyTokens) {
  testing::SeededRng rng;
  const MoeLayer layer(rng, LayerShape{}, 5, Routing::kScore);
  const ExpertSharding sharding = *ExpertSharding::create(16, 1);
  Tensor y = Tensor::host(DType::kF32, {5, 64});
  const EpMoeIo io{layer.x(0, 5), layer.token_ids(0, 5), y.view()};
  auto group = HostRankGroup::create(*SymmetricLayout::create(4, 64, 4, 1), 1s).value();
  const Status too_many = ep_moe_forward(*group, 0, sharding, layer.weights(), layer.config(), io);
  EXPECT_EQ(too_many.code(), StatusCode::kInvalidArgument) << too_many.to_string();
  EXPECT_NE(too_many.message().find("5 tokens on this rank, the symmetric buffers hold 4"),
            std::string::npos)
      << too_many.message();
  MoeConfig w4a16 = layer.config();
  w4a16.mode = MoeMode::kW4A16;
  group = HostRankGroup::create(*SymmetricLayout::create(8, 64, 4, 1), 1s).value();
  const Status mode = ep_moe_forward(*group, 0, sharding, layer.weights(), w4a16, io);
  EXPECT_EQ(mode.code(), StatusCode::kUnimplemented) << mode.to_string();
}

// A second call on the same buffers (stale plans, scales and combine rows from the first)
// gives the same bits.
TEST(EpWatchdog, HealthyGroupRunsTwiceOnTheSameBuffers) {
  Fixture f(20s);
  std::vector<float> first;
  for (int call = 0; call < 2; ++call) {
    std::fill(f.y.data_as<float>(), f.y.data_as<float>() + f.y.numel(), -1.0f);
    const std::vector<Status> status = on_threads(3, [&](int r) { return f.forward(r); });
    for (const Status& s : status) ASSERT_TRUE(s.ok()) << s.to_string();
    const std::vector<float> y(f.y.data_as<float>(), f.y.data_as<float>() + f.y.numel());
    if (call == 0) first = y;
    ASSERT_EQ(std::memcmp(y.data(), first.data(), y.size() * sizeof(float)), 0);
  }
  EXPECT_EQ(std::memcmp(first.data(), f.layer.moe_ffn_out().data_as<float>(),
                        first.size() * sizeof(float)),
            0);
}

}  // namespace
}  // namespace dsv4::kernels::ep
