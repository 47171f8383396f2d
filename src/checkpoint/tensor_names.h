// THE weight table: one row per parameter slot of ModelWeights (its official checkpoint name,
// its field, its shape rule, which layers hold it, how it may be stored), and rename rules that
// derive the other naming conventions' names from the official one (../shared/docs/
// deepseek_v4.md §3). Binding, validation, the device copy and the size plans all walk this one
// table (block_slots, weight_ref). Checkpoint strings live only in tensor_names.cpp, as data.
//
// Binding never tests substrings (the rename rules act once, in order, on each official name
// while the name set is expanded, never on a checkpoint key): from the config we expand the
// complete set of names a checkpoint of one convention must hold (layer and expert indices
// substituted as integers) and look every key up by its whole name in a hash map. So names that
// share pieces - `shared_experts` vs `experts`, `attn.wkv` vs `attn.compressor.wkv` vs
// `attn.indexer.compressor.wkv`, `gate` vs `gate_up_proj` - cannot capture each other.
//
// Dimension letters: D model width, V vocab, M hc_mult, H heads, Dh head dim, Q q_lora_rank,
// G o_groups, R o_lora_rank, E routed experts, K experts per token, F expert width,
// HI/DI indexer heads/dim, m compress ratio, c = 2 (CSA overlap) or 1 (HCA).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"
#include "base/tensor.h"
#include "checkpoint/config.h"
#include "checkpoint/weights.h"

