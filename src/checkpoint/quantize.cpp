// quantize_checkpoint: bind the input (so every tensor is known by its slot, in any naming
// convention), plan which weights become NVFP4 and with which global scales, then rewrite the
// shards one by one: targets as ModelOpt's four tensors, everything else byte for byte.
//
// Dimension letters: E experts in a stacked tensor, N rows, K columns (a multiple of 16).
#include "checkpoint/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include "base/float_convert.h"
#include "checkpoint/binding.h"
#include "format/checkpoint_files.h"
#include "format/json.h"
#include "format/nvfp4.h"
#include "format/safetensors_writer.h"
#include "format/text_file.h"

namespace dsv4::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfigName = "config.json";

// A weight to quantize: per matrix ([E] for a stacked tensor, 1 for 2-D) its global scale and
// the input_scale written beside it.
struct PlannedWeight {
  std::vector<format::GlobalScale> scales;
  std::vector<float> input_scales;
};
using Plan = std::map<std::string, PlannedWeight, std::less<>>;

bool selected(Param param, bool all_linears) {
  const SlotSpec& spec = slot_spec(param);
  if (spec.storage == Storage::kExperts) return true;
  // The head decides tokens (and the embedding, a lookup table, and the router, which decides
  // experts, are no linears): ModelOpt leaves lm_head and routers unquantized too.
  return all_linears && spec.storage == Storage::kLinear && param != Param::kHead;
}

// Matrix g of a dense float tensor [..., N, K] as f32.
void load_matrix(const format::TensorInfo& t, int64_t g, int64_t n_elems, float* out) {
  const int64_t first = g * n_elems;
  for (int64_t i = 0; i < n_elems; ++i) {
    const uint8_t* p = t.data + (first + i) * static_cast<int64_t>(dtype_size(t.dtype));
    if (t.dtype == DType::kF32) {
      std::memcpy(&out[i], p, sizeof(float));
    } else {
      uint16_t h;
      std::memcpy(&h, p, sizeof h);
      out[i] = t.dtype == DType::kBF16 ? bf16_to_float(h) : fp16_to_float(h);
    }
  }
}

struct MatrixGeometry {
  int64_t n_matrices, n_rows, n_cols;
};

Result<MatrixGeometry> geometry(const format::TensorInfo& t) {
  const Shape& s = t.shape;
  if (s.rank < 2 || s.rank > 3 || s[s.rank - 1] % format::kNvfp4BlockSize != 0) {
    return invalid_argument(t.name + ": cannot quantize " + s.to_string() +
                            " to NVFP4 (need [N, K] or [E, N, K] with K a multiple of 16)");
  }
  return MatrixGeometry{s.rank == 3 ? s[0] : 1, s[s.rank - 2], s[s.rank - 1]};
}

Result<std::vector<float>> matrix_amaxes(const format::TensorInfo& t) {
  DSV4_ASSIGN_OR_RETURN(MatrixGeometry geo, geometry(t));
  std::vector<float> amaxes(geo.n_matrices);
  std::vector<float> values(geo.n_rows * geo.n_cols);
  for (int64_t g = 0; g < geo.n_matrices; ++g) {
    load_matrix(t, g, geo.n_rows * geo.n_cols, values.data());
    amaxes[g] = format::amax_abs(values.data(), values.size());
  }
  return amaxes;
}

// The input_scale of matrix g of `piece` in `slot`: the routed expert's calibrated one when
// there are calibrated scales, else the one static value.
float input_scale_of(const BoundSlot& slot, const BoundPiece& piece, int64_t g,
                     const QuantizeOptions& options, const ExpertInputScales* calibrated) {
  const bool expert = slot_spec(slot.param).storage == Storage::kExperts;
  if (calibrated == nullptr || !expert) return options.input_scale;
  // The MTP blocks' experts (layers n_layer ..): the calibration pass runs the trunk only.
  if (slot.layer >= static_cast<int64_t>(calibrated->gate_up.size())) return options.input_scale;
  const int64_t e = piece.expert_idx >= 0 ? piece.expert_idx : g;
  const auto& by_layer = slot.param == Param::kExpertsW13 ? calibrated->gate_up : calibrated->down;
  return by_layer[slot.layer][e];
}

