// load_model / check_model: open the checkpoint, bind it (bind.cpp), decode every bound piece
// through the one decode path (decode.cpp) into ModelWeights or into scratch memory, and scan
// each decoded piece for all-zero and non-finite values.
#include "checkpoint/loader.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "base/parallel_for.h"
#include "checkpoint/binding.h"
#include "checkpoint/decode.h"
#include "checkpoint/expert_packing.h"
#include "checkpoint/fp8_weights.h"

namespace dsv4::checkpoint {
namespace {

using enum Param;

// ---- Post-load scan ----

// Slots that may legitimately be all zero, each with its reason. Nothing else may: every other
// parameter of a trained model being exactly zero means a converter wrote nothing there.
struct ZeroAllowed {
  Param param;
  const char* reason;
};
constexpr ZeroAllowed kMayBeZero[] = {
    // The aux-loss-free balancing bias is selection-only and starts at zero; a model whose
    // balance never needed correcting (or a converter that resets it) ships zeros, and routing
    // with a zero bias is still exactly the unbiased top-k.
    {kGateBias, "selection-only balancing bias: zero is its initial, valid state"},
};

bool zero_allowed(Param param) {
  for (const ZeroAllowed& entry : kMayBeZero) {
    if (entry.param == param) return true;
  }
  return false;
}

std::string piece_what(const BoundSlot& slot, const BoundPiece& piece) {
  std::string what = slot_label(slot.param, slot.layer);
  if (piece.expert_idx >= 0) what += " expert " + std::to_string(piece.expert_idx);
  return what + " (key " + piece.name + " in " + piece.file + ")";
}

void report_scan(const BoundSlot& slot, const BoundPiece& piece, const PieceScan& scan,
                 LoadReport& report) {
  const int64_t n = piece.shape.numel();
  if (scan.n_non_finite > 0) {
    report.non_finite_tensors.push_back(piece_what(slot, piece) + ": " +
                                        std::to_string(scan.n_non_finite) + " of " +
                                        std::to_string(n) + " values are NaN or infinite");
  } else if (scan.all_zero && !zero_allowed(slot.param)) {
    report.zero_tensors.push_back(piece_what(slot, piece) + ": all " + std::to_string(n) +
                                  " values are zero");
  }
}

// tid2eid rows are expert ids: each must name one of the E experts.
void scan_i64(const BoundSlot& slot, const BoundPiece& piece, const int64_t* v, int64_t n_experts,
              LoadReport& report) {
  bool all_zero = true;
  for (int64_t i = 0; i < piece.shape.numel(); ++i) {
    if (v[i] != 0) all_zero = false;
    if (v[i] < 0 || v[i] >= n_experts) {
      report.problems.push_back(piece_what(slot, piece) + ": expert id " + std::to_string(v[i]) +
                                " at element " + std::to_string(i) + " is outside [0, " +
                                std::to_string(n_experts) + ")");
      return;
    }
  }
  if (all_zero) report.zero_tensors.push_back(piece_what(slot, piece) + ": all expert ids are 0");
}

// The largest of a stack's calibrated per-expert input scales as f32 [1] (host), or an empty
// tensor when the stack has none.
Result<Tensor> largest_input_scale(const std::optional<format::Nvfp4Tensor>& stack) {
  if (!stack || stack->input_scale.empty_tensor()) return Tensor();
  const Tensor& scales = stack->input_scale;
  DSV4_ASSIGN_OR_RETURN(Tensor largest, Tensor::empty(DType::kF32, {1}));
  const float* v = scales.data_as<const float>();
  largest.data_as<float>()[0] = *std::max_element(v, v + scales.numel());
  return largest;
}

Status set_static_input_scales(LayerWeights& layer) {
  RoutedExpertWeights& experts = layer.ffn.experts;
  DSV4_ASSIGN_OR_RETURN(experts.w13_input_scale, largest_input_scale(experts.w13_nvfp4));
  DSV4_ASSIGN_OR_RETURN(experts.w2_input_scale, largest_input_scale(experts.w2_nvfp4));
  return ok_status();
}

// Tells LoadOptions::on_layer_loaded when the last slot of each layer (then of each MTP block
// the checkpoint holds) is decoded (a layer's static input scales are set first), and at the
// end about any layer no slot was bound to.
class LayerCompletion {
 public:
  using Callback = std::function<Status(ModelWeights&, int64_t)>;
  LayerCompletion(const Binding& binding, const ModelConfig& config, Callback callback)
      : remaining_(static_cast<size_t>(config.n_layer) + binding.report.n_mtp_blocks + 1, 0),
        callback_(std::move(callback)) {
    for (const BoundSlot& slot : binding.slots) ++remaining_[index(slot.layer)];
  }

