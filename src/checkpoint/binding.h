// Binding: which checkpoint tensors fill which parameter slot, before any byte is decoded.
// bind_tensors works on names, dtypes and shapes only (so a 145,116-tensor header list can be
// bound without data); decode.h turns a bound piece into values, loader.cpp puts them in
// ModelWeights.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/loader.h"
#include "checkpoint/tensor_names.h"
#include "format/safetensors.h"

namespace dsv4::checkpoint {

// How one checkpoint tensor stores its values (§3.1.5, §3.1.6, §3.3).
enum class StorageForm {
  kDense,     // f32 / f16 / bf16 at the logical shape
  kFp8Block,  // f8_e4m3 + one e8m0 or f32 scale per 128×128 tile
  kMxfp4,     // packed e2m1 (i8/u8, low nibble first) + one e8m0 scale per 32 along K
  kNvfp4,     // packed e2m1 (u8) + one e4m3 scale per 16 along K + f32 global (+ input) scale
  kInteger,   // any integer dtype (tid2eid)
};
std::string_view storage_form_name(StorageForm form);

// A checkpoint tensor and its quantization siblings.
struct StoredTensor {
  const format::TensorInfo* weight = nullptr;
  const format::TensorInfo* block_scale = nullptr;
  const format::TensorInfo* global_scale = nullptr;
  const format::TensorInfo* input_scale = nullptr;
};

// One tensor's share of a slot: its decoded values go to elements [offset, offset + numel).
struct BoundPiece {
  std::string name;  // the primary checkpoint name
  std::string file;  // the shard it came from (messages)
  int64_t expert_idx = -1;
  int half = 0;        // 0 gate (w1) / whole, 1 up (w3)
  Shape shape;         // logical shape of the piece, e.g. [F, D] for one expert's gate
  int64_t offset = 0;  // element offset inside the slot tensor
  StoredTensor stored;
  StorageForm form = StorageForm::kDense;
};

struct BoundSlot {
  Param param;
  int64_t layer = -1;
  Shape shape;  // logical shape of the whole slot
  Stacking stacking = Stacking::kWhole;
  std::vector<BoundPiece> pieces;
};

// Sets the logical shape and element offset of `piece` (its expert_idx and half set) inside a
// slot of shape `slot` stored as `stacking`.
void place_piece(Stacking stacking, const Shape& slot, BoundPiece& piece);

// A piece as n_matrices matrices of n rows and k columns, back to back (a plain linear is one).
struct PieceMatrices {
  int64_t n_matrices = 1, n = 0, k = 0;
};
PieceMatrices piece_matrices(const BoundPiece& piece);

// The matrix and first row a piece covers inside its slot seen as a stack [G, N, K] (a
// per-expert gate or up piece fills half an expert's rows).
struct PieceOrigin {
  int64_t matrix = 0, row = 0;
};
PieceOrigin piece_origin(const BoundSlot& slot, const BoundPiece& piece);

struct Binding {
  std::vector<BoundSlot> slots;  // only slots bound without problems
  LoadReport report;             // convention, counts, census, ignored keys, problems
};

// The file a tensor came from, for messages.
using FileOf = std::function<std::string(std::string_view name)>;

// Detects (or takes `force`) the convention, expands the expected key set of `config`, and binds
// every tensor. Problems (unknown keys, missing or doubly bound slots, wrong dtype or shape,
// mismatched NVFP4 w1/w3 global scales) go to report.problems, one sentence each; the Result
// fails only when no convention matches at all.
Result<Binding> bind_tensors(const std::vector<const format::TensorInfo*>& tensors,
                             const ModelConfig& config, std::optional<NamingConvention> force,
                             const FileOf& file_of);

// Classifies how `piece` is stored and checks every dtype and shape against its logical shape
// (validate.cpp). The message names slot, expectation, what was found, key and file.
Result<StorageForm> validate_piece(const SlotSpec& spec, int64_t layer, const BoundPiece& piece);

}  // namespace dsv4::checkpoint