// Adds one slot's weights to the plan. w1 and w3 stored per expert share the larger amax; a
// fused [E, 2F, D] stack gets it by taking each expert's amax over both halves at once.
Status plan_slot(const BoundSlot& slot, const QuantizeOptions& options,
                 const ExpertInputScales* calibrated, Plan& plan) {
  std::map<int64_t, float> shared_amax;  // expert -> max(amax w1, amax w3)
  std::vector<std::pair<const BoundPiece*, std::vector<float>>> amaxes;
  for (const BoundPiece& piece : slot.pieces) {
    DSV4_ASSIGN_OR_RETURN(std::vector<float> a, matrix_amaxes(*piece.stored.weight));
    if (slot.stacking == Stacking::kPerExpertGateUp) {
      float& m = shared_amax[piece.expert_idx];
      m = std::max(m, a[0]);
    }
    amaxes.emplace_back(&piece, std::move(a));
  }
  for (auto& [piece, a] : amaxes) {
    if (slot.stacking == Stacking::kPerExpertGateUp) a[0] = shared_amax[piece->expert_idx];
    PlannedWeight& planned = plan[piece->stored.weight->name];
    for (size_t g = 0; g < a.size(); ++g) {
      planned.scales.push_back(format::GlobalScale::from_amax(a[g]));
      planned.input_scales.push_back(
          input_scale_of(slot, *piece, static_cast<int64_t>(g), options, calibrated));
    }
  }
  return ok_status();
}

bool stored_dense(const BoundSlot& slot) {
  return std::all_of(slot.pieces.begin(), slot.pieces.end(),
                     [](const BoundPiece& p) { return p.form == StorageForm::kDense; });
}

Result<Plan> plan_quantization(const Binding& binding, const QuantizeOptions& options,
                               const ExpertInputScales* calibrated) {
  Plan plan;
  for (const BoundSlot& slot : binding.slots) {
    if (!selected(slot.param, options.all_linears)) continue;
    if (!stored_dense(slot)) continue;  // stored quantized (FP8, FP4): copied as it is
    DSV4_RETURN_IF_ERROR(plan_slot(slot, options, calibrated, plan));
  }
  return plan;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Quantizes `t` matrix by matrix and adds its four ModelOpt tensors to `writer`; returns their
// bytes.
Result<size_t> add_quantized(const format::TensorInfo& t, const PlannedWeight& planned,
                             format::SafetensorsWriter& writer, std::vector<std::string>& names) {
  DSV4_ASSIGN_OR_RETURN(MatrixGeometry geo, geometry(t));
  DSV4_ASSIGN_OR_RETURN(Nvfp4SiblingNames siblings, nvfp4_sibling_names(t.name));
  const int64_t n_elems = geo.n_rows * geo.n_cols;
  std::vector<uint8_t> packed, block_scale;
  std::vector<float> values(n_elems), decode;
  for (int64_t g = 0; g < geo.n_matrices; ++g) {
    load_matrix(t, g, n_elems, values.data());
    DSV4_ASSIGN_OR_RETURN(
        format::Nvfp4Tensor q,
        format::quantize_ref(values.data(), geo.n_rows, geo.n_cols, planned.scales[g]));
    const uint8_t* p = q.packed.data_as<uint8_t>();
    const uint8_t* s = q.block_scale.data_as<uint8_t>();
    packed.insert(packed.end(), p, p + q.packed.numel());
    block_scale.insert(block_scale.end(), s, s + q.block_scale.numel());
    decode.push_back(planned.scales[g].decode);
  }
  Shape packed_shape = t.shape, scale_shape = t.shape;
  packed_shape[t.shape.rank - 1] = geo.n_cols / 2;
  scale_shape[t.shape.rank - 1] = geo.n_cols / format::kNvfp4BlockSize;
  const Shape per_matrix = t.shape.rank == 3 ? Shape{geo.n_matrices} : Shape{};
  const size_t bytes = packed.size() + block_scale.size() + 2 * decode.size() * sizeof(float);
  writer.add_raw(t.name, DType::kU8, packed_shape, std::move(packed));
  writer.add_raw(siblings.block_scale, DType::kF8E4M3, scale_shape, std::move(block_scale));
  writer.add_raw(siblings.global_scale, DType::kF32, per_matrix, f32_bytes(decode));
  writer.add_raw(siblings.input_scale, DType::kF32, per_matrix, f32_bytes(planned.input_scales));
  names.insert(names.end(),
               {t.name, siblings.block_scale, siblings.global_scale, siblings.input_scale});
  return bytes;
}

// config.json with a ModelOpt-style quantization_config saying which weights this tool
// quantized.
Status write_config(const fs::path& in_dir, const fs::path& out_dir, const QuantizeOptions& options,
                    bool calibrated) {
  const std::string in_path = (in_dir / kConfigName).string();
  DSV4_ASSIGN_OR_RETURN(std::string text, format::read_text_file(in_path));
  DSV4_ASSIGN_OR_RETURN(format::Json config, format::parse_json(text, in_path));
  config["quantization_config"] = nvfp4_quantization_config(
      "dsv4 quantize",
      options.all_linears ? "all linears but embedding, head and router" : "routed experts",
      calibrated ? "calibrated per routed expert" : "one static value");
  return format::write_text_file((out_dir / kConfigName).string(), config.dump(2) + "\n");
}

// The output directory may be written: not the input, and empty or absent unless forced.
Status check_output(const fs::path& in_dir, const fs::path& out_dir, bool force) {
  std::error_code ec;
  if (fs::exists(out_dir, ec) && fs::equivalent(in_dir, out_dir, ec)) {
    return invalid_argument(out_dir.string() + ": the output directory is the input directory");
  }
  if (fs::exists(out_dir, ec) && !fs::is_empty(out_dir, ec) && !force) {
    return invalid_argument(out_dir.string() + ": not empty (pass --force to write into it)");
  }
  return ok_status();
}

Status create_output(const fs::path& out_dir) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return internal_error(out_dir.string() + ": cannot create: " + ec.message());
  return ok_status();
}