  Status slot_done(int64_t layer, ModelWeights& weights) {
    return --remaining_[index(layer)] == 0 ? complete(layer, weights) : ok_status();
  }

  // Layers no bound slot belongs to (a binding with problems) are complete at the end.
  Status finish(ModelWeights& weights) {
    for (int64_t layer = -1; layer + 1 < static_cast<int64_t>(remaining_.size()); ++layer) {
      if (remaining_[index(layer)] == 0 && !done(layer))
        DSV4_RETURN_IF_ERROR(complete(layer, weights));
    }
    return ok_status();
  }

 private:
  static size_t index(int64_t layer) { return static_cast<size_t>(layer + 1); }
  bool done(int64_t layer) const { return done_.count(layer) != 0; }

  Status complete(int64_t layer, ModelWeights& weights) {
    done_.insert(layer);
    if (layer >= 0) DSV4_RETURN_IF_ERROR(set_static_input_scales(weights.block(layer)));
    return callback_ ? callback_(weights, layer) : ok_status();
  }

  std::vector<int> remaining_;  // bound slots not yet decoded, per layer (index 0: globals)
  std::set<int64_t> done_;
  Callback callback_;
};

// ---- The one pass ----

// Whether this load keeps `slot` in FP8 (LoadOptions::keep_fp8).
bool kept_fp8(const BoundSlot& slot, const LoadOptions& options) {
  return options.keep_fp8 && keeps_fp8(slot);
}

// The sizes of what decode_all will keep.
LoadPlan plan_load(const Binding& binding, const ExpertPacking& packing,
                   const LoadOptions& options) {
  LoadPlan plan;
  for (const BoundSlot& slot : binding.slots) {
    if (kept_fp8(slot, options)) {
      plan.fp8_bytes += fp8_slot_bytes(slot);
    } else if (packing.packed(slot)) {
      plan.packed_expert_bytes += ExpertPacking::packed_bytes(slot);
      const auto layer = static_cast<size_t>(slot.layer);
      if (plan.expert_bulk_bytes.size() <= layer) {
        plan.expert_bulk_bytes.resize(layer + 1);
        plan.expert_packed_bytes.resize(layer + 1);
      }
      plan.expert_bulk_bytes[layer] += ExpertPacking::bulk_bytes(slot);
      plan.expert_packed_bytes[layer] += ExpertPacking::packed_bytes(slot);
    } else if (slot_spec(slot.param).storage == Storage::kIndex) {
      plan.index_elements += slot.shape.numel();
    } else {
      plan.value_elements += slot.shape.numel();
    }
  }
  return plan;
}

// Copies a packed slot's pieces into its NVFP4 stack on parallel_for's threads, an expert's
// pieces (gate and up halves, which both set its global and input scale) on one thread.
void copy_packed_pieces(const BoundSlot& slot, const ExpertPacking& packing,
                        format::Nvfp4Tensor& out) {
  std::map<int64_t, std::vector<const BoundPiece*>> by_expert;
  for (const BoundPiece& piece : slot.pieces) {
    by_expert[piece_origin(slot, piece).matrix].push_back(&piece);
  }
  std::vector<const std::vector<const BoundPiece*>*> experts;
  for (const auto& [matrix, pieces] : by_expert) experts.push_back(&pieces);
  parallel_for(static_cast<int64_t>(experts.size()), [&](int64_t e) {
    for (const BoundPiece* piece : *experts[static_cast<size_t>(e)]) {
      packing.copy_piece(slot, *piece, out);
    }
  });
}

// Decodes every bound piece once. With `weights`, values land in their slots (the FP4 experts of
// packed layers are copied in NVFP4 and decoded only for the scan); without, everything is
// decoded, scanned and dropped.
Status decode_all(const Binding& binding, const ModelConfig& config, const LoadOptions& options,
                  const ExpertPacking& packing, ModelWeights* weights, LoadReport& report) {
  size_t n_total = 0, n_done = 0;
  for (const BoundSlot& slot : binding.slots) n_total += slot.pieces.size();
  LayerCompletion completion(binding, config, weights ? options.on_layer_loaded : nullptr);
  std::vector<int64_t> scratch_ids;
  for (const BoundSlot& slot : binding.slots) {
    const bool integer = slot_spec(slot.param).storage == Storage::kIndex;
    std::optional<format::Nvfp4Tensor>* nvfp4 = nullptr;
    Tensor* dst = nullptr;
    const WeightRef field = weights ? weight_ref(*weights, slot.param, slot.layer) : WeightRef{};
    if (weights && kept_fp8(slot, options)) {
      // Its values are only scanned.
      DSV4_ASSIGN_OR_RETURN(*field.linear, copy_fp8_slot(slot));
    } else if (weights && packing.packed(slot)) {
      nvfp4 = field.nvfp4;
      DSV4_ASSIGN_OR_RETURN(*nvfp4, packing.allocate(slot));
    } else if (weights) {
      dst = field.values;
      DSV4_ASSIGN_OR_RETURN(*dst, Tensor::empty(integer ? DType::kI64 : DType::kF32, slot.shape));
    }
    // A float slot's pieces decode together on the threads, then report in order.
    std::vector<PieceScan> scans;
    if (!integer) {
      std::vector<const BoundPiece*> pieces;
      std::vector<float*> outs;
      for (const BoundPiece& piece : slot.pieces) {
        pieces.push_back(&piece);
        outs.push_back(dst ? dst->data_as<float>() + piece.offset : nullptr);
      }
      scans = decode_to_f32(pieces, outs);
    }
    if (nvfp4) copy_packed_pieces(slot, packing, nvfp4->value());
    for (size_t i = 0; i < slot.pieces.size(); ++i) {
      const BoundPiece& piece = slot.pieces[i];
      if (integer) {
        scratch_ids.resize(static_cast<size_t>(piece.shape.numel()));
        int64_t* out = dst ? dst->data_as<int64_t>() + piece.offset : scratch_ids.data();
        decode_to_i64(piece, out);
        scan_i64(slot, piece, out, config.n_routed_experts, report);
      } else {
        report_scan(slot, piece, scans[i], report);
      }
      if (options.progress) options.progress(++n_done, n_total);
    }
    if (weights) DSV4_RETURN_IF_ERROR(completion.slot_done(slot.layer, *weights));
  }
  return weights ? completion.finish(*weights) : ok_status();
}

struct Opened {
  ModelConfig config;
  format::CheckpointFiles files;
  Binding binding;
};

Result<Opened> open_and_bind(const std::string& model_dir, const LoadOptions& options) {
  DSV4_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(model_dir));
  DSV4_RETURN_IF_ERROR(validate(config));
  DSV4_ASSIGN_OR_RETURN(format::CheckpointFiles files, format::CheckpointFiles::open(model_dir));
  const FileOf file_of = [&files](std::string_view name) { return files.file_of(name); };
  DSV4_ASSIGN_OR_RETURN(Binding binding,
                        bind_tensors(files.tensors(), config, options.force_convention, file_of));
  return Opened{std::move(config), std::move(files), std::move(binding)};
}

// What a load of the bound checkpoint will hold (LoadOptions::before_decode's plan).
LoadPlan plan_load(const Opened& opened, const ExpertPacking& packing, const LoadReport& report,
                   const LoadOptions& options) {
  LoadPlan plan = plan_load(opened.binding, packing, options);
  plan.first_problem = report.first_problem();
  plan.n_layer = opened.config.n_layer;
  return plan;
}

}  // namespace

