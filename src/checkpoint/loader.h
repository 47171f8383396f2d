// Binding a checkpoint to ModelWeights. One pass over the name table (tensor_names.h): every
// checkpoint key is bound to exactly one parameter slot or ignored for a reason the report
// names; every slot is bound exactly once; dtypes and shapes are checked against the config;
// quantized forms (official FP8 + E8M0/F32 block scales, official FP4 + E8M0 per 32, ModelOpt
// NVFP4) are decoded by one code path. A post-load scan reports all-zero and non-finite tensors.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/tensor_names.h"
#include "checkpoint/weights.h"
#include "format/checkpoint_files.h"

namespace dsv4::checkpoint {

// What a load will hold, known once the checkpoint is bound and before any byte is decoded.
struct LoadPlan {
  int64_t packed_expert_bytes = 0;  // NVFP4 stacks: codes, block scales, global scales
  int64_t fp8_bytes = 0;            // linears kept in FP8 (keep_fp8): codes and f32 scales
  int64_t value_elements = 0;       // every other weight's values (f32 on the host)
  int64_t index_elements = 0;       // tid2eid's expert ids (i64)
  // Per layer: its NVFP4 stacks' codes and block scales, the part of packed_expert_bytes that
  // expert offload may keep in host memory (expert_offload.h); 0 for a layer decoded to f32.
  std::vector<int64_t> expert_bulk_bytes;
  // Per layer (as many as expert_bulk_bytes): its NVFP4 stacks whole, codes, block scales and
  // global scales, so that what the main layers hold parts from the MTP blocks'
  // (runtime/ep_memory_plan.h shards the main layers' only); packed_expert_bytes is their sum.
  std::vector<int64_t> expert_packed_bytes;
  int64_t n_layer = 0;        // main layers: expert_bulk_bytes past them are the MTP blocks'
  std::string first_problem;  // the binding's first problem; empty when it binds cleanly
  // The fewest bytes the weights can take on a GPU, where a value not kept packed is at least a
  // bf16.
  int64_t min_device_bytes() const {
    return packed_expert_bytes + fp8_bytes + 2 * value_elements + 8 * index_elements;
  }
};

struct LoadOptions {
  std::optional<NamingConvention> force_convention;  // detected when empty
  // Keep FP4 routed experts packed in NVFP4 for the engine's NVFP4 paths (NVFP4 as stored,
  // MXFP4 converted without changing a value; expert_packing.h) instead of decoding them to f32.
  bool keep_fp4_packed = true;
  // Keep the dense linears an FP8 checkpoint stores as e4m3 + power-of-two 128 × 128 block scales
  // in that form (LinearWeight; checkpoint/fp8_weights.h) instead of decoding them to f32: for a
  // GPU, whose linear kernels decode them (kernels/ops.h). The CPU reference reads them too.
  bool keep_fp8 = false;
  // Called with (tensors done, tensors total) while binding; for progress on big checkpoints.
  std::function<void(size_t, size_t)> progress;
  // load_model calls this once every slot of a layer is decoded (layer -1: the model's global
  // weights), with the weights so far; it may move that layer's tensors elsewhere (to_device.h
  // streams each layer to a GPU and frees the host copy, so host memory holds one layer at a
  // time) or run and drop them (runtime/calibration.h). An error stops the load. The calls come
  // in order, -1 (the globals) first, then 0, 1, ... (the name table lists the slots so, and
  // decoding follows it), for a checkpoint that binds cleanly (LoadPlan::first_problem empty).
  std::function<Status(ModelWeights& weights, int64_t layer)> on_layer_loaded;
  // load_model calls this once the checkpoint is bound, before decoding anything: an error
  // (to_device.h's: the weights cannot fit on the GPU) stops the load early.
  std::function<Status(const LoadPlan& plan)> before_decode;
};

struct IgnoredKey {
  std::string key;
  std::string reason;  // e.g. "MTP draft block: the config has num_nextn_predict_layers 0"
};

struct LoadReport {
  NamingConvention convention = NamingConvention::kOfficial;
  size_t n_keys = 0;
  size_t n_bound = 0;
  // MTP blocks the checkpoint holds (ModelWeights::mtp; 0: no speculative decoding) and their
  // tensors among n_bound.
  size_t n_mtp_blocks = 0;
  size_t n_mtp_bound = 0;
  std::map<std::string, size_t> bound_per_category;  // "attention", "routed experts", ...
  std::map<std::string, size_t> dtype_census;        // "BF16" -> count
  std::vector<IgnoredKey> ignored;
  std::vector<std::string> problems;  // each a full sentence naming key and slot; empty = clean
  // The same problems in list form for `dsv4 check` (each also has its sentence in problems).
  std::vector<std::string> unbound_keys;   // checkpoint keys no slot takes and no rule ignores
  std::vector<std::string> unbound_slots;  // slots ("layer 3 attn.wq_a") no key fills
  std::map<std::string, size_t> storage_census;  // "fp8 block" -> bound tensors stored so
  // Official layout only (§3.1.4 self-check): the tensor count the formula predicts for this
  // config and the storage found on layer 0 (MTP excluded), and the main-model keys present.
  size_t official_count_expected = 0;
  size_t official_count_found = 0;
  std::vector<std::string> zero_tensors;  // all-zero and not allow-listed
  std::vector<std::string> non_finite_tensors;
  // What the loader chose and why, where a checkpoint allows more than one way (not problems):
  // e.g. MXFP4 experts held as NVFP4, or a layer's experts left in f32 and the block that forced
  // it.
  std::vector<std::string> notes;
  bool clean() const {
    return problems.empty() && zero_tensors.empty() && non_finite_tensors.empty();
  }
  // The first thing that makes the report unclean, as a phrase ("" when clean).
  std::string first_problem() const {
    if (!problems.empty()) return problems.front();
    if (!zero_tensors.empty()) return "all-zero tensor " + zero_tensors.front();
    if (!non_finite_tensors.empty()) return "non-finite tensor " + non_finite_tensors.front();
    return {};
  }
};

// Binds and decodes. The weights are only valid when report.clean(); the Result fails only for
// errors that stop binding altogether (unreadable files, invalid config).
struct LoadedModel {
  ModelWeights weights;
  LoadReport report;
};
Result<LoadedModel> load_model(const std::string& model_dir, const LoadOptions& options = {});

// Binds without decoding anything: the plan load_model with the same options hands
// before_decode (`dsv4 check --plan` prints the expert-parallel plan of it).
Result<LoadPlan> plan_model(const std::string& model_dir, const LoadOptions& options = {});

// Binds and scans without keeping the weights (each tensor is decoded into scratch memory and
// dropped): `dsv4 check` on checkpoints far larger than host memory in f32.
Result<LoadReport> check_model(const std::string& model_dir, const LoadOptions& options = {});

}  // namespace dsv4::checkpoint
