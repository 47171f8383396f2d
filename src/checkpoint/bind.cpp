// bind_tensors: every checkpoint key to exactly one slot (or ignored for a stated reason), every
// slot filled exactly once, by whole-name lookups in the expected key set of tensor_names.h.
#include <algorithm>
#include <cstring>

#include "checkpoint/binding.h"

namespace dsv4::checkpoint {
namespace {

// found[slot][form][piece]: the tensors each expected piece received.
using Found = std::vector<std::vector<std::vector<StoredTensor>>>;

const PieceRef* lookup(const ExpectedKeys& keys, const std::string& name) {
  const auto it = keys.by_name.find(name);
  return it == keys.by_name.end() ? nullptr : &it->second;
}

// The primary piece a sibling key belongs to, or nullptr.
const PieceRef* lookup_sibling(const ExpectedKeys& keys, std::string_view key, SiblingRole* role) {
  for (const SiblingMatch& match : sibling_candidates(key)) {
    if (const PieceRef* ref = lookup(keys, match.weight_name)) {
      *role = match.role;
      return ref;
    }
  }
  return nullptr;
}

size_t count_matches(const ExpectedKeys& keys,
                     const std::vector<const format::TensorInfo*>& tensors) {
  size_t n = 0;
  SiblingRole role;
  for (const format::TensorInfo* t : tensors) {
    if (lookup(keys, t->name) || lookup_sibling(keys, t->name, &role)) ++n;
  }
  return n;
}

// The convention whose expected names cover the most keys; ties go to the earlier one.
// (The MTP blocks' names are the same in every convention: they decide nothing.)
Result<ExpectedKeys> choose_convention(const std::vector<const format::TensorInfo*>& tensors,
                                       const ModelConfig& config,
                                       std::optional<NamingConvention> force, bool with_mtp) {
  if (force) return expected_keys(config, *force, with_mtp);
  std::optional<ExpectedKeys> best;
  size_t best_matches = 0;
  for (NamingConvention convention : kAllConventions) {
    ExpectedKeys keys = expected_keys(config, convention, with_mtp);
    const size_t matches = count_matches(keys, tensors);
    if (matches > best_matches) {
      best_matches = matches;
      best = std::move(keys);
    }
  }
  if (!best) {
    return not_found("no tensor name matches the official, pretrained or state_dict naming of a " +
                     std::to_string(config.n_layer) + "-layer model" +
                     (tensors.empty() ? std::string(" (the checkpoint is empty)")
                                      : "; first key: " + tensors.front()->name));
  }
  return std::move(*best);
}

const format::TensorInfo** sibling_slot(StoredTensor& stored, SiblingRole role) {
  switch (role) {
    case SiblingRole::kBlockScale:
      return &stored.block_scale;
    case SiblingRole::kGlobalScale:
      return &stored.global_scale;
    case SiblingRole::kInputScale:
      return &stored.input_scale;
  }
  DSV4_UNREACHABLE("bad role");
}

// Sorts every key into found / ignored / unbound.
void route_keys(const std::vector<const format::TensorInfo*>& tensors, const ExpectedKeys& keys,
                const ModelConfig& config, const FileOf& file_of, Found& found,
                LoadReport& report) {
  for (const format::TensorInfo* t : tensors) {
    ++report.dtype_census[std::string(dtype_name(t->dtype))];
    SiblingRole role = SiblingRole::kBlockScale;
    const PieceRef* ref = lookup(keys, t->name);
    const bool is_weight = ref != nullptr;
    if (!ref) ref = lookup_sibling(keys, t->name, &role);
    if (ref) {
      StoredTensor& stored = found[ref->slot_idx][ref->form_idx][ref->piece_idx];
      const format::TensorInfo** field = is_weight ? &stored.weight : sibling_slot(stored, role);
      if (*field) {
        report.problems.push_back("two tensors for one role: " + (*field)->name + " and " +
                                  t->name + " (in " + file_of(t->name) + ")");
      }
      *field = t;
    } else if (std::optional<std::string> reason = ignore_reason(t->name, config)) {
      report.ignored.push_back({t->name, *reason});
    } else {
      report.unbound_keys.push_back(t->name);
      report.problems.push_back("unexpected tensor " + t->name + " (in " + file_of(t->name) +
                                "): no parameter of this config has that name in the " +
                                std::string(convention_name(keys.convention)) + " naming");
    }
  }
}

bool any_tensor(const StoredTensor& s) {
  return s.weight || s.block_scale || s.global_scale || s.input_scale;
}

std::string first_names(const std::vector<std::string>& names) {
  std::string out = names.front();
  if (names.size() > 1) out += " and " + std::to_string(names.size() - 1) + " more";
  return out;
}

float scalar_f32(const format::TensorInfo& t) {
  float v;
  std::memcpy(&v, t.data, sizeof v);
  return v;
}

// NVFP4 w1 and w3 of one expert feed one fused w13 GEMM, which applies one global scale to both
// halves (§5 item 18): they must be equal, or one half is silently mis-scaled.
void check_gate_up_scales(const BoundSlot& slot, std::vector<std::string>& problems) {
  if (slot.stacking != Stacking::kPerExpertGateUp) return;
  for (size_t i = 0; i + 1 < slot.pieces.size(); i += 2) {
    const BoundPiece& gate = slot.pieces[i];
    const BoundPiece& up = slot.pieces[i + 1];
    if (gate.form != StorageForm::kNvfp4 || up.form != StorageForm::kNvfp4) continue;
    const format::TensorInfo* a = gate.stored.global_scale;
    const format::TensorInfo* b = up.stored.global_scale;
    if (!a->data || !b->data) continue;  // header-only binding: no values to compare
    if (std::memcmp(a->data, b->data, sizeof(float)) != 0) {
      problems.push_back(
          slot_label(slot.param, slot.layer) + " expert " + std::to_string(gate.expert_idx) +
          ": w1 and w3 NVFP4 global scales differ (" + std::to_string(scalar_f32(*a)) + " in " +
          a->name + ", " + std::to_string(scalar_f32(*b)) + " in " + b->name +
          "); the fused w13 GEMM applies one scale to both halves");
    }
  }
}

size_t n_tensors(const StoredTensor& s) {
  return (s.weight != nullptr) + (s.block_scale != nullptr) + (s.global_scale != nullptr) +
         (s.input_scale != nullptr);
}

// Indices of the forms of which at least one tensor was found.
std::vector<size_t> present_forms(const std::vector<std::vector<StoredTensor>>& found) {
  std::vector<size_t> present;
  for (size_t f = 0; f < found.size(); ++f) {
    if (std::any_of(found[f].begin(), found[f].end(), any_tensor)) present.push_back(f);
  }
  return present;
}

void report_missing_slot(const ExpectedSlot& expected, const std::string& label,
                         LoadReport& report) {
  const std::vector<PieceName>& first = expected.forms[0].pieces;
  std::string message = label + ": missing (expected key " + first[0].name;
  if (first.size() > 1) message += " and " + std::to_string(first.size() - 1) + " more";
  for (size_t f = 1; f < expected.forms.size(); ++f)
    message += ", or " + expected.forms[f].pieces[0].name;
  report.unbound_slots.push_back(label);
  report.problems.push_back(message + ")");
}

void report_bound_twice(const ExpectedSlot& expected,
                        const std::vector<std::vector<StoredTensor>>& found,
                        const std::vector<size_t>& present, const std::string& label,
                        LoadReport& report) {
  std::string message = label + ": bound twice, by";
  for (size_t f : present) {
    const auto it = std::find_if(found[f].begin(), found[f].end(), any_tensor);
    message += (f == present.front() ? " " : " and by ") +
               expected.forms[f].pieces[static_cast<size_t>(it - found[f].begin())].name;
  }
  report.problems.push_back(message + " (exactly one form may be present)");
}

// The pieces of the one present form, validated; nullopt (with problems) when any is missing
// or malformed.
std::optional<BoundSlot> bind_form(const ExpectedSlot& expected, const SlotForm& form,
                                   const std::vector<StoredTensor>& found,
                                   const ModelConfig& config, const FileOf& file_of,
                                   const std::string& label, LoadReport& report) {
  BoundSlot slot{expected.param,
                 expected.layer,
                 slot_shape(expected.param, config, expected.layer),
                 form.stacking,
                 {}};
  std::vector<std::string> missing;
  const size_t n_problems = report.problems.size();
  for (size_t p = 0; p < form.pieces.size(); ++p) {
    const PieceName& name = form.pieces[p];
    if (!found[p].weight) {
      missing.push_back(name.name);
      continue;
    }
    BoundPiece piece{name.name, file_of(name.name), name.expert_idx,    name.half, {},
                     0,         found[p],           StorageForm::kDense};
    place_piece(form.stacking, slot.shape, piece);
    Result<StorageForm> storage = validate_piece(slot_spec(expected.param), expected.layer, piece);
    if (!storage.ok()) {
      report.problems.push_back(storage.status().message());
      continue;
    }
    piece.form = *storage;
    slot.pieces.push_back(std::move(piece));
  }
  if (!missing.empty()) {
    report.unbound_slots.push_back(label);
    report.problems.push_back(label + ": missing key " + first_names(missing));
  }
  if (report.problems.size() != n_problems) return std::nullopt;
  check_gate_up_scales(slot, report.problems);  // pieces are complete: (gate, up) pairs in order
  if (report.problems.size() != n_problems) return std::nullopt;
  return slot;
}

// Turns one expected slot and what was found for it into a BoundSlot, or problems.
std::optional<BoundSlot> bind_slot(const ExpectedSlot& expected,
                                   const std::vector<std::vector<StoredTensor>>& found,
                                   const ModelConfig& config, const FileOf& file_of,
                                   LoadReport& report) {
  const std::string label = slot_label(expected.param, expected.layer);
  const std::vector<size_t> present = present_forms(found);
  if (present.empty()) {
    report_missing_slot(expected, label, report);
    return std::nullopt;
  }
  if (present.size() > 1) {
    report_bound_twice(expected, found, present, label, report);
    return std::nullopt;
  }
  const size_t f = present.front();
  return bind_form(expected, expected.forms[f], found[f], config, file_of, label, report);
}

// §3.1.4's count for the storage found on layer 0: tensors per FP8-able linear (wq_a) and per
// routed-expert matrix (expert 0's w1).
void count_official(const Binding& binding, const ModelConfig& config, LoadReport& report) {
  int per_linear = 0, per_expert_matrix = 0;
  for (const BoundSlot& slot : binding.slots) {
    if (slot.layer != 0 || slot.pieces.empty()) continue;
    if (slot.param == Param::kWqA) per_linear = static_cast<int>(n_tensors(slot.pieces[0].stored));
    if (slot.param == Param::kExpertsW13) {
      per_expert_matrix = static_cast<int>(n_tensors(slot.pieces[0].stored));
    }
  }
  if (per_linear == 0 || per_expert_matrix == 0)
    return;  // layer 0 did not bind: nothing to predict
  report.official_count_expected = official_tensor_count(config, per_linear, per_expert_matrix);
  report.official_count_found = report.n_keys - report.ignored.size() - report.n_mtp_bound;
}

}  // namespace

void place_piece(Stacking stacking, const Shape& slot, BoundPiece& p) {
  if (stacking == Stacking::kWhole) {
    p.shape = slot;
    return;
  }
  const int64_t rows = slot[1], cols = slot[2];  // [E, rows, cols]
  if (stacking == Stacking::kPerExpert) {
    p.shape = {rows, cols};
    p.offset = p.expert_idx * rows * cols;
  } else {  // gate rows then up rows of expert e
    p.shape = {rows / 2, cols};
    p.offset = (p.expert_idx * rows + p.half * (rows / 2)) * cols;
  }
}

PieceMatrices piece_matrices(const BoundPiece& piece) {
  const Shape& s = piece.shape;
  const int64_t n = s[s.rank - 2], k = s[s.rank - 1];
  return {s.numel() / (n * k), n, k};
}

PieceOrigin piece_origin(const BoundSlot& slot, const BoundPiece& piece) {
  if (slot.stacking == Stacking::kWhole) return {};
  return {piece.expert_idx, piece.half * piece.shape[0]};
}

std::string_view storage_form_name(StorageForm form) {
  switch (form) {
    case StorageForm::kDense:
      return "dense float";
    case StorageForm::kFp8Block:
      return "fp8 e4m3, 128x128 block scales";
    case StorageForm::kMxfp4:
      return "fp4 e2m1, e8m0 scale per 32";
    case StorageForm::kNvfp4:
      return "nvfp4 e2m1, e4m3 scale per 16 + global";
    case StorageForm::kInteger:
      return "integer";
  }
  DSV4_UNREACHABLE("bad storage form");
}

Result<Binding> bind_tensors(const std::vector<const format::TensorInfo*>& tensors,
                             const ModelConfig& config, std::optional<NamingConvention> force,
                             const FileOf& file_of) {
  // A checkpoint holds all of its MTP blocks or none (then speculative decoding is unavailable).
  const bool with_mtp = config.n_mtp_layers > 0 &&
                        std::any_of(tensors.begin(), tensors.end(),
                                    [](const format::TensorInfo* t) { return is_mtp_key(t->name); });
  DSV4_ASSIGN_OR_RETURN(const ExpectedKeys keys,
                        choose_convention(tensors, config, force, with_mtp));
  Binding binding;
  LoadReport& report = binding.report;
  report.n_mtp_blocks = with_mtp ? static_cast<size_t>(config.n_mtp_layers) : 0;
  report.convention = keys.convention;
  report.n_keys = tensors.size();
  Found found(keys.slots.size());
  for (size_t s = 0; s < keys.slots.size(); ++s) {
    found[s].resize(keys.slots[s].forms.size());
    for (size_t f = 0; f < found[s].size(); ++f)
      found[s][f].resize(keys.slots[s].forms[f].pieces.size());
  }
  route_keys(tensors, keys, config, file_of, found, report);
  for (size_t s = 0; s < keys.slots.size(); ++s) {
    for (const auto& form : found[s]) {
      for (const StoredTensor& stored : form) {
        report.n_bound += n_tensors(stored);
        if (keys.slots[s].layer >= config.n_layer) report.n_mtp_bound += n_tensors(stored);
      }
    }
    std::optional<BoundSlot> slot = bind_slot(keys.slots[s], found[s], config, file_of, report);
    if (!slot) continue;
    for (const BoundPiece& piece : slot->pieces) {
      report.bound_per_category[std::string(slot_spec(slot->param).category)] +=
          n_tensors(piece.stored);
      ++report.storage_census[std::string(storage_form_name(piece.form))];
    }
    binding.slots.push_back(std::move(*slot));
  }
  if (keys.convention == NamingConvention::kOfficial) count_official(binding, config, report);
  return binding;
}

}  // namespace dsv4::checkpoint
