// kernels::run_beside on the GPU (label cuda): two chains of ops on two streams give the bits
// the same ops give one after another on one stream, eagerly and replayed from a CUDA graph, on
// fresh random inputs each time; every op after the call sees both chains' outputs; a failing
// chain leaves the thread's stream (and a capture) usable. The chains are the MoE layer's two
// halves in miniature: a SwiGLU MLP beside a linear and a softmax, each allocating its own
// scratch as the model's ops do.
//
// Dimension letters: T tokens, K input features, F hidden width, N outputs.
#include <gtest/gtest.h>

#include <functional>

#include "base/buffer.h"
#include "base/device_graph.h"
#include "kernels/ops.h"
#include "testing/compare.h"
#include "testing/device.h"
#include "testing/random.h"

namespace dsv4::kernels {
namespace {

using testing::poisoned_device;
using testing::same_bytes;
using testing::to_device;
using testing::to_host;

// Wide enough that each chain is many blocks and several microseconds: a missing fork or join
// lets one chain read what the other has not finished.
constexpr int64_t kTokens = 2, kIn = 4096, kHidden = 2048, kOut = 1024;

Tensor random_host(testing::SeededRng& rng, Shape shape) {
  Tensor t = Tensor::host(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data_as<float>()[i] = static_cast<float>(rng.uniform(-1.0, 1.0));
  }
  return t;
}

Tensor device_scratch(Shape shape) {
  Result<Tensor> t = Tensor::empty(DType::kF32, shape, Device::kCuda);
  DSV4_CHECK(t.ok(), "scratch: %s", t.status().to_string().c_str());
  return std::move(t).value();
}

struct Layer {
  Tensor x;     // [T, K]
  Tensor w13;   // [2F, K]
  Tensor w2;    // [N, F]
  Tensor wr;    // [N, K]
  Tensor mlp;   // [T, N] the side chain's output
  Tensor head;  // [T, N] the main chain's output
  Tensor sum;   // [T, N] mlp + head, after the call
};

Layer make_layer(testing::SeededRng& rng) {
  return Layer{to_device(random_host(rng, {kTokens, kIn}).view()),
               to_device(random_host(rng, {2 * kHidden, kIn}).view()),
               to_device(random_host(rng, {kOut, kHidden}).view()),
               to_device(random_host(rng, {kOut, kIn}).view()),
               poisoned_device(DType::kF32, {kTokens, kOut}),
               poisoned_device(DType::kF32, {kTokens, kOut}),
               poisoned_device(DType::kF32, {kTokens, kOut})};
}

// mlp = w2 · swiglu(w13 · x), its scratch allocated and released inside.
Status mlp_chain(const Layer& l) {
  Tensor gate_up = device_scratch({kTokens, 2 * kHidden});
  Tensor hidden = device_scratch({kTokens, kHidden});
  DSV4_RETURN_IF_ERROR(linear(l.x.view(), l.w13.view(), gate_up.view()));
  DSV4_RETURN_IF_ERROR(swiglu(gate_up.view(), 10.0f, hidden.view()));
  return linear(hidden.view(), l.w2.view(), l.mlp.view());
}

// head = softmax(wr · x), through a scratch of its own.
Status head_chain(const Layer& l) {
  Tensor logits = device_scratch({kTokens, kOut});
  DSV4_RETURN_IF_ERROR(linear(l.x.view(), l.wr.view(), logits.view()));
  return softmax(logits.view(), l.head.view());
}

Status beside(const Layer& l) {
  DSV4_RETURN_IF_ERROR(run_beside(
      Device::kCuda, [&] { return mlp_chain(l); }, [&] { return head_chain(l); }));
  return add(l.mlp.view(), l.head.view(), l.sum.view());
}

Status in_order(const Layer& l) {
  DSV4_RETURN_IF_ERROR(mlp_chain(l));
  DSV4_RETURN_IF_ERROR(head_chain(l));
  return add(l.mlp.view(), l.head.view(), l.sum.view());
}

struct Outputs {
  Tensor mlp, head, sum;
};

Outputs read(const Layer& l) {
  return {to_host(l.mlp.view()), to_host(l.head.view()), to_host(l.sum.view())};
}

void expect_same(const Outputs& got, const Outputs& want) {
  EXPECT_TRUE(same_bytes(got.mlp.view(), want.mlp.view()));
  EXPECT_TRUE(same_bytes(got.head.view(), want.head.view()));
  EXPECT_TRUE(same_bytes(got.sum.view(), want.sum.view()));
}

// Poisons the outputs, so a chain that did not run (or ran late) shows as NaN.
void poison(const Layer& l) {
  for (const Tensor* t : {&l.mlp, &l.head, &l.sum}) {
    const Tensor p = testing::poisoned_host(DType::kF32, t->shape());
    ASSERT_TRUE(copy_tensor(t->view(), p.view()).ok());
  }
}

// On a fresh x: the outputs of `run` (the chains beside each other, eager or replayed) against
// those of the same ops in order.
void expect_bits_of_in_order(testing::SeededRng& rng, const Layer& l,
                             const std::function<Status()>& run) {
  ASSERT_TRUE(copy_tensor(l.x.view(), random_host(rng, {kTokens, kIn}).view()).ok());
  ASSERT_TRUE(in_order(l).ok());
  const Outputs want = read(l);
  poison(l);
  const Status status = run();
  ASSERT_TRUE(status.ok()) << status.to_string();
  expect_same(read(l), want);
}

TEST(RunBesideCuda, EagerChainsKeepTheirBits) {
  testing::SeededRng rng;
  const Layer l = make_layer(rng);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    expect_bits_of_in_order(rng, l, [&] { return beside(l); });
  }
}

TEST(RunBesideCuda, ReplayedChainsKeepTheirBits) {
  testing::SeededRng rng;
  const Layer l = make_layer(rng);
  Result<DeviceGraph> graph = DeviceGraph::capture([&] { return beside(l); });
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    expect_bits_of_in_order(rng, l, [&] { return graph->launch(); });
  }
}

