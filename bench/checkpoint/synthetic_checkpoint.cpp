// write_synthetic_checkpoint: cut the config, plan every tensor (name, dtype, shape and how its
// values are drawn) from the name table, then stream each shard: windows of whole row chunks,
// drawn in parallel, appended in order.
//
// The values (../shared/docs/deepseek_v4.md; model/hyper_connections.cpp):
//   linear [N, K]      uniform, std 1/sqrt(K): a unit-variance input keeps unit variance, so
//                      every layer's activations stay in range however many layers there are
//   embedding          uniform, std 1 (the streams start at unit scale)
//   norm weights       uniform [0.9, 1.1]
//   hc fn [mix, M·D]   a linear of the RMS-normalised streams: mixes come out ~N(0, 1)
//   hc scale           uniform [0.01, 0.1]: mixes barely move the sigmoids and the Sinkhorn
//   hc base, sinks, ape, router bias   uniform ±0.01: pre ≈ 0.5, post ≈ 1, comb ≈ uniform
//                      doubly stochastic; routing decided by the router's scores alone
//   router [E, D]      a linear: independent N(0, 1) scores, so each token's top-k is a roughly
//                      uniform draw over the experts, as balanced trained routing is
//   tid2eid [V, K]     K distinct random expert ids per token
//   FP8 linears        (SyntheticOptions::fp8_linears) the linears V4's release stores in FP8, as
//                      it stores them: e4m3 codes of a linear's uniform values over one
//                      power-of-two f32 scale a 128 × 128 block, 2^ceil(log2(amax / 448))
//   NVFP4 experts      random E2M1 codes, block scales random UE4M3 in [0.5, 2], weight_scale_2
//                      scaled so the dequantized weights have std 1/sqrt(K) like a linear,
//                      input_scale for activations of amax 4 (std ~1 inputs)
#include "checkpoint/synthetic_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "base/float_convert.h"
#include "base/parallel_for.h"
#include "checkpoint/binding.h"
#include "checkpoint/config.h"
#include "checkpoint/quantize.h"
#include "checkpoint/tensor_names.h"
#include "format/checkpoint_files.h"
#include "format/json.h"
#include "format/nvfp4.h"
#include "format/safetensors_writer.h"
#include "format/text_file.h"

