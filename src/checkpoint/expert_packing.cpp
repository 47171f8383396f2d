#include "checkpoint/expert_packing.h"

#include <string>

#include "checkpoint/decode.h"

namespace dsv4::checkpoint {
namespace {

bool is_expert_stack(const BoundSlot& slot) {
  return slot_spec(slot.param).storage == Storage::kExperts;
}

// The form every piece of the slot has, or kDense when they differ (never packed then).
StorageForm common_form(const BoundSlot& slot) {
  if (slot.pieces.empty()) return StorageForm::kDense;
  const StorageForm form = slot.pieces.front().form;
  for (const BoundPiece& piece : slot.pieces) {
    if (piece.form != form) return StorageForm::kDense;
  }
  return form;
}

// Whether a slot in `form` can be held packed; MXFP4 slots get their plan in `plans`, and a
// note when they do not fit.
bool packable(const BoundSlot& slot, StorageForm form,
              std::map<std::pair<Param, int64_t>, Mxfp4AsNvfp4>& plans, LoadReport& report) {
  if (form == StorageForm::kNvfp4) return true;
  if (form != StorageForm::kMxfp4) return false;
  Mxfp4AsNvfp4 plan = plan_mxfp4_as_nvfp4(slot);
  const bool fits = plan.unfit.empty();
  if (!fits) {
    report.notes.push_back(slot_label(slot.param, slot.layer) +
                           ": MXFP4 routed experts held in f32, not NVFP4: " + plan.unfit);
  }
  plans.emplace(std::make_pair(slot.param, slot.layer), std::move(plan));
  return fits;
}

}  // namespace

ExpertPacking ExpertPacking::plan(const Binding& binding, const ModelConfig& config,
                                  bool keep_packed, LoadReport& report) {
  ExpertPacking packing;
  packing.packed_layers_.assign(static_cast<size_t>(config.n_layer + config.n_mtp_layers), false);
  if (!keep_packed) return packing;
  std::vector<int> n_packable(packing.packed_layers_.size(), 0);
  std::vector<StorageForm> first_form(packing.packed_layers_.size(), StorageForm::kDense);
  for (const BoundSlot& slot : binding.slots) {
    if (!is_expert_stack(slot)) continue;
    const StorageForm form = common_form(slot);
    const size_t l = static_cast<size_t>(slot.layer);
    if (n_packable[l] == 1 && form != first_form[l]) continue;  // w13 and w2 must agree
    if (packable(slot, form, packing.from_mxfp4_, report)) {
      first_form[l] = form;
      ++n_packable[l];
    }
  }
  size_t n_converted = 0;
  for (size_t l = 0; l < n_packable.size(); ++l) {
    packing.packed_layers_[l] = n_packable[l] == 2;
    if (packing.packed_layers_[l] && first_form[l] == StorageForm::kMxfp4) ++n_converted;
  }
  if (n_converted > 0) {
    report.notes.push_back(
        "routed experts of " + std::to_string(n_converted) +
        " layer(s) held as NVFP4, converted from MXFP4 with every value unchanged");
  }
  return packing;
}

bool ExpertPacking::packed(const BoundSlot& slot) const {
  return is_expert_stack(slot) && slot.layer >= 0 &&
         packed_layers_[static_cast<size_t>(slot.layer)];
}

ExpertPacking::StackShapes ExpertPacking::stack_shapes(const BoundSlot& slot) {
  const int64_t g = slot.shape[0], n = slot.shape[1], k = slot.shape[2];
  return {{g, n, k / 2}, {g, n, k / format::kNvfp4BlockSize}, {g}};
}

int64_t ExpertPacking::packed_bytes(const BoundSlot& slot) {
  return bulk_bytes(slot) +
         static_cast<int64_t>(sizeof(float)) * stack_shapes(slot).per_matrix.numel();
}

int64_t ExpertPacking::bulk_bytes(const BoundSlot& slot) {
  const StackShapes shapes = stack_shapes(slot);
  return shapes.packed.numel() + shapes.block_scale.numel();
}

Result<format::Nvfp4Tensor> ExpertPacking::allocate(const BoundSlot& slot) const {
  const StackShapes shapes = stack_shapes(slot);
  format::Nvfp4Tensor t;
  DSV4_ASSIGN_OR_RETURN(t.packed, Tensor::empty(DType::kU8, shapes.packed));
  DSV4_ASSIGN_OR_RETURN(t.block_scale, Tensor::empty(DType::kU8, shapes.block_scale));
  DSV4_ASSIGN_OR_RETURN(t.global_scale, Tensor::empty(DType::kF32, shapes.per_matrix));
  bool every_input_scale = true;
  for (const BoundPiece& piece : slot.pieces)
    every_input_scale &= piece.stored.input_scale != nullptr;
  if (every_input_scale) {
    const int64_t g = shapes.per_matrix.numel();
    DSV4_ASSIGN_OR_RETURN(t.input_scale, Tensor::empty(DType::kF32, shapes.per_matrix));
    for (int64_t i = 0; i < g; ++i) t.input_scale.data_as<float>()[i] = 0.0f;
  }
  return t;
}

void ExpertPacking::copy_piece(const BoundSlot& slot, const BoundPiece& piece,
                               format::Nvfp4Tensor& out) const {
  if (piece.form == StorageForm::kMxfp4) {
    copy_mxfp4_piece_as_nvfp4(slot, piece, from_mxfp4_.at({slot.param, slot.layer}), out);
    return;
  }
  const PieceOrigin origin = piece_origin(slot, piece);
  copy_nvfp4_piece(piece, origin.matrix, origin.row, out);
}

}  // namespace dsv4::checkpoint