TEST(RunBesideCuda, AFailingSideSkipsMainAndJoins) {
  testing::SeededRng rng;
  const Layer l = make_layer(rng);
  bool main_ran = false;
  const auto fail = [&] {
    DSV4_RETURN_IF_ERROR(mlp_chain(l));
    return invalid_argument("side chain refused");
  };
  const auto main_chain = [&] {
    main_ran = true;
    return head_chain(l);
  };
  const Status eager = run_beside(Device::kCuda, fail, main_chain);
  EXPECT_EQ(eager.message(), "side chain refused");
  EXPECT_FALSE(main_ran);
  // A capture whose side chain fails ends with that failure, not an unjoined stream, and the
  // next capture on the thread works.
  const Result<DeviceGraph> failed =
      DeviceGraph::capture([&] { return run_beside(Device::kCuda, fail, main_chain); });
  EXPECT_EQ(failed.status().message(), "side chain refused");
  Result<DeviceGraph> graph = DeviceGraph::capture([&] { return beside(l); });
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  expect_bits_of_in_order(rng, l, [&] { return graph->launch(); });
}

// A side chain that breaks a capture (a copy to the host synchronises its stream) after
// releasing scratch: the capture fails with it, and the eager call after it frees none of that
// capture's memory and gives the in-order bits.
TEST(RunBesideCuda, ASideThatBreaksACaptureLeavesTheNextCallUsable) {
  testing::SeededRng rng;
  const Layer l = make_layer(rng);
  const auto breaks = [&] {
    DSV4_RETURN_IF_ERROR(mlp_chain(l));
    const Tensor host = Tensor::host(DType::kF32, l.mlp.shape());
    return copy_tensor(host.view(), l.mlp.view());
  };
  const Result<DeviceGraph> failed = DeviceGraph::capture(
      [&] { return run_beside(Device::kCuda, breaks, [&] { return head_chain(l); }); });
  EXPECT_FALSE(failed.ok());
  expect_bits_of_in_order(rng, l, [&] { return beside(l); });
}

}  // namespace
}  // namespace dsv4::kernels
