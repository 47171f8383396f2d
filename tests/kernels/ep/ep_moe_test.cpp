// The expert-parallel MoE on the CPU simulation (threads as ranks). The single-rank MoE is the
// same code on one rank holding every token; R ranks must reproduce it bit for bit, whatever
// the rank count, the routing and the split of tokens over ranks. The one-rank run itself is
// held against kernels::moe_ffn, the MoE block's contract.
#include "kernels/ep/ep_moe.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/ep/ep_fixture.h"
#include "kernels/ep/moe_pieces.h"
#include "testing/compare.h"
#include "testing/tolerance.h"

namespace dsv4::kernels::ep {
namespace {

using namespace std::chrono_literals;

// How a run spreads its tokens over ranks.
enum class Split {
  kEven,        // T/R each, the remainder on the last rank
  kEmptyRanks,  // only the even ranks > 0 hold tokens (the last rank when there is none)
};

std::vector<int64_t> token_offsets(int64_t n_tokens, int n_ranks, Split split) {
  std::vector<int> holders;
  for (int r = 0; r < n_ranks; ++r) {
    if (split == Split::kEven || (r > 0 && r % 2 == 0)) holders.push_back(r);
  }
  if (holders.empty()) holders.push_back(n_ranks - 1);
  std::vector<int64_t> counts(n_ranks, 0);
  for (int h : holders) counts[h] = n_tokens / static_cast<int64_t>(holders.size());
  counts[holders.back()] += n_tokens % static_cast<int64_t>(holders.size());
  std::vector<int64_t> offsets{0};
  for (int64_t c : counts) offsets.push_back(offsets.back() + c);
  return offsets;
}

// Every rank on its own thread: ep_moe_forward on its rows of `layer`. Returns y f32 [T, D]
// over all ranks' rows, poisoned with NaN before the run.
Tensor run_ranks(const MoeLayer& layer, int n_ranks, const std::vector<int64_t>& offsets) {
  const ExpertSharding sharding =
      ExpertSharding::create(layer.weights().w13.n_matrices(), n_ranks).value();
  int64_t max_tokens = 1;
  for (int r = 0; r < n_ranks; ++r) max_tokens = std::max(max_tokens, offsets[r + 1] - offsets[r]);
  const int64_t d = layer.weights().w13.n_cols();
  const SymmetricLayout layout =
      SymmetricLayout::create(max_tokens, d, layer.config().n_expert_used, n_ranks).value();
  std::unique_ptr<HostRankGroup> group = HostRankGroup::create(layout, 20s).value();
  Tensor y = Tensor::host(DType::kF32, {layer.n_tokens(), d});
  std::fill(y.data_as<float>(), y.data_as<float>() + y.numel(),
            std::numeric_limits<float>::quiet_NaN());
  std::vector<Status> status(n_ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < n_ranks; ++r) {
    threads.emplace_back([&, r] {
      const EpMoeIo io{layer.x(offsets[r], offsets[r + 1]),
                       layer.token_ids(offsets[r], offsets[r + 1]),
                       y.view().rows(offsets[r], offsets[r + 1])};
      status[r] = ep_moe_forward(*group, r, sharding, layer.weights(), layer.config(), io);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n_ranks; ++r) {
    EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r].to_string();
  }
  return y;
}

Tensor run_single_rank(const MoeLayer& layer) { return run_ranks(layer, 1, {0, layer.n_tokens()}); }

using Case = std::tuple<int, Routing, Split>;

class EpMoeTest : public ::testing::TestWithParam<Case> {};

TEST_P(EpMoeTest, BitwiseEqualToSingleRank) {
  const auto [n_ranks, routing, split] = GetParam();
  testing::SeededRng rng;
  const int64_t n_tokens = rng.uniform_int(n_ranks, 5 * n_ranks + 7);
  const MoeLayer layer(rng, LayerShape{}, n_tokens, routing);
  const std::vector<int64_t> offsets = token_offsets(n_tokens, n_ranks, split);
  const Tensor single = run_single_rank(layer);
  const Tensor ep = run_ranks(layer, n_ranks, offsets);
  const int64_t d = ep.shape()[1];
  for (int64_t i = 0; i < ep.numel(); ++i) {
    const float got = ep.data_as<float>()[i], want = single.data_as<float>()[i];
    ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
        << "token " << i / d << " dim " << i % d << ": " << n_ranks << " ranks " << got
        << ", one rank " << want;
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const auto [n_ranks, routing, split] = info.param;
  const char* routings[] = {"Score", "Skewed", "OneExpert"};
  return std::to_string(n_ranks) + "Ranks" + routings[static_cast<int>(routing)] +
         (split == Split::kEven ? "Even" : "EmptyRanks");
}

INSTANTIATE_TEST_SUITE_P(Ranks, EpMoeTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values(Routing::kScore, Routing::kSkewed,
                                                              Routing::kOneExpert),
                                            ::testing::Values(Split::kEven, Split::kEmptyRanks)),
                         case_name);

// One rank holding every token computes kernels::moe_ffn's bits: the same ops on the same rows
// (moe_pieces.h says why the calls' sizes do not matter).
TEST(EpMoeSingleRank, MatchesMoeFfn) {
  testing::SeededRng rng;
  for (Routing routing : {Routing::kScore, Routing::kSkewed}) {
    const MoeLayer layer(rng, LayerShape{}, 29, routing);
    const Tensor single = run_single_rank(layer);
    ASSERT_EQ(single.numel(), layer.moe_ffn_out().numel());
    EXPECT_EQ(std::memcmp(single.data_as<float>(), layer.moe_ffn_out().data_as<float>(),
                          single.numel() * sizeof(float)),
              0);
  }
}

// The routed experts matter to the result: with every routed output scaled to zero, nearly
// every output element changes.
TEST(EpMoeSingleRank, RoutedExpertsContribute) {
  testing::SeededRng rng;
  const MoeLayer layer(rng, LayerShape{}, 9, Routing::kScore);
  MoeWeightsView shared_only = layer.weights();
  Tensor zero_scales = Tensor::host(DType::kF32, {shared_only.w2.n_matrices()});
  std::fill(zero_scales.data_as<float>(), zero_scales.data_as<float>() + zero_scales.numel(), 0.0f);
  shared_only.w2.global_scale = zero_scales.view();
  Tensor y = Tensor::host(DType::kF32, {9, shared_only.w13.n_cols()});
  ASSERT_TRUE(moe_ffn(layer.x(0, 9), layer.token_ids(0, 9), shared_only, layer.config(),
                      TensorView{}, y.view())
                  .ok());
  const Tensor single = run_single_rank(layer);
  int64_t differs = 0;
  for (int64_t i = 0; i < y.numel(); ++i)
    differs += single.data_as<float>()[i] != y.data_as<float>()[i];
  EXPECT_GT(differs, y.numel() * 9 / 10);
}

// A rank's own copy of its experts, seen through shard_as_stack, reads as the whole stack at its
// experts' global ids: matrix g is the copy's g − first, and slicing the range back out gives
// the copy itself.
TEST(ShardAsStack, AddressesTheCopyByGlobalExpertIds) {
  testing::SeededRng rng;
  const MoeLayer layer(rng, LayerShape{}, 1, Routing::kScore);
  const format::Nvfp4View stack = layer.weights().w2;
  const int64_t first = 5, count = 4, n_experts = stack.n_matrices();
  std::vector<Tensor> parts;
  for (const TensorView& part : {stack.packed, stack.block_scale, stack.global_scale}) {
    const TensorView range = part.rows(first, first + count);
    parts.push_back(Tensor::host(range.dtype, range.shape));
    ASSERT_TRUE(copy_tensor(parts.back().view(), range).ok());
  }
  const format::Nvfp4View copy{parts[0].view(), parts[1].view(), parts[2].view(),
                               stack.scale_layout};
  const format::Nvfp4View as_stack = shard_as_stack(copy, first, n_experts);
  EXPECT_EQ(as_stack.n_matrices(), n_experts);
  EXPECT_EQ(as_stack.packed.rows(first, first + count), copy.packed);
  EXPECT_EQ(as_stack.block_scale.rows(first, first + count), copy.block_scale);
  EXPECT_EQ(as_stack.global_scale.rows(first, first + count), copy.global_scale);
  for (int64_t g = first; g < first + count; ++g) {
    const format::Nvfp4View read = as_stack.matrix(g), original = stack.matrix(g);
    EXPECT_NE(read.packed.data, original.packed.data);  // the copy, not the stack
    for (const auto& [a, b] : {std::pair{read.packed, original.packed},
                               std::pair{read.block_scale, original.block_scale},
                               std::pair{read.global_scale, original.global_scale}}) {
      EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes()), 0) << "expert " << g;
    }
  }
}

}  // namespace
}  // namespace dsv4::kernels::ep
