// checkpoint::copy_weights and load_model_on, checked through the model: a copy (here to the
// host, so it runs in CI; the CUDA copy is exercised by tests/model/deepseek_v4_cuda_test.cpp)
// must drive the forward to bit-identical logits, with no tensor shared with the original; so
// must a model loaded layer by layer onto the device. A weight the copy
// missed would be empty and stop the forward, one copied wrongly would change the logits. Two
// checkpoints cover every optional member: tiny_d (dense experts, CSA with an indexer, HCA) and
// tiny_b quantized to NVFP4 experts with input scales (W4A4 reads them).
#include "checkpoint/to_device.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "model/deepseek_v4.h"
#include "model/golden.h"
#include "model/nvfp4_golden.h"
#include "testing/device.h"
#include "testing/temp_dir.h"

namespace dsv4::checkpoint {
namespace {

void expect_same_logits(const ModelWeights& original, const ModelWeights& copy,
                        model::ExpertMode mode, const std::string& reference) {
  const Tensor prompt = testing::golden_tensor(testing::open_golden(reference), "prompt_0");
  const std::vector<int64_t> ids(prompt.data_as<int64_t>(),
                                 prompt.data_as<int64_t>() + prompt.numel());
  const Tensor want = testing::host_prompt_logits(original, mode, ids);
  const Tensor got = testing::host_prompt_logits(copy, mode, ids);
  EXPECT_TRUE(testing::same_bytes(got.view(), want.view()));
}

void expect_copy_computes_the_same(const ModelWeights& original, model::ExpertMode mode,
                                   const std::string& reference) {
  auto copy = copy_weights(original, Device::kCpu);
  ASSERT_TRUE(copy.ok()) << copy.status().to_string();
  EXPECT_NE(copy->embed.view().data, original.embed.view().data);
  EXPECT_NE(copy->layers.back().ffn.gate.view().data, original.layers.back().ffn.gate.view().data);
  expect_same_logits(original, *copy, mode, reference);
}

// load_model_on against load_model: the same logits, so every layer (and the globals) arrived.
void expect_loaded_on_computes_the_same(const std::string& model_dir, model::ExpertMode mode,
                                        const std::string& reference) {
  auto loaded = load_model(model_dir);
  auto placed = load_model_on(model_dir, Device::kCpu);
  ASSERT_TRUE(loaded.ok() && placed.ok());
  EXPECT_TRUE(placed->report.clean());
  expect_same_logits(loaded->weights, placed->weights, mode, reference);
}

TEST(CopyWeightsTest, DenseCopyComputesTheSameLogits) {
  auto loaded = load_model(testing::golden_path("tiny_d_state_dict/model"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  ASSERT_TRUE(loaded->weights.layers[0].attn.compressor.has_value() ||
              loaded->weights.layers.back().attn.compressor.has_value());
  expect_copy_computes_the_same(loaded->weights, model::ExpertMode::kW4A16,
                                "tiny_d_state_dict/reference.safetensors");
}

TEST(CopyWeightsTest, Nvfp4CopyComputesTheSameLogits) {
  testing::TempDir dir;
  const std::string model_dir = testing::quantized_tiny_b(dir);
  ASSERT_FALSE(HasFailure());
  auto loaded = load_model(model_dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  ASSERT_TRUE(loaded->weights.layers[0].ffn.experts.is_nvfp4());
  ASSERT_FALSE(loaded->weights.layers[0].ffn.experts.w13_nvfp4->input_scale.empty_tensor());
  expect_copy_computes_the_same(loaded->weights, model::ExpertMode::kW4A4,
                                "tiny_b_state_dict/reference.safetensors");
}

TEST(LoadModelOnTest, LayerByLayerComputesTheSameLogits) {
  expect_loaded_on_computes_the_same(testing::golden_path("tiny_d_state_dict/model"),
                                     model::ExpertMode::kW4A16,
                                     "tiny_d_state_dict/reference.safetensors");
  testing::TempDir dir;
  const std::string model_dir = testing::quantized_tiny_b(dir);
  ASSERT_FALSE(HasFailure());
  // W4A4 reads the static input scales, which the loader sets layer by layer.
  expect_loaded_on_computes_the_same(model_dir, model::ExpertMode::kW4A4,
                                     "tiny_b_state_dict/reference.safetensors");
}

// The caller's before_decode sees the plan of the checkpoint as bound, before a tensor is
// decoded, and its error stops the load (the engine's check of every expert-parallel rank).
TEST(LoadModelOnTest, RunsTheCallersCheckBeforeDecoding) {
  const std::string model_dir = testing::golden_path("tiny_d_state_dict/model");
  const Result<LoadPlan> bound = plan_model(model_dir);
  ASSERT_TRUE(bound.ok()) << bound.status().to_string();
  LoadOptions options;
  int64_t seen = -1;
  size_t n_decoded = 0;
  options.progress = [&n_decoded](size_t, size_t) { ++n_decoded; };
  options.before_decode = [&seen](const LoadPlan& plan) {
    seen = plan.min_device_bytes();
    return resource_exhausted("rank 1 does not fit");
  };
  const Result<LoadedModel> placed = load_model_on(model_dir, Device::kCpu, {}, options);
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().message(), "rank 1 does not fit");
  EXPECT_EQ(seen, bound->min_device_bytes());
  EXPECT_EQ(n_decoded, 0u);
}

// The loader's progress as the test sees it: tensors decoded so far, of how many.
struct LoadProgress {
  size_t decoded = 0, total = 0;
  LoadOptions options() {
    LoadOptions made;
    made.progress = [this](size_t done, size_t all) {
      decoded = done;
      total = all;
    };
    return made;
  }
};

// DevicePlacement::take_main_experts (what --gpus N loads with, runtime/placement.h): each main
// layer's NVFP4 experts are handed over once, in layer order, as soon as that layer is placed
// and before the next one's tensors are decoded, so a caller that frees them (as the ranks do
// once they have their copies) leaves the host one layer's experts at a time; the MTP block's
// are never handed over and stay with the model. On the host the loader's CPU path runs it.
TEST(LoadModelOnTest, HandsEachMainLayersExpertsOverBeforeTheNextIsDecoded) {
  const std::string model_dir = testing::golden_path("brown_small/model");
  LoadProgress progress;
  std::vector<int64_t> handed;
  std::vector<size_t> decoded_when_handed;
  DevicePlacement placement;
  placement.take_main_experts = [&](int64_t layer, RoutedExpertWeights& experts) {
    handed.push_back(layer);
    decoded_when_handed.push_back(progress.decoded);
    EXPECT_TRUE(experts.is_nvfp4() && !experts.w13_nvfp4->packed.empty_tensor() &&
                !experts.w2_nvfp4->block_scale.empty_tensor())
        << "layer " << layer;
    for (format::Nvfp4Tensor* stack : {&*experts.w13_nvfp4, &*experts.w2_nvfp4}) {
      stack->packed = Tensor();  // as the ranks free them once copied
      stack->block_scale = Tensor();
    }
    return ok_status();
  };
  const Result<LoadedModel> placed =
      load_model_on(model_dir, Device::kCpu, placement, progress.options());
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_TRUE(placed->report.clean()) << placed->report.first_problem();
  const ModelWeights& weights = placed->weights;
  std::vector<int64_t> main_layers(static_cast<size_t>(weights.config.n_layer));
  for (size_t l = 0; l < main_layers.size(); ++l) main_layers[l] = static_cast<int64_t>(l);
  EXPECT_EQ(handed, main_layers);
  // Each hand-over comes after its layer's tensors and before the next block's: some tensors
  // are decoded between two, and the MTP block's after the last.
  ASSERT_EQ(decoded_when_handed.size(), main_layers.size());
  EXPECT_GT(decoded_when_handed.front(), 0u);
  for (size_t l = 1; l < decoded_when_handed.size(); ++l) {
    EXPECT_LT(decoded_when_handed[l - 1], decoded_when_handed[l]) << "layer " << l;
  }
  ASSERT_FALSE(weights.mtp.empty());
  EXPECT_LT(decoded_when_handed.back(), progress.total);
  for (const LayerWeights& layer : weights.layers) {
    EXPECT_TRUE(layer.ffn.experts.w13_nvfp4->packed.empty_tensor());
    EXPECT_FALSE(layer.ffn.experts.w13_nvfp4->global_scale.empty_tensor());
  }
  for (const auto& mtp : weights.mtp) {
    const RoutedExpertWeights& experts = mtp.block.ffn.experts;
    EXPECT_FALSE(experts.is_nvfp4() ? experts.w13_nvfp4->packed.empty_tensor()
                                    : experts.w13.empty_tensor());
  }
  ASSERT_FALSE(placed->report.notes.empty());
  EXPECT_NE(placed->report.notes.back().find("handed over as each layer loaded"),
            std::string::npos)
      << placed->report.notes.back();
}

// The hook's error stops the load there: no later layer is decoded or handed over.
TEST(LoadModelOnTest, AHandOverErrorStopsTheLoad) {
  LoadProgress progress;
  std::vector<int64_t> handed;
  DevicePlacement placement;
  placement.take_main_experts = [&handed](int64_t layer, RoutedExpertWeights&) {
    handed.push_back(layer);
    return layer == 1 ? resource_exhausted("rank 2's experts of layer 1 do not fit")
                      : ok_status();
  };
  const Result<LoadedModel> placed = load_model_on(testing::golden_path("brown_small/model"),
                                                   Device::kCpu, placement, progress.options());
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(placed.status().message(), "rank 2's experts of layer 1 do not fit");
  EXPECT_EQ(handed, (std::vector<int64_t>{0, 1}));
  EXPECT_LT(progress.decoded, progress.total);
}

}  // namespace
}  // namespace dsv4::checkpoint