// Other files of the checkpoint directory (tokenizer, generation config, ...), unchanged.
Status copy_other_files(const fs::path& in_dir, const fs::path& out_dir, bool force) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(in_dir, ec)) {
    const fs::path& p = entry.path();
    if (!entry.is_regular_file() || p.extension() == ".safetensors" ||
        p.filename() == format::kShardIndexName || p.filename() == kConfigName) {
      continue;
    }
    const auto mode = force ? fs::copy_options::overwrite_existing : fs::copy_options::none;
    if (!fs::copy_file(p, out_dir / p.filename(), mode, ec) || ec) {
      return internal_error(p.string() + ": copy failed: " + ec.message());
    }
  }
  return ec ? internal_error(in_dir.string() + ": " + ec.message()) : ok_status();
}

bool usable_scale(float scale) { return scale > 0.0f && std::isfinite(scale); }

// The static scale wherever it is written: every linear without calibration, the other linears
// with all_linears.
Status check_static_scale(const QuantizeOptions& options) {
  const bool calibrating = static_cast<bool>(options.calibrate_experts);
  if ((calibrating && !options.all_linears) || usable_scale(options.input_scale)) {
    return ok_status();
  }
  return invalid_argument("input scale " + std::to_string(options.input_scale) +
                          ": must be finite and > 0" +
                          (calibrating ? " (the calibration covers the routed experts only)" : ""));
}

// A calibration needs dense routed experts: stored quantized, they are copied as they are.
Status check_calibratable(const Binding& binding) {
  for (const BoundSlot& slot : binding.slots) {
    const bool expert = slot_spec(slot.param).storage == Storage::kExperts;
    if (expert && !stored_dense(slot)) {
      return invalid_argument("layer " + std::to_string(slot.layer) +
                              ": the routed experts are stored quantized (FP8 or FP4); a "
                              "calibration pass needs dense (bf16/f32) experts");
    }
  }
  return ok_status();
}

// One calibrated scale per layer and routed expert, each usable.
Status check_calibrated(const ExpertInputScales& calibrated, const ModelConfig& config) {
  for (const auto* by_layer : {&calibrated.gate_up, &calibrated.down}) {
    const char* which = by_layer == &calibrated.gate_up ? "gate-up" : "down";
    if (static_cast<int64_t>(by_layer->size()) != config.n_layer) {
      return invalid_argument(std::string("calibrated ") + which + " input scales for " +
                              std::to_string(by_layer->size()) + " layers, the model has " +
                              std::to_string(config.n_layer));
    }
    for (size_t layer = 0; layer < by_layer->size(); ++layer) {
      const std::vector<float>& scales = (*by_layer)[layer];
      if (static_cast<int64_t>(scales.size()) != config.n_routed_experts) {
        return invalid_argument(std::string("calibrated ") + which + " input scales of layer " +
                                std::to_string(layer) + ": " + std::to_string(scales.size()) +
                                " experts, the model has " +
                                std::to_string(config.n_routed_experts));
      }
      for (size_t e = 0; e < scales.size(); ++e) {
        if (!usable_scale(scales[e])) {
          return invalid_argument(std::string("calibrated ") + which + " input scale of layer " +
                                  std::to_string(layer) + " expert " + std::to_string(e) + ": " +
                                  std::to_string(scales[e]) + ", must be finite and > 0");
        }
      }
    }
  }
  return ok_status();
}

}  // namespace