namespace dsv4::checkpoint {

enum class NamingConvention {
  kOfficial,    // layers.N.attn.wq_a.weight, hc_attn_fn, embed.weight, head.weight
  kPretrained,  // transformers save_pretrained: model.layers.N.attn..., model.hc_head.hc_fn
  kStateDict,   // transformers in-memory / ModelOpt: model.layers.N.self_attn.q_a_proj, lm_head
};
inline constexpr NamingConvention kAllConventions[] = {
    NamingConvention::kOfficial, NamingConvention::kPretrained, NamingConvention::kStateDict};

std::string_view convention_name(NamingConvention convention);
// "official" | "pretrained" | "state_dict"; nullopt for anything else.
std::optional<NamingConvention> parse_convention(std::string_view name);

// Every parameter slot of ModelWeights (field paths in weights.h).
// clang-format off
enum class Param {
  kEmbed, kHead, kNorm, kHcHeadFn, kHcHeadBase, kHcHeadScale,
  kHcAttnFn, kHcAttnBase, kHcAttnScale, kHcFfnFn, kHcFfnBase, kHcFfnScale,
  kAttnNorm, kFfnNorm,
  kAttnSink, kWqA, kQNorm, kWqB, kWkv, kKvNorm, kWoA, kWoB,
  kCompressorWkv, kCompressorWgate, kCompressorApe, kCompressorNorm,
  kIndexerWqB, kIndexerWeightsProj,
  kIndexerCompressorWkv, kIndexerCompressorWgate, kIndexerCompressorApe, kIndexerCompressorNorm,
  kGate, kGateBias, kGateTid2eid,
  kSharedW1, kSharedW3, kSharedW2,
  kExpertsW13, kExpertsW2,
  kMtpEProj, kMtpHProj, kMtpEnorm, kMtpHnorm, kMtpNorm, kMtpHcHeadFn, kMtpHcHeadBase,
  kMtpHcHeadScale,
};
// clang-format on
inline constexpr int kNumParams = static_cast<int>(Param::kMtpHcHeadScale) + 1;

// Which layers hold a slot.
enum class Scope {
  kGlobal,  // once per model
  kEveryLayer,
  kCompressed,  // CSA and HCA layers (compress ratio > 0)
  kCsa,         // CSA layers only (the lightning indexer)
  kHashLayer,   // hash-routed layers (tid2eid)
  kScoreLayer,  // score-routed layers (selection bias)
  kMtp,         // MTP blocks only (layers n_layer ..): their projections, norms and hc_head
};

// How a slot may be stored.
enum class Storage {
  kFloat,    // f32/f16/bf16 only, exact shape (norms, hc, sinks, ape, bias)
  kMatrix,   // [N, K] float matrix read whole (embedding, router): float or block-quantized
  kLinear,   // [N, K] linear weight (a LinearWeight field): like kMatrix, FP8 may stay FP8
  kExperts,  // [E, N, K] stacked routed experts: like kMatrix, possibly one tensor per expert
  kIndex,    // any integer dtype (tid2eid)
};

// A slot's field in ModelWeights, typed by what it holds: what the loader fills and
// copy_weights places (to_device.h).
struct WeightRef {
  Tensor* values = nullptr;        // the values (of a LinearWeight too; of an f32 expert stack)
  LinearWeight* linear = nullptr;  // Storage::kLinear: the LinearWeight itself
  // A Tensor only kernels::linear reads (hc fn): like a linear's values, bf16 on a GPU when
  // every value is one.
  bool read_by_linear = false;
  std::optional<format::Nvfp4Tensor>* nvfp4 = nullptr;  // kExperts: the stack's NVFP4 form
  Tensor* static_input_scale = nullptr;                 // kExperts: its W4A4 activation scale
};

// Where a slot lives: in the model (kGlobal), in a block (a layer, or an MTP block's V4 layer),
// or in an MTP block's own weights (kMtp). Exactly one is set, by the scope.
struct WeightHome {
  WeightRef (*of_model)(ModelWeights&) = nullptr;
  WeightRef (*of_block)(LayerWeights&) = nullptr;
  WeightRef (*of_mtp)(MtpWeights&) = nullptr;
  constexpr WeightHome(WeightRef (*f)(ModelWeights&)) : of_model(f) {}  // NOLINT: a table cell
  constexpr WeightHome(WeightRef (*f)(LayerWeights&)) : of_block(f) {}  // NOLINT
  constexpr WeightHome(WeightRef (*f)(MtpWeights&)) : of_mtp(f) {}      // NOLINT
};

// The dimensions slot shapes are written in, for one config and block (tensor_names.cpp).
struct SlotDims;

// One row per weight: everything the loader, validation, the device copy and expert offload
// need to know about it. The other conventions' names derive from `name` by rename rules.
struct SlotSpec {
  Param param;
  std::string_view name;      // official name; {L} the layer (an MTP block's index), {E} expert
  std::string_view path;      // field path in weights.h, e.g. "attn.wq_a"
  std::string_view category;  // for the report's per-category counts
  Scope scope;
  Storage storage;
  DType release_dtype;  // as the official release stores it (kF8E4M3: with 128 × 128 scales)
  Shape (*shape)(const SlotDims& dims);  // the logical (decoded) shape
  WeightHome home;
  std::string_view name_up = {};  // gate/up expert stacks: the up (w3) name beside `name` (w1)
};
const SlotSpec& slot_spec(Param param);
// Whether layer `layer` (or the model, for kGlobal) has the slot. Layers n_layer .. n_layer +
// n_mtp_layers − 1 are the MTP blocks.
bool slot_present(const SlotSpec& spec, const ModelConfig& config, int64_t layer);
// The slots block `layer` holds (-1: the model's globals), in table order: the one walk that
// binding, the device copy and the size plans share.
std::vector<const SlotSpec*> block_slots(const ModelConfig& config, int64_t layer);
// The logical (decoded) shape of a slot for this config and layer.
Shape slot_shape(Param param, const ModelConfig& config, int64_t layer);
// "layer 3 attn.wq_a" or "hc_head.fn": how messages name a slot.
std::string slot_label(Param param, int64_t layer);

// The field of `param` in `weights` for block `layer`, which make_blocks has made.
WeightRef weight_ref(ModelWeights& weights, Param param, int64_t layer);
// Sizes weights.layers (config.n_layer) and weights.mtp (n_mtp_blocks), and gives each block
// the compressor and indexer its attention type has: every field weight_ref reaches.
void make_blocks(ModelWeights& weights, size_t n_mtp_blocks);

// How checkpoint tensors make up a slot.
enum class Stacking {
  kWhole,            // one tensor is the whole slot
  kPerExpert,        // one [N, K] tensor per expert e, stacked on a new dim 0
  kPerExpertGateUp,  // per expert e: gate [F, D] then up [F, D] -> rows e·2F.. of [E, 2F, D]
};

// One checkpoint tensor that fills all or part of a slot.
struct PieceName {
  std::string name;
  int64_t expert_idx = -1;  // -1: not per expert
  int half = 0;             // kPerExpertGateUp: 0 gate (w1), 1 up (w3)
};

// One way a slot can appear in a checkpoint; a slot has one form or a few alternatives
// (fused vs per-expert experts; the old and new transformers name of indexer.weights_proj).
// Exactly one form must be present.
struct SlotForm {
  Stacking stacking = Stacking::kWhole;
  std::vector<PieceName> pieces;
};

struct ExpectedSlot {
  Param param;
  int64_t layer = -1;  // -1 for globals
  std::vector<SlotForm> forms;
};

// Where a checkpoint name lands: slot, form and piece indices into ExpectedKeys::slots.
struct PieceRef {
  uint32_t slot_idx = 0;
  uint16_t form_idx = 0;
  uint32_t piece_idx = 0;
};

// The complete name set of one convention for one config.
struct ExpectedKeys {
  NamingConvention convention = NamingConvention::kOfficial;
  std::vector<ExpectedSlot> slots;
  std::unordered_map<std::string, PieceRef> by_name;  // every piece name of every form
};
// With `with_mtp`, the MTP blocks' names too: in every convention the official ones
// (`mtp.N.<inner name>`), since transformers drops the MTP layers on save and a converter that
// keeps them beside a save_pretrained model writes them as the release does.
ExpectedKeys expected_keys(const ModelConfig& config, NamingConvention convention,
                           bool with_mtp = false);
// Whether `key` names a tensor of an MTP block in the naming expected_keys binds.
bool is_mtp_key(std::string_view key);

// Sibling tensors of a quantized weight. The block scale appears under several names
// (official `.scale`, ModelOpt `.weight_scale`, transformers' FP8 `.weight_scale_inv`); fused
// 3-D parameters without a `.weight` suffix take underscore suffixes (`gate_up_proj_weight_scale`).
enum class SiblingRole { kBlockScale, kGlobalScale, kInputScale };
struct SiblingMatch {
  std::string weight_name;  // the primary name this sibling belongs to
  SiblingRole role;
};
// Every reading of `key` as a sibling of some primary name (the caller keeps those whose
// primary exists; suffixes are whole and distinct, so at most one survives).
std::vector<SiblingMatch> sibling_candidates(std::string_view key);

// Why a key that is not a parameter of this model may be skipped, or nullopt when it may not:
// MTP blocks of a config without any (num_nextn_predict_layers 0), and MTP blocks stored under
// names this engine does not bind (`model.mtp.*`, or numbered as layers n_layer ..
// n_layer + n_mtp_layers - 1).
std::optional<std::string> ignore_reason(std::string_view key, const ModelConfig& config);

// §3.1.4: how many tensors the official layout holds for this config (MTP excluded), given how
// many tensors store one FP8-able linear (1 dense, 2 with `.scale`) and one routed-expert matrix
// (1 dense, 2 FP4/FP8 + scale, 3 or 4 NVFP4 with global and optional input scale).
size_t official_tensor_count(const ModelConfig& config, int tensors_per_linear,
                             int tensors_per_expert_matrix);

}  // namespace dsv4::checkpoint
