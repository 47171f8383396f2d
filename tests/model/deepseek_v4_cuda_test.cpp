// The whole forward on the GPU (label cuda): each oracle folder's weights moved to the device
// with checkpoint::copy_weights, then the same checks as deepseek_v4_test.cpp's first test
// against transformers: full-sequence logits of every prompt within kGoldenLogitsRelTol per row,
// and the greedy continuation decoded with the (device) cache, token for token; a long chunk
// beside short ones in one forward (mixed_batch.h). Then a checkpoint
// whose NVFP4 expert widths the CUDA MoE pipeline does not run, which must be refused.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "base/device.h"
#include "checkpoint/loader.h"
#include "checkpoint/to_device.h"
#include "model/deepseek_v4.h"
#include "model/golden.h"
#include "model/mixed_batch.h"
#include "model/nvfp4_golden.h"
#include "runtime/expert_parallel.h"
#include "runtime/expert_shards.h"
#include "testing/compare.h"
#include "testing/device.h"
#include "testing/temp_dir.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

using testing::golden_tensor;
using testing::kGoldenLogitsRelTol;
using testing::max_row_rel_error;

std::vector<int64_t> ids_of(const Tensor& t) {
  return std::vector<int64_t>(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel());
}

int64_t argmax(const float* row, int64_t n) { return std::max_element(row, row + n) - row; }

class GoldenModelCudaTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenModelCudaTest, LogitsAndCachedGreedyMatchTransformers) {
  auto loaded = checkpoint::load_model(testing::golden_path(GetParam() + "/model"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto weights = checkpoint::copy_weights(loaded->weights, Device::kCuda);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  const format::SafetensorsFile reference =
      testing::open_golden(GetParam() + "/reference.safetensors");
  const Model model(*weights, ModelOptions{});
  ASSERT_EQ(model.device(), Device::kCuda);
  const int64_t v = model.config().vocab_size;
  ASSERT_NE(reference.find("prompt_0"), nullptr);
  for (int p = 0; reference.find("prompt_" + std::to_string(p)) != nullptr; ++p) {
    SCOPED_TRACE("prompt " + std::to_string(p));
    const std::string i = std::to_string(p);
    const std::vector<int64_t> prompt = ids_of(golden_tensor(reference, "prompt_" + i));
    const std::vector<int64_t> greedy = ids_of(golden_tensor(reference, "greedy_" + i));
    const Tensor want_logits = golden_tensor(reference, "logits_" + i);
    const Tensor want_greedy_logits = golden_tensor(reference, "greedy_logits_" + i);
    const auto n = static_cast<int64_t>(prompt.size()), n_gen = static_cast<int64_t>(greedy.size());

    auto cache = model.new_cache(n + n_gen);
    ASSERT_TRUE(cache.ok()) << cache.status().to_string();
    const Tensor logits = testing::poisoned_device(DType::kF32, {n, v});
    const Status prefill = model.forward(prompt, 0, *cache, logits.view());
    ASSERT_TRUE(prefill.ok()) << prefill.to_string();
    const Tensor got = testing::to_host(logits.view());
    EXPECT_LT(max_row_rel_error(got.data_as<float>(), want_logits.data_as<float>(), n, v),
              kGoldenLogitsRelTol);

    Tensor step_logits = Tensor::host(DType::kF32, {n_gen, v});
    std::copy_n(got.data_as<float>() + (n - 1) * v, v, step_logits.data_as<float>());
    const Tensor row = testing::poisoned_device(DType::kF32, {1, v});
    for (int64_t s = 0; s + 1 < n_gen; ++s) {
      const Status step = model.forward({&greedy[s], 1}, n + s, *cache, row.view());
      ASSERT_TRUE(step.ok()) << step.to_string();
      ASSERT_TRUE(copy_tensor(step_logits.view().rows(s + 1, s + 2), row.view()).ok());
    }
    for (int64_t s = 0; s < n_gen; ++s) {
      EXPECT_EQ(argmax(step_logits.data_as<float>() + s * v, v), greedy[s]) << "step " << s;
    }
    EXPECT_LT(max_row_rel_error(step_logits.data_as<float>(), want_greedy_logits.data_as<float>(),
                                n_gen, v),
              kGoldenLogitsRelTol);
  }
}

TEST_P(GoldenModelCudaTest, LongChunkBesideShortOnesMatchesTransformers) {
  auto loaded = checkpoint::load_model(testing::golden_path(GetParam() + "/model"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto weights = checkpoint::copy_weights(loaded->weights, Device::kCuda);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  const Model model(*weights, ModelOptions{});
  ASSERT_EQ(model.device(), Device::kCuda);
  expect_mixed_batch_matches_transformers(
      model, testing::open_golden(GetParam() + "/reference.safetensors"));
}

// The fast profile's attention ops in the whole forward (ModelOptions::numerics = kFast: bf16
// tensor-core sparse attention and FP8 indexer scores; nothing else reads the profile yet):
// every golden prompt's logits move off the exact profile's (the fast ops ran). Where every
// compressed entry is a pick (at most index_topk entries), only the attention's rounding moves
// them, by less than kFastAttentionLogitsRelTol a row; a longer prompt's FP8 scores may also
// pick other entries, which moves a random-weight model's logits arbitrarily: printed only.
TEST(FastNumericsCudaTest, AttentionOpsMoveLogitsWithinTheirBound) {
  auto loaded = checkpoint::load_model(testing::golden_path("tiny_a_pretrained/model"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto weights = checkpoint::copy_weights(loaded->weights, Device::kCuda);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  const format::SafetensorsFile reference =
      testing::open_golden("tiny_a_pretrained/reference.safetensors");
  const Model exact(*weights, ModelOptions{});
  const Model fast(*weights, ModelOptions{.numerics = Numerics::kFast});
  const checkpoint::ModelConfig& config = exact.config();
  const int64_t v = config.vocab_size;
  constexpr int64_t kCsaRatio = 4;
  for (int p = 0; reference.find("prompt_" + std::to_string(p)) != nullptr; ++p) {
    const std::vector<int64_t> prompt =
        ids_of(golden_tensor(reference, "prompt_" + std::to_string(p)));
    const auto n = static_cast<int64_t>(prompt.size());
    std::vector<Tensor> logits;
    for (const Model* model : {&exact, &fast}) {
      auto cache = model->new_cache(n);
      ASSERT_TRUE(cache.ok()) << cache.status().to_string();
      const Tensor out = testing::poisoned_device(DType::kF32, {n, v});
      ASSERT_TRUE(model->forward(prompt, 0, *cache, out.view()).ok());
      logits.push_back(testing::to_host(out.view()));
    }
    const double error =
        max_row_rel_error(logits[1].data_as<float>(), logits[0].data_as<float>(), n, v);
    const bool picks_every_entry = n / kCsaRatio <= config.index_topk;
    std::printf("tiny_a prompt %d (%lld tokens%s): worst logits row %.3g from the exact profile\n",
                p, (long long)n, picks_every_entry ? "" : ", the indexer selects", error);
    EXPECT_GT(error, 0.0) << "prompt " << p << ": the fast profile computed the exact bits";
    if (picks_every_entry) {
      EXPECT_LT(error, testing::kFastAttentionLogitsRelTol) << "prompt " << p;
    }
  }
}

// tiny_b with NVFP4 experts (quantized as deepseek_v4_nvfp4_test.cpp does): its expert widths
// (D = 64, F = 48) are below what the CUDA MoE pipeline runs (multiples of 128, as in every
// DeepSeek-V4 checkpoint), so the forward must say so instead of computing anything else. The
// NVFP4 model MoE on CUDA is checked against the CPU at supported widths in moe_cuda_test.cpp.
TEST(ModelNvfp4CudaTest, RefusesExpertWidthsTheCudaPipelineCannotRun) {
  testing::TempDir dir;
  const std::string model_dir = testing::quantized_tiny_b(dir);
  ASSERT_FALSE(HasFailure());
  auto loaded = checkpoint::load_model(model_dir);
  ASSERT_TRUE(loaded.ok() && loaded->weights.layers[0].ffn.experts.is_nvfp4());
  auto device_weights = checkpoint::copy_weights(loaded->weights, Device::kCuda);
  ASSERT_TRUE(device_weights.ok()) << device_weights.status().to_string();
  const auto reference = testing::open_golden("tiny_b_state_dict/reference.safetensors");
  const std::vector<int64_t> ids = ids_of(golden_tensor(reference, "prompt_2"));
  for (const ExpertMode mode : {ExpertMode::kW4A16, ExpertMode::kW4A4}) {
    const Model model(*device_weights, ModelOptions{mode});
    auto cache = model.new_cache(static_cast<int64_t>(ids.size()));
    ASSERT_TRUE(cache.ok());
    const Tensor logits = testing::poisoned_device(
        DType::kF32, {static_cast<int64_t>(ids.size()), model.config().vocab_size});
    const Status status = model.forward(ids, 0, *cache, logits.view());
    EXPECT_EQ(status.code(), StatusCode::kUnimplemented) << status.to_string();
    EXPECT_NE(status.message().find("multiples of 128"), std::string::npos) << status.message();
  }
}

INSTANTIATE_TEST_SUITE_P(Oracle, GoldenModelCudaTest,
                         ::testing::Values("tiny_a_pretrained", "tiny_a_state_dict",
                                           "tiny_b_state_dict", "tiny_c_pretrained",
                                           "tiny_d_state_dict", "tiny_e_pretrained"));

// copy_weights keeps a bf16 checkpoint's linear weights in bf16 on the GPU (every value is one;
// the forward above ran on them), the rest in f32; a linear weight with a value bf16 cannot hold
// stays f32, since bf16 would change it.
TEST(CopyWeightsCudaTest, LinearWeightsInBf16ExactlyWhereTheyAre) {
  auto loaded = checkpoint::load_model(testing::golden_path("tiny_d_state_dict/model"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto host = checkpoint::copy_weights(loaded->weights, Device::kCpu);
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  host->layers[0].attn.wo_b.data_as<float>()[5] = 1.0f + 0x1p-12f;  // not a bf16
  auto device = checkpoint::copy_weights(*host, Device::kCuda);
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  const checkpoint::ModelWeights& on_device = *device;
  const checkpoint::LayerWeights& layer = on_device.layers[0];
  for (const Tensor* w : std::initializer_list<const Tensor*>{
           &layer.attn.wq_a, &layer.attn.wq_b, &layer.attn.wkv, &layer.attn.wo_a, &layer.hc_attn.fn,
           &on_device.head, &on_device.layers[1].attn.wo_b}) {
    EXPECT_EQ(w->dtype(), DType::kBF16);
  }
  EXPECT_EQ(layer.attn.wo_b.dtype(), DType::kF32);
  for (const Tensor* w :
       {&layer.attn_norm, &layer.attn.q_norm, &layer.ffn.gate, &on_device.embed}) {
    EXPECT_EQ(w->dtype(), DType::kF32);
  }
  const Tensor back = testing::to_host(layer.attn.wo_b.view());
  EXPECT_EQ(back.data_as<float>()[5], 1.0f + 0x1p-12f);
}

// Expert offload on load_model_on: the last layers' NVFP4 codes and block scales land in mapped
// pinned host memory with the bytes the host load has, the per-matrix scales on the device, and
// the report says which layers (the kernels' reads of such stacks: moe_ffn_cuda_test.cpp's
// kRoutedInHostMemory cases, since tiny_b's expert widths are below what the CUDA MoE runs).
TEST(ExpertOffloadCudaTest, LastLayersStacksAreInHostMemoryWithTheLoadedBytes) {
  testing::TempDir dir;
  const std::string model_dir = testing::quantized_tiny_b(dir);
  ASSERT_FALSE(HasFailure());
  auto host = checkpoint::load_model(model_dir);
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  const size_t n_layers = host->weights.layers.size();
  auto placed = checkpoint::load_model_on(model_dir, Device::kCuda, {.expert_offload_layers = 1});
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  ASSERT_FALSE(placed->report.notes.empty());
  EXPECT_NE(placed->report.notes.back().find("of 1 layers (" + std::to_string(n_layers - 1) + ";"),
            std::string::npos)
      << placed->report.notes.back();
  const auto memory_type = [](const Tensor& t) {
    cudaPointerAttributes attributes{};
    EXPECT_EQ(cudaPointerGetAttributes(&attributes, t.view().data), cudaSuccess);
    return attributes.type;
  };
  for (size_t l = 0; l < n_layers; ++l) {
    const auto& want = host->weights.layers[l].ffn.experts;
    const auto& got = placed->weights.layers[l].ffn.experts;
    ASSERT_TRUE(want.is_nvfp4() && got.is_nvfp4());
    const cudaMemoryType bulk = l + 1 == n_layers ? cudaMemoryTypeHost : cudaMemoryTypeDevice;
    EXPECT_EQ(got.in_host_memory, l + 1 == n_layers) << "layer " << l;
    for (auto [w, g] :
         {std::pair{&*want.w13_nvfp4, &*got.w13_nvfp4}, {&*want.w2_nvfp4, &*got.w2_nvfp4}}) {
      EXPECT_EQ(memory_type(g->packed), bulk) << "layer " << l;
      EXPECT_EQ(memory_type(g->block_scale), bulk) << "layer " << l;
      EXPECT_EQ(memory_type(g->global_scale), cudaMemoryTypeDevice) << "layer " << l;
      for (auto [a, b] : {std::pair{&w->packed, &g->packed},
                          {&w->block_scale, &g->block_scale},
                          {&w->global_scale, &g->global_scale}}) {
        EXPECT_TRUE(testing::same_bytes(testing::to_host(b->view()).view(), a->view()))
            << "layer " << l;
      }
    }
  }
}

// DevicePlacement::take_main_experts, what --gpus N loads with: each main layer's codes and
// block scales handed over in mapped host memory with the bytes the host load has, the
// per-matrix scales on the device, in layer order; here taken by two ranks on this GPU
// (runtime::ExpertShards::take_layer, rank 0 owning one expert, as runtime::device_placement
// hands them under --gpus N), whose copies must then hold each rank's range of the host load's
// stacks while the loaded model's main stacks are freed. The MTP blocks' experts stay on the
// device and are never handed over.
TEST(ExpertOffloadCudaTest, EveryLayersExpertsGoToTheRanksAsEachLayerLoads) {
  testing::TempDir dir;
  const std::string model_dir = testing::quantized_tiny_b(dir);
  ASSERT_FALSE(HasFailure());
  auto host = checkpoint::load_model(model_dir);
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  const auto memory_type = [](const Tensor& t) {
    cudaPointerAttributes attributes{};
    EXPECT_EQ(cudaPointerGetAttributes(&attributes, t.view().data), cudaSuccess);
    return attributes.type;
  };
  const checkpoint::ModelConfig& config = host->weights.config;
  const Result<kernels::ep::ExpertSharding> sharding =
      runtime::rank_sharding(config.n_routed_experts, 2, 1);
  ASSERT_TRUE(sharding.ok()) << sharding.status().to_string();
  runtime::ExpertShards ranks =
      runtime::ExpertShards::for_ranks(*sharding, {current_device(), current_device()});
  std::vector<int64_t> handed;
  checkpoint::DevicePlacement placement;
  placement.take_main_experts = [&](int64_t layer, checkpoint::RoutedExpertWeights& got) {
    handed.push_back(layer);
    const auto& want = host->weights.layers[static_cast<size_t>(layer)].ffn.experts;
    EXPECT_TRUE(got.in_host_memory) << "layer " << layer;
    for (auto [w, g] :
         {std::pair{&*want.w13_nvfp4, &*got.w13_nvfp4}, {&*want.w2_nvfp4, &*got.w2_nvfp4}}) {
      EXPECT_EQ(memory_type(g->packed), cudaMemoryTypeHost) << "layer " << layer;
      EXPECT_EQ(memory_type(g->block_scale), cudaMemoryTypeHost) << "layer " << layer;
      EXPECT_EQ(memory_type(g->global_scale), cudaMemoryTypeDevice) << "layer " << layer;
      for (auto [a, b] : {std::pair{&w->packed, &g->packed}, {&w->block_scale, &g->block_scale}}) {
        EXPECT_TRUE(testing::same_bytes(b->view(), a->view())) << "layer " << layer;
      }
    }
    return ranks.take_layer(layer, got);
  };
  auto placed = checkpoint::load_model_on(model_dir, Device::kCuda, placement);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  std::vector<int64_t> every_layer(placed->weights.layers.size());
  for (size_t l = 0; l < every_layer.size(); ++l) every_layer[l] = static_cast<int64_t>(l);
  EXPECT_EQ(handed, every_layer);
  for (size_t l = 0; l < placed->weights.layers.size(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const auto& got = placed->weights.layers[l].ffn.experts;
    const auto& want = host->weights.layers[l].ffn.experts;
    ASSERT_TRUE(got.is_nvfp4());
    EXPECT_FALSE(got.in_host_memory);
    EXPECT_TRUE(got.w13_nvfp4->packed.empty_tensor());
    EXPECT_TRUE(got.w2_nvfp4->block_scale.empty_tensor());
    EXPECT_EQ(memory_type(got.w2_nvfp4->global_scale), cudaMemoryTypeDevice);
    // Each rank's copy, on the GPU, holds its range of the host load's stacks.
    model::RoutedExpertsCall call;
    call.layer = static_cast<int64_t>(l);
    call.experts = &want;
    call.weights.w13 = want.w13_nvfp4->view();
    call.weights.w2 = want.w2_nvfp4->view();
    for (int r = 0; r < 2; ++r) {
      const int64_t first = sharding->first_expert(r), end = first + sharding->n_local_experts(r);
      const Result<kernels::MoeWeightsView> view = ranks.rank_view(call, r);
      ASSERT_TRUE(view.ok()) << view.status().to_string();
      for (auto [g, w] : {std::pair{view->w13.packed, call.weights.w13.packed},
                          {view->w13.block_scale, call.weights.w13.block_scale},
                          {view->w2.packed, call.weights.w2.packed},
                          {view->w2.block_scale, call.weights.w2.block_scale}}) {
        EXPECT_TRUE(testing::same_bytes(testing::to_host(g.rows(first, end)).view(),
                                        w.rows(first, end)))
            << "rank " << r;
      }
    }
  }
  // The MTP blocks' experts, which no rank shards, stay on the device (rank 0's).
  for (size_t m = 0; m < placed->weights.mtp.size(); ++m) {
    const auto& got = placed->weights.mtp[m].block.ffn.experts;
    if (!got.is_nvfp4()) continue;
    EXPECT_FALSE(got.in_host_memory) << "MTP block " << m;
    EXPECT_EQ(memory_type(got.w13_nvfp4->packed), cudaMemoryTypeDevice) << "MTP block " << m;
    EXPECT_EQ(memory_type(got.w2_nvfp4->block_scale), cudaMemoryTypeDevice) << "MTP block " << m;
  }
}

}  // namespace
}  // namespace dsv4::model
