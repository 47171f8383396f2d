// The official release's MXFP4 experts held as NVFP4 (checkpoint/mxfp4_as_nvfp4.h), on files
// written to disk: every layer whose E8M0 scales NVFP4's block scales reach is packed and
// dequantizes to exactly the values the MXFP4 encodes (the float64 reference of
// synthetic_checkpoint.h, written from the format description); a non-zero block out of reach,
// or a NaN scale, keeps its layer in f32 with a note naming expert, key, row and block; a block
// of zeros never does.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "checkpoint/loader_fixture.h"
#include "format/nvfp4.h"

namespace dsv4::checkpoint {
namespace {

using testing::ExpertForm;
using testing::LinearForm;
using testing::SyntheticCheckpoint;

constexpr int kReach = 17;  // NVFP4 block scales span 2^-9 ... 2^8

class Mxfp4AsNvfp4Test : public LoaderTest {
 protected:
  // The release's layout with every expert's E8M0 scales drawn from [top - 17, top], the
  // widest spread NVFP4 holds, and each expert's own top (so the global scales differ).
  SyntheticCheckpoint release() {
    SyntheticCheckpoint ckpt = official({LinearForm::kFp8E8m0, ExpertForm::kMxfp4, false});
    for (int64_t l = 0; l < config_.n_layer; ++l) {
      for (int64_t e = 0; e < config_.n_routed_experts; ++e) {
        const int top = 120 + static_cast<int>(rng_.engine()() % 16);
        for (const char* w : {".w1", ".w3", ".w2"}) {
          std::vector<uint8_t>& scales = scale_bytes(ckpt, l, e, w);
          for (uint8_t& s : scales) s = static_cast<uint8_t>(top - rng_.engine()() % (kReach + 1));
          scales[0] = static_cast<uint8_t>(w[2] == '2' ? top : top - kReach);  // both ends
          if (w[2] == '1') scales[1] = static_cast<uint8_t>(top);
        }
      }
    }
    return ckpt;
  }
  static std::vector<uint8_t>& scale_bytes(SyntheticCheckpoint& ckpt, int64_t layer, int64_t expert,
                                           const char* matrix) {
    return ckpt.at(official_expert(layer, expert) + matrix + ".scale").bytes;
  }
  // Block j of row r of an expert matrix: its scale byte and its 16 bytes of packed codes.
  static void set_block(SyntheticCheckpoint& ckpt, int64_t layer, int64_t expert,
                        const char* matrix, int64_t row, int64_t block, int scale, uint8_t codes) {
    const std::string name = official_expert(layer, expert) + matrix;
    testing::StoredBytes& w = ckpt.at(name + ".weight");
    const int64_t k = w.shape[1] * 2;
    ckpt.at(name + ".scale").bytes[static_cast<size_t>(row * (k / 32) + block)] =
        static_cast<uint8_t>(scale);
    std::fill_n(w.bytes.begin() + row * (k / 2) + block * 16, 16, codes);
  }

  // Layer l's experts are packed and dequantize exactly to the reference, dynamic W4A4 scales.
  void expect_packed_exactly(const SyntheticCheckpoint& ckpt, const ModelWeights& w, int64_t l) {
    const RoutedExpertWeights& experts = w.layers[static_cast<size_t>(l)].ffn.experts;
    const std::string layer = "layer " + std::to_string(l);
    ASSERT_TRUE(experts.is_nvfp4() && experts.w2_nvfp4.has_value()) << layer;
    EXPECT_TRUE(experts.w13.empty_tensor() && experts.w2.empty_tensor()) << layer;
    EXPECT_TRUE(experts.w13_nvfp4->input_scale.empty_tensor()) << layer;
    EXPECT_TRUE(experts.w13_input_scale.empty_tensor()) << layer << ": MXFP4 has no calibration";
    Result<Tensor> w13 = format::dequantize_ref(experts.w13_nvfp4->view());
    Result<Tensor> w2 = format::dequantize_ref(experts.w2_nvfp4->view());
    ASSERT_TRUE(w13.ok() && w2.ok());
    expect_matches(*w13, official_w13(ckpt, l), layer + " w13 as nvfp4");
    expect_matches(*w2, official_w2(ckpt, l), layer + " w2 as nvfp4");
  }