namespace dsv4::bench {
namespace {

namespace fs = std::filesystem;
using checkpoint::ModelConfig;
using checkpoint::Param;

constexpr int64_t kChunkElements = int64_t{1} << 16;  // one generator's share of a tensor
constexpr size_t kWindowBytes = size_t{64} << 20;     // drawn, then written, at a time

// Block scales between these (UE4M3 codes in order of value), as calibrated checkpoints'
// mostly are; the global scale then sets the weights' size.
constexpr float kBlockScaleMin = 0.5f, kBlockScaleMax = 2.0f;
// The static activation decode scale of every expert input: amax 4 over the NVFP4 range.
constexpr float kInputScale = 4.0f / format::kNvfp4Range;

// ---- What each tensor holds ----

enum class Draw {
  kUniform,      // floats uniform in [lo, hi)
  kByteCodes,    // bytes uniform over the codes lo .. hi
  kConstant,     // every f32 element lo
  kDistinctIds,  // each row: distinct integers in [0, hi)
};

struct Fill {
  Draw draw;
  double lo = 0, hi = 0;
};

Fill uniform_with_std(double std) {
  const double half_width = std::sqrt(3.0) * std;  // U(-a, a) has std a/sqrt(3)
  return {Draw::kUniform, -half_width, half_width};
}

Fill linear_fill(const Shape& shape) {
  return uniform_with_std(1.0 / std::sqrt(static_cast<double>(shape[shape.rank - 1])));
}

// The values of a dense (or integer) slot; every slot is named, so a new one needs a decision.
Fill dense_fill(Param param, const Shape& shape, const ModelConfig& config) {
  const Fill small{Draw::kUniform, -0.01, 0.01};
  switch (param) {
    case Param::kEmbed:
      return uniform_with_std(1.0);
    case Param::kHead:
    case Param::kHcHeadFn:
    case Param::kHcAttnFn:
    case Param::kHcFfnFn:
    case Param::kWqA:
    case Param::kWqB:
    case Param::kWkv:
    case Param::kWoA:
    case Param::kWoB:
    case Param::kCompressorWkv:
    case Param::kCompressorWgate:
    case Param::kIndexerWqB:
    case Param::kIndexerWeightsProj:
    case Param::kIndexerCompressorWkv:
    case Param::kIndexerCompressorWgate:
    case Param::kGate:
    case Param::kSharedW1:
    case Param::kSharedW3:
    case Param::kSharedW2:
    case Param::kMtpEProj:
    case Param::kMtpHProj:
    case Param::kMtpHcHeadFn:
      return linear_fill(shape);
    case Param::kNorm:
    case Param::kMtpEnorm:
    case Param::kMtpHnorm:
    case Param::kMtpNorm:
    case Param::kAttnNorm:
    case Param::kFfnNorm:
    case Param::kQNorm:
    case Param::kKvNorm:
    case Param::kCompressorNorm:
    case Param::kIndexerCompressorNorm:
      return {Draw::kUniform, 0.9, 1.1};
    case Param::kHcHeadScale:
    case Param::kMtpHcHeadScale:
    case Param::kHcAttnScale:
    case Param::kHcFfnScale:
      return {Draw::kUniform, 0.01, 0.1};
    case Param::kHcHeadBase:
    case Param::kMtpHcHeadBase:
    case Param::kHcAttnBase:
    case Param::kHcFfnBase:
    case Param::kAttnSink:
    case Param::kCompressorApe:
    case Param::kIndexerCompressorApe:
    case Param::kGateBias:
      return small;
    case Param::kGateTid2eid:
      return {Draw::kDistinctIds, 0, static_cast<double>(config.n_routed_experts)};
    case Param::kExpertsW13:
    case Param::kExpertsW2:
      break;  // NVFP4: nvfp4_tensors
  }
  DSV4_UNREACHABLE("no dense fill for this slot");
}

// The decode global scale that gives dequantized weights std 1/sqrt(K): codes uniform over the
// 16 E2M1 codes and scales uniform over the UE4M3 codes in [kBlockScaleMin, kBlockScaleMax] are
// independent with mean 0 and 1 (not 0) respectively, so std(w) = rms(e2m1) · rms(scale) · g.
float expert_global_scale(int64_t k) {
  double code_squares = 0;
  for (uint8_t code = 0; code < 16; ++code) code_squares += std::pow(e2m1_to_float(code), 2);
  double scale_squares = 0;
  int n_scales = 0;
  for (int code = float_to_e4m3(kBlockScaleMin); code <= float_to_e4m3(kBlockScaleMax); ++code) {
    scale_squares += std::pow(e4m3_to_float(static_cast<uint8_t>(code)), 2);
    ++n_scales;
  }
  const double rms = std::sqrt(code_squares / 16) * std::sqrt(scale_squares / n_scales);
  return static_cast<float>(1.0 / (std::sqrt(static_cast<double>(k)) * rms));
}

struct PlannedTensor {
  format::TensorDeclaration declaration;
  Fill fill;
};

// One routed-expert matrix [N, K] as `dsv4 quantize` writes it: packed codes, block scales,
// global and input scale, under ModelOpt's sibling names.
Result<std::vector<PlannedTensor>> nvfp4_tensors(const std::string& name, const Shape& shape) {
  DSV4_ASSIGN_OR_RETURN(checkpoint::Nvfp4SiblingNames siblings,
                        checkpoint::nvfp4_sibling_names(name));
  const int64_t n = shape[0], k = shape[1];
  const double lowest_scale = float_to_e4m3(kBlockScaleMin);
  const double highest_scale = float_to_e4m3(kBlockScaleMax);
  return std::vector<PlannedTensor>{
      {{name, DType::kU8, {n, k / 2}}, {Draw::kByteCodes, 0, 255}},
      {{siblings.block_scale, DType::kF8E4M3, {n, k / format::kNvfp4BlockSize}},
       {Draw::kByteCodes, lowest_scale, highest_scale}},
      {{siblings.global_scale, DType::kF32, {}}, {Draw::kConstant, expert_global_scale(k)}},
      {{siblings.input_scale, DType::kF32, {}}, {Draw::kConstant, kInputScale}}};
}

// One linear [N, K] in FP8 under the official names: `X.weight` e4m3 codes of linear_fill's
// values divided by the block scale, and `X.scale` f32 [ceil(N/128), ceil(K/128)], every block
// the same power of two (DeepSeek's rule over the values' bound), so the decoded weights are
// linear_fill's values rounded to e4m3.
Result<std::vector<PlannedTensor>> fp8_tensors(const std::string& name, const Shape& shape) {
  constexpr std::string_view kSuffix = ".weight";
  if (!name.ends_with(kSuffix)) {
    return internal_error("an FP8 linear's name must end in .weight: " + name);
  }
  const std::string scale_name = name.substr(0, name.size() - kSuffix.size()) + ".scale";
  const Fill values = linear_fill(shape);
  const double scale = std::exp2(std::ceil(std::log2(values.hi / 448.0)));
  const int64_t n = shape[0], k = shape[1];
  return std::vector<PlannedTensor>{
      {{name, DType::kF8E4M3, shape}, {Draw::kUniform, values.lo / scale, values.hi / scale}},
      {{scale_name, DType::kF32, {(n + 127) / 128, (k + 127) / 128}},
       {Draw::kConstant, scale}}};
}

struct PlannedShard {
  std::vector<PlannedTensor> tensors;
  size_t bytes() const {
    size_t total = 0;
    for (const PlannedTensor& t : tensors) total += t.declaration.bytes();
    return total;
  }
};

// Shard 0 the global weights, shard 1 + L layer L (the MTP blocks numbered after the layers); in
// each, the name table's slot order.
Result<std::vector<PlannedShard>> plan_shards(const ModelConfig& config, bool fp8_linears) {
  const checkpoint::ExpectedKeys keys = checkpoint::expected_keys(
      config, checkpoint::NamingConvention::kOfficial, /*with_mtp=*/config.n_mtp_layers > 0);
  std::vector<PlannedShard> shards(static_cast<size_t>(config.n_layer + config.n_mtp_layers) + 1);
  for (const checkpoint::ExpectedSlot& slot : keys.slots) {
    // The official names have one form a slot (the alternatives are other conventions').
    DSV4_CHECK(slot.forms.size() == 1, "official slot %s has %zu forms",
               checkpoint::slot_label(slot.param, slot.layer).c_str(), slot.forms.size());
    const checkpoint::SlotForm& form = slot.forms.front();
    const checkpoint::SlotSpec& spec = checkpoint::slot_spec(slot.param);
    const Shape slot_shape = checkpoint::slot_shape(slot.param, config, slot.layer);
    std::vector<PlannedTensor>& tensors = shards[static_cast<size_t>(slot.layer + 1)].tensors;
    for (const checkpoint::PieceName& piece_name : form.pieces) {
      checkpoint::BoundPiece piece;
      piece.expert_idx = piece_name.expert_idx;
      piece.half = piece_name.half;
      checkpoint::place_piece(form.stacking, slot_shape, piece);
      if (spec.storage == checkpoint::Storage::kExperts) {
        DSV4_ASSIGN_OR_RETURN(std::vector<PlannedTensor> nvfp4,
                              nvfp4_tensors(piece_name.name, piece.shape));
        tensors.insert(tensors.end(), nvfp4.begin(), nvfp4.end());
      } else if (spec.release_dtype == DType::kF8E4M3 && fp8_linears) {
        DSV4_ASSIGN_OR_RETURN(std::vector<PlannedTensor> fp8,
                              fp8_tensors(piece_name.name, piece.shape));
        tensors.insert(tensors.end(), fp8.begin(), fp8.end());
      } else {  // the release's FP8 linears in bf16 without fp8_linears
        const DType dense =
            spec.release_dtype == DType::kF8E4M3 ? DType::kBF16 : spec.release_dtype;
        tensors.push_back({{piece_name.name, dense, piece.shape},
                           dense_fill(slot.param, piece.shape, config)});
      }
    }
  }
  return shards;
}

// ---- Drawing values ----

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// splitmix64 as a generator: fast, and any 64-bit seed starts a good stream.
class Generator {
 public:
  explicit Generator(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    const uint64_t out = splitmix64(state_);
    state_ += 0x9e3779b97f4a7c15ull;
    return out;
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  // In [0, n): the top 32 bits scaled by n (Lemire's multiply-shift, no division).
  uint64_t below(uint32_t n) { return ((next() >> 32) * n) >> 32; }

 private:
  uint64_t state_;
};

// A run of whole rows of one tensor, drawn by one generator into the window buffer.
struct Chunk {
  const PlannedTensor* tensor;
  uint64_t seed;             // of (options seed, tensor index, chunk index)
  int64_t n_rows, row_size;  // row_size: elements a row (the last dim; 1 for a scalar)
  size_t window_offset;
};

void store(DType dtype, double value, uint8_t* out) {
  switch (dtype) {
    case DType::kF32: {
      const auto f = static_cast<float>(value);
      std::memcpy(out, &f, sizeof f);
      return;
    }
    case DType::kBF16: {
      const uint16_t b = float_to_bf16(static_cast<float>(value));
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case DType::kF8E4M3:
      *out = float_to_e4m3(static_cast<float>(value));
      return;
    case DType::kI64: {
      const auto i = static_cast<int64_t>(value);
      std::memcpy(out, &i, sizeof i);
      return;
    }
    default:
      DSV4_UNREACHABLE("no synthetic values of this dtype");
  }
}

// Floyd's sampling: `count` distinct values in [0, range), each subset equally likely.
void distinct_ids(Generator& rng, int64_t count, int64_t range, std::vector<int64_t>& ids) {
  ids.clear();
  for (int64_t j = range - count; j < range; ++j) {
    const auto t = static_cast<int64_t>(rng.below(static_cast<uint32_t>(j + 1)));
    ids.push_back(std::find(ids.begin(), ids.end(), t) == ids.end() ? t : j);
  }
}

void draw_chunk(const Chunk& chunk, uint8_t* out) {
  Generator rng(chunk.seed);
  const Fill& fill = chunk.tensor->fill;
  const DType dtype = chunk.tensor->declaration.dtype;
  const size_t size = dtype_size(dtype);
  const int64_t n = chunk.n_rows * chunk.row_size;
  switch (fill.draw) {
    case Draw::kUniform:
      for (int64_t i = 0; i < n; ++i)
        store(dtype, fill.lo + (fill.hi - fill.lo) * rng.unit(), out + i * size);
      return;
    case Draw::kByteCodes: {
      const auto lo = static_cast<uint64_t>(fill.lo),
                 span = static_cast<uint64_t>(fill.hi) - lo + 1;
      if (span == 256) {  // every byte value (the packed codes, most of the bytes): 8 a draw
        for (int64_t i = 0; i < n; i += 8) {
          const uint64_t bits = rng.next();
          std::memcpy(out + i, &bits, static_cast<size_t>(std::min<int64_t>(8, n - i)));
        }
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<uint8_t>(lo + rng.below(static_cast<uint32_t>(span)));
      }
      return;
    }
    case Draw::kConstant:
      for (int64_t i = 0; i < n; ++i) store(dtype, fill.lo, out + i * size);
      return;
    case Draw::kDistinctIds: {
      std::vector<int64_t> ids;
      for (int64_t row = 0; row < chunk.n_rows; ++row) {
        distinct_ids(rng, chunk.row_size, static_cast<int64_t>(fill.hi), ids);
        for (int64_t j = 0; j < chunk.row_size; ++j) {
          store(dtype, static_cast<double>(ids[j]), out + (row * chunk.row_size + j) * size);
        }
      }
      return;
    }
  }
}

// ---- Writing ----

// Draws the chunks (in parallel) into `window` and appends it to the shard.
Status flush(const std::vector<Chunk>& chunks, std::vector<uint8_t>& window, size_t used,
             format::SafetensorsStream& stream) {
  parallel_for(static_cast<int64_t>(chunks.size()), [&](int64_t i) {
    draw_chunk(chunks[static_cast<size_t>(i)],
               window.data() + chunks[static_cast<size_t>(i)].window_offset);
  });
  return stream.append(window.data(), used);
}

// `first_tensor`: the index of the shard's first tensor in the whole checkpoint (seeds).
Status write_shard(const PlannedShard& shard, const std::string& path, uint64_t seed,
                   size_t first_tensor) {
  std::vector<format::TensorDeclaration> declarations;
  for (const PlannedTensor& t : shard.tensors) declarations.push_back(t.declaration);
  DSV4_ASSIGN_OR_RETURN(format::SafetensorsStream stream,
                        format::SafetensorsStream::create(path, declarations, {{"format", "pt"}}));
  std::vector<uint8_t> window(kWindowBytes);
  std::vector<Chunk> chunks;
  size_t used = 0;
  for (size_t t = 0; t < shard.tensors.size(); ++t) {
    const PlannedTensor& tensor = shard.tensors[t];
    const Shape& shape = tensor.declaration.shape;
    const int64_t row_size = shape.rank == 0 ? 1 : shape[shape.rank - 1];
    const int64_t n_rows = shape.numel() / row_size;
    const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkElements / row_size);
    const size_t row_bytes = static_cast<size_t>(row_size) * dtype_size(tensor.declaration.dtype);
    const uint64_t tensor_seed = splitmix64(seed ^ splitmix64(first_tensor + t));
    for (int64_t row = 0, c = 0; row < n_rows; row += rows_per_chunk, ++c) {
      const int64_t rows = std::min(rows_per_chunk, n_rows - row);
      const size_t bytes = static_cast<size_t>(rows) * row_bytes;
      if (used + bytes > window.size() && used > 0) {
        DSV4_RETURN_IF_ERROR(flush(chunks, window, used, stream));
        chunks.clear();
        used = 0;
      }
      if (bytes > window.size()) window.resize(bytes);  // one row wider than a window
      chunks.push_back(
          {&tensor, splitmix64(tensor_seed ^ static_cast<uint64_t>(c)), rows, row_size, used});
      used += bytes;
    }
  }
  DSV4_RETURN_IF_ERROR(flush(chunks, window, used, stream));
  return stream.finish();
}

// ---- The config ----

// The quantization_config of a checkpoint whose linears are stored as the release stores them
// (fp8_linears): the release's own declaration (e4m3 in 128 × 128 blocks with power-of-two
// scales), which the memory plans read (ModelConfig::fp8_linears); the experts' NVFP4 is told
// by their tensors, as the release's FP4 experts are.
format::Json release_fp8_quantization_config(const std::string& producer) {
  return {{"quant_method", "fp8"},
          {"fmt", "e4m3"},
          {"scale_fmt", "ue8m0"},
          {"activation_scheme", "dynamic"},
          {"weight_block_size", {128, 128}},
          {"producer", producer}};
}

// The original config cut to n_layers and n_mtp_layers: the per-layer lists to their first
// n_layers entries (compress_ratios then keeps the first n_mtp_layers of its trailing MTP
// entries), the hash layers among the first n_layers, and a quantization_config of the weights
// written: a `dsv4 quantize` output's (the experts are NVFP4; the original's, e.g. FP8, would
// describe weights this checkpoint does not have), or with fp8_linears the release's FP8 one.
format::Json cut_config(format::Json config, const ModelConfig& original, int64_t n_layers,
                        int64_t n_mtp_layers, uint64_t seed, bool fp8_linears) {
  config["num_hidden_layers"] = n_layers;
  config["num_nextn_predict_layers"] = n_mtp_layers;
  for (const char* key : {"compress_ratios", "layer_types", "mlp_layer_types"}) {
    if (!config.contains(key)) continue;
    format::Json& list = config[key];
    const auto size = static_cast<int64_t>(list.size());
    const bool with_mtp = std::string_view(key) == "compress_ratios";
    const int64_t trunk_end = std::min(original.n_layer, size);
    list.erase(list.begin() + std::min(trunk_end + (with_mtp ? n_mtp_layers : 0), size),
               list.end());
    list.erase(list.begin() + std::min(n_layers, trunk_end), list.begin() + trunk_end);
  }
  if (config.contains("num_hash_layers")) {
    config["num_hash_layers"] = std::min(config["num_hash_layers"].get<int64_t>(), n_layers);
  }
  const std::string producer =
      "synth_checkpoint (random weights, seed " + std::to_string(seed) + ")";
  config["quantization_config"] = fp8_linears ? release_fp8_quantization_config(producer)
                                              : checkpoint::nvfp4_quantization_config(
                                                    producer, "routed experts", "one static value");
  return config;
}

// The cut config's text, after the original and the cut have both parsed and validated.
Result<std::string> synthetic_config_text(const SyntheticOptions& options) {
  DSV4_ASSIGN_OR_RETURN(std::string text, format::read_text_file(options.config_path));
  DSV4_ASSIGN_OR_RETURN(ModelConfig original,
                        checkpoint::parse_model_config(text, options.config_path));
  if (options.n_layers < 1 || options.n_layers > original.n_layer) {
    return invalid_argument("--layers " + std::to_string(options.n_layers) + ": must be 1 .. " +
                            std::to_string(original.n_layer) + " (num_hidden_layers of " +
                            options.config_path + ")");
  }
  if (options.n_mtp_layers < 0 || options.n_mtp_layers > original.n_mtp_layers) {
    return invalid_argument("--mtp-layers " + std::to_string(options.n_mtp_layers) +
                            ": must be 0 .. " + std::to_string(original.n_mtp_layers) +
                            " (num_nextn_predict_layers of " + options.config_path + ")");
  }
  DSV4_ASSIGN_OR_RETURN(format::Json json, format::parse_json(text, options.config_path));
  return cut_config(std::move(json), original, options.n_layers, options.n_mtp_layers, options.seed,
                    options.fp8_linears)
             .dump(2) +
         "\n";
}

// Nothing a user wrote is overwritten: the output directory is absent or empty.
Status create_output(const std::string& out_dir) {
  std::error_code ec;
  if (fs::exists(out_dir, ec)) {
    if (!fs::is_directory(out_dir, ec)) return invalid_argument(out_dir + ": not a directory");
    if (!fs::is_empty(out_dir, ec)) {
      return invalid_argument(out_dir +
                              ": not empty (the output directory must be empty or absent)");
    }
  }
  fs::create_directories(out_dir, ec);
  if (ec) return invalid_argument(out_dir + ": cannot create: " + ec.message());
  return ok_status();
}

}  // namespace

Result<SyntheticSummary> write_synthetic_checkpoint(const SyntheticOptions& options) {
  DSV4_ASSIGN_OR_RETURN(std::string config_text, synthetic_config_text(options));
  const std::string config_path = (fs::path(options.out_dir) / "config.json").string();
  DSV4_ASSIGN_OR_RETURN(ModelConfig config,
                        checkpoint::parse_model_config(config_text, config_path));
  DSV4_ASSIGN_OR_RETURN(std::vector<PlannedShard> shards, plan_shards(config, options.fp8_linears));
  DSV4_RETURN_IF_ERROR(create_output(options.out_dir));

  SyntheticSummary summary;
  summary.n_shards = shards.size();
  std::map<std::string, std::string> weight_map;
  for (size_t s = 0; s < shards.size(); ++s) {
    const auto start = std::chrono::steady_clock::now();
    const std::string file = format::shard_file_name(s, shards.size());
    DSV4_RETURN_IF_ERROR(write_shard(shards[s], (fs::path(options.out_dir) / file).string(),
                                     options.seed, summary.n_tensors));
    for (const PlannedTensor& t : shards[s].tensors) weight_map[t.declaration.name] = file;
    const SyntheticShard written{
        file,
        s,
        shards.size(),
        shards[s].tensors.size(),
        shards[s].bytes(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
    summary.n_tensors += written.n_tensors;
    summary.tensor_bytes += written.bytes;
    if (options.on_shard) options.on_shard(written);
  }
  // The index and config last: a directory left by a failed run does not open as a checkpoint.
  DSV4_RETURN_IF_ERROR(
      format::write_shard_index(options.out_dir, weight_map, summary.tensor_bytes));
  DSV4_RETURN_IF_ERROR(format::write_text_file(config_path, config_text));
  return summary;
}

}  // namespace dsv4::bench