Result<Nvfp4SiblingNames> nvfp4_sibling_names(const std::string& weight) {
  const std::string suffix = ".weight";
  const bool dotted = weight.size() > suffix.size() &&
                      weight.compare(weight.size() - suffix.size(), suffix.size(), suffix) == 0;
  const std::string stem = dotted ? weight.substr(0, weight.size() - suffix.size()) : weight;
  const char* sep = dotted ? "." : "_";
  Nvfp4SiblingNames names{stem + sep + "weight_scale", stem + sep + "weight_scale_2",
                          stem + sep + "input_scale"};
  const std::pair<const std::string*, SiblingRole> checks[] = {
      {&names.block_scale, SiblingRole::kBlockScale},
      {&names.global_scale, SiblingRole::kGlobalScale},
      {&names.input_scale, SiblingRole::kInputScale}};
  for (const auto& [name, role] : checks) {
    bool known = false;
    for (const SiblingMatch& m : sibling_candidates(*name)) {
      known |= m.weight_name == weight && m.role == role;
    }
    if (!known) return internal_error(*name + ": not a sibling name the loader binds to " + weight);
  }
  return names;
}

format::Json nvfp4_quantization_config(const std::string& producer, const std::string& scope,
                                       const std::string& input_scales) {
  return {{"quant_method", "modelopt"},
          {"quant_algo", "NVFP4"},
          {"group_size", format::kNvfp4BlockSize},
          {"producer", producer},
          {"dsv4_scope", scope},
          {"dsv4_input_scales", input_scales}};
}

Result<QuantizeSummary> quantize_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                            const QuantizeOptions& options) {
  DSV4_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(in_dir));
  DSV4_RETURN_IF_ERROR(validate(config));
  DSV4_RETURN_IF_ERROR(check_static_scale(options));
  DSV4_ASSIGN_OR_RETURN(format::CheckpointFiles files, format::CheckpointFiles::open(in_dir));
  const FileOf file_of = [&files](std::string_view name) { return files.file_of(name); };
  DSV4_ASSIGN_OR_RETURN(Binding binding,
                        bind_tensors(files.tensors(), config, std::nullopt, file_of));
  if (!binding.report.problems.empty()) {
    return invalid_argument(
        in_dir + " does not bind cleanly (run dsv4 check): " + binding.report.problems.front());
  }
  DSV4_RETURN_IF_ERROR(check_output(in_dir, out_dir, options.force));
  std::optional<ExpertInputScales> calibrated;
  if (options.calibrate_experts) {
    DSV4_RETURN_IF_ERROR(check_calibratable(binding));
    DSV4_ASSIGN_OR_RETURN(calibrated, options.calibrate_experts());
    DSV4_RETURN_IF_ERROR(check_calibrated(*calibrated, config));
  }
  DSV4_ASSIGN_OR_RETURN(Plan plan,
                        plan_quantization(binding, options, calibrated ? &*calibrated : nullptr));
  DSV4_RETURN_IF_ERROR(create_output(out_dir));

  QuantizeSummary summary;
  summary.convention = binding.report.convention;
  std::map<std::string, std::string> weight_map;
  const std::vector<const format::TensorInfo*>& tensors = files.tensors();
  for (size_t begin = 0; begin < tensors.size();) {  // one shard at a time, in order
    const std::string& shard = files.file_of(tensors[begin]->name);
    const std::string shard_name = fs::path(shard).filename().string();
    format::SafetensorsWriter writer;
    writer.set_metadata("format", "pt");
    size_t end = begin;
    for (; end < tensors.size() && files.file_of(tensors[end]->name) == shard; ++end) {
      const format::TensorInfo& t = *tensors[end];
      std::vector<std::string> names;
      if (const auto it = plan.find(t.name); it != plan.end()) {
        DSV4_ASSIGN_OR_RETURN(size_t bytes, add_quantized(t, it->second, writer, names));
        summary.tensor_bytes += bytes;
        ++summary.n_quantized;
      } else {
        writer.add_raw(t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.bytes));
        names.push_back(t.name);
        summary.tensor_bytes += t.bytes;
        ++summary.n_copied;
      }
      for (const std::string& name : names) weight_map[name] = shard_name;
    }
    DSV4_RETURN_IF_ERROR(writer.write((fs::path(out_dir) / shard_name).string(), options.force));
    ++summary.n_shards;
    begin = end;
  }
  if (fs::exists(fs::path(in_dir) / format::kShardIndexName)) {
    DSV4_RETURN_IF_ERROR(format::write_shard_index(out_dir, weight_map, summary.tensor_bytes));
  }
  DSV4_RETURN_IF_ERROR(write_config(in_dir, out_dir, options, calibrated.has_value()));
  DSV4_RETURN_IF_ERROR(copy_other_files(in_dir, out_dir, options.force));
  return summary;
}

}  // namespace dsv4::checkpoint