  static bool has_note(const LoadReport& report, const std::string& part) {
    return std::any_of(report.notes.begin(), report.notes.end(), [&](const std::string& note) {
      return note.find(part) != std::string::npos;
    });
  }
};

TEST_F(Mxfp4AsNvfp4Test, EveryLayerIsPackedWithEveryValueUnchanged) {
  const SyntheticCheckpoint ckpt = release();
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_clean(model->report);
  for (int64_t l = 0; l < config_.n_layer; ++l) expect_packed_exactly(ckpt, model->weights, l);
  EXPECT_TRUE(has_note(model->report,
                       "routed experts of 3 layer(s) held as NVFP4, converted "
                       "from MXFP4"))
      << testing::joined(model->report.notes);
}

TEST_F(Mxfp4AsNvfp4Test, ANonZeroBlockOutOfReachKeepsItsLayerInF32) {
  SyntheticCheckpoint ckpt = release();
  const int top = scale_bytes(ckpt, 1, 2, ".w2")[0];
  set_block(ckpt, 1, 2, ".w2", 5, 0, top - kReach - 1, 0x21);
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_clean(model->report);
  const RoutedExpertWeights& layer1 = model->weights.layers[1].ffn.experts;
  EXPECT_FALSE(layer1.is_nvfp4() || layer1.w2_nvfp4.has_value());
  expect_matches(layer1.w13, official_w13(ckpt, 1), "layer 1 w13 in f32");
  expect_matches(layer1.w2, official_w2(ckpt, 1), "layer 1 w2 in f32");
  expect_packed_exactly(ckpt, model->weights, 0);
  expect_packed_exactly(ckpt, model->weights, 2);
  EXPECT_TRUE(has_note(model->report,
                       "layer 1 ffn.experts.w2: MXFP4 routed experts held in f32, not NVFP4: "
                       "expert 2 (key layers.1.ffn.experts.2.w2.weight in "))
      << testing::joined(model->report.notes);
  EXPECT_TRUE(has_note(model->report, "row 5, block 0): its scale 2^"))
      << testing::joined(model->report.notes);
  EXPECT_TRUE(has_note(model->report, "routed experts of 2 layer(s) held as NVFP4"))
      << testing::joined(model->report.notes);
}

TEST_F(Mxfp4AsNvfp4Test, ABlockOfZerosOutOfReachIsHeldExactly) {
  SyntheticCheckpoint ckpt = release();
  const int top = scale_bytes(ckpt, 2, 0, ".w1")[1];
  set_block(ckpt, 2, 0, ".w1", 3, 1, 0, 0x80);  // +0 and -0 under 2^-127
  set_block(ckpt, 2, 0, ".w3", 0, 0, top - kReach - 40, 0x00);
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  for (int64_t l = 0; l < config_.n_layer; ++l) expect_packed_exactly(ckpt, model->weights, l);
}

TEST_F(Mxfp4AsNvfp4Test, ANanScaleKeepsItsLayerInF32AndIsReported) {
  SyntheticCheckpoint ckpt = release();
  scale_bytes(ckpt, 0, 3, ".w3")[4] = 0xff;
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_FALSE(model->weights.layers[0].ffn.experts.is_nvfp4());
  EXPECT_TRUE(has_note(model->report, "expert 3 (key layers.0.ffn.experts.3.w3.weight"))
      << testing::joined(model->report.notes);
  EXPECT_TRUE(has_note(model->report, "has the NaN scale 0xff"));
  ASSERT_EQ(model->report.non_finite_tensors.size(), 1u);
  EXPECT_NE(model->report.non_finite_tensors[0].find("layers.0.ffn.experts.3.w3.weight"),
            std::string::npos);
}

TEST_F(Mxfp4AsNvfp4Test, CheckModelNotesWhatLoadModelDoes) {
  SyntheticCheckpoint ckpt = release();
  const int top = scale_bytes(ckpt, 1, 2, ".w2")[0];
  set_block(ckpt, 1, 2, ".w2", 5, 0, top - kReach - 1, 0x21);
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  Result<LoadReport> checked = check_model(dir_.path());
  ASSERT_TRUE(model.ok() && checked.ok());
  EXPECT_EQ(checked->notes, model->report.notes);
  EXPECT_EQ(checked->notes.size(), 2u);
}

}  // namespace
}  // namespace dsv4::checkpoint