Result<LoadedModel> load_model(const std::string& model_dir, const LoadOptions& options) {
  DSV4_ASSIGN_OR_RETURN(Opened opened, open_and_bind(model_dir, options));
  LoadedModel model;
  model.report = std::move(opened.binding.report);
  ModelWeights& w = model.weights;
  w.config = opened.config;
  make_blocks(w, model.report.n_mtp_blocks);
  const ExpertPacking packing =
      ExpertPacking::plan(opened.binding, w.config, options.keep_fp4_packed, model.report);
  if (options.before_decode) {
    DSV4_RETURN_IF_ERROR(options.before_decode(plan_load(opened, packing, model.report, options)));
  }
  DSV4_RETURN_IF_ERROR(decode_all(opened.binding, w.config, options, packing, &w, model.report));
  return model;
}

Result<LoadPlan> plan_model(const std::string& model_dir, const LoadOptions& options) {
  DSV4_ASSIGN_OR_RETURN(Opened opened, open_and_bind(model_dir, options));
  LoadReport& report = opened.binding.report;
  const ExpertPacking packing =
      ExpertPacking::plan(opened.binding, opened.config, options.keep_fp4_packed, report);
  return plan_load(opened, packing, report, options);
}

Result<LoadReport> check_model(const std::string& model_dir, const LoadOptions& options) {
  DSV4_ASSIGN_OR_RETURN(Opened opened, open_and_bind(model_dir, options));
  LoadReport report = std::move(opened.binding.report);
  const ExpertPacking packing =
      ExpertPacking::plan(opened.binding, opened.config, options.keep_fp4_packed, report);
  DSV4_RETURN_IF_ERROR(
      decode_all(opened.binding, opened.config, options, packing, nullptr, report));
  return report;
}

}  // namespace dsv4::checkpoint
