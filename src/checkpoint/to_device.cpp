#include "checkpoint/to_device.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "base/device.h"
#include "base/float_convert.h"
#include "base/parallel_for.h"
#include "checkpoint/tensor_names.h"

namespace dsv4::checkpoint {
namespace {

constexpr int64_t kChunkValues = int64_t{1} << 20;  // values a thread converts at a time

// Copies tensors to one device; an empty tensor (an absent optional weight) stays empty.
class DeviceCopier {
 public:
  explicit DeviceCopier(Device device) : device_(device) {}

  Status copy(const Tensor& src, Tensor& dst) const {
    if (src.empty_tensor()) {
      dst = Tensor();
      return ok_status();
    }
    DSV4_ASSIGN_OR_RETURN(dst, Tensor::empty(src.dtype(), src.shape(), device_));
    return copy_tensor(dst.view(), src.view());
  }

  // A linear's weight: an FP8 one (LoadOptions::keep_fp8) as it is, codes and scales.
  Status copy_linear(const LinearWeight& src, LinearWeight& dst) const {
    DSV4_RETURN_IF_ERROR(copy_linear_values(src, dst));
    return copy(src.block_scales, dst.block_scales);
  }

  // A weight only kernels::linear reads: on a GPU in bf16 when every value is one (a bf16
  // checkpoint's, which the loader widened to f32), since a decode step streams these weights
  // and bf16 halves their bytes; the linear widens them back exactly. Else as it is.
  Status copy_linear_values(const Tensor& src, Tensor& dst) const {
    if (device_ != Device::kCuda || src.empty_tensor() || src.dtype() != DType::kF32 ||
        !src.view().is_contiguous()) {
      return copy(src, dst);  // and an absent weight stays absent
    }
    const float* values = src.data_as<const float>();
    const int64_t n = src.numel();
    std::vector<uint16_t> bits(static_cast<size_t>(n));
    // In chunks on parallel_for's threads: V4-Flash has ~14 G such values.
    const int64_t n_chunks = (n + kChunkValues - 1) / kChunkValues;
    std::vector<char> chunk_exact(static_cast<size_t>(n_chunks));
    parallel_for(n_chunks, [&](int64_t c) {
      bool exact = true;
      for (int64_t i = c * kChunkValues; i < std::min(n, (c + 1) * kChunkValues); ++i) {
        bits[static_cast<size_t>(i)] = float_to_bf16(values[i]);
        exact = exact &&
                (bf16_to_float(bits[static_cast<size_t>(i)]) == values[i] || std::isnan(values[i]));
      }
      chunk_exact[static_cast<size_t>(c)] = exact;
    });
    const bool all_bf16 =
        std::all_of(chunk_exact.begin(), chunk_exact.end(), [](char e) { return e != 0; });
    if (!all_bf16) return copy(src, dst);
    DSV4_ASSIGN_OR_RETURN(dst, Tensor::empty(DType::kBF16, src.shape(), device_));
    DSV4_RETURN_IF_ERROR(copy_tensor(
        dst.view(), TensorView::contiguous(bits.data(), DType::kBF16, Device::kCpu, src.shape())));
    // The copy reads `bits` from pageable memory, staged before copy_tensor returns.
    return ok_status();
  }

  // An NVFP4 stack; with `bulk_in_host_memory` (a GPU's only) its codes and block scales in
  // mapped pinned host memory (expert_offload.h), the per-matrix scales on the device all the same.
  Status copy(const format::Nvfp4Tensor& src, format::Nvfp4Tensor& dst,
              bool bulk_in_host_memory) const {
    if (bulk_in_host_memory) {
      DSV4_RETURN_IF_ERROR(copy_to_mapped_host(src.packed, dst.packed));
      DSV4_RETURN_IF_ERROR(copy_to_mapped_host(src.block_scale, dst.block_scale));
    } else {
      DSV4_RETURN_IF_ERROR(copy(src.packed, dst.packed));
      DSV4_RETURN_IF_ERROR(copy(src.block_scale, dst.block_scale));
    }
    DSV4_RETURN_IF_ERROR(copy(src.global_scale, dst.global_scale));
    DSV4_RETURN_IF_ERROR(copy(src.input_scale, dst.input_scale));
    dst.scale_layout = src.scale_layout;
    return ok_status();
  }

  // One weight, as its field's type says; with `bulk_in_host_memory` an NVFP4 expert stack's
  // codes and block scales go to mapped host memory.
  Status copy(const WeightRef& src, const WeightRef& dst, bool bulk_in_host_memory) const {
    if (src.linear) return copy_linear(*src.linear, *dst.linear);
    if (src.read_by_linear) return copy_linear_values(*src.values, *dst.values);
    DSV4_RETURN_IF_ERROR(copy(*src.values, *dst.values));
    if (!src.nvfp4) return ok_status();
    dst.nvfp4->reset();
    if (src.nvfp4->has_value()) {
      DSV4_RETURN_IF_ERROR(copy(**src.nvfp4, dst.nvfp4->emplace(), bulk_in_host_memory));
    }
    return copy(*src.static_input_scale, *dst.static_input_scale);
  }

  // Every weight of block `layer` (-1: the globals) of `src` into `dst`, whose blocks
  // make_blocks has made. With `experts_in_host_memory` (a GPU's only: host memory only stands
  // in for a GPU's, and holds only NVFP4 stacks) the routed experts' bulk goes to host memory.
  Status copy_block(ModelWeights& src, ModelWeights& dst, int64_t layer,
                    bool experts_in_host_memory) const {
    bool bulk_in_host_memory = false;
    if (layer >= 0) {
      bulk_in_host_memory = experts_in_host_memory && device_ == Device::kCuda &&
                            src.block(layer).ffn.experts.is_nvfp4();
      dst.block(layer).ffn.experts.in_host_memory = bulk_in_host_memory;
    }
    for (const SlotSpec* spec : block_slots(src.config, layer)) {
      DSV4_RETURN_IF_ERROR(copy(weight_ref(src, spec->param, layer),
                                weight_ref(dst, spec->param, layer), bulk_in_host_memory));
    }
    return ok_status();
  }

 private:
  // Host to pinned host memory: copy_tensor has finished it when it returns (a host-to-host
  // cudaMemcpyAsync is synchronous), so the source may go at once.
  static Status copy_to_mapped_host(const Tensor& src, Tensor& dst) {
    DSV4_ASSIGN_OR_RETURN(dst, Tensor::empty_mapped_host(src.dtype(), src.shape()));
    return copy_tensor(dst.view(), src.view());
  }

  Device device_;
};

// Frees a weight's memory.
void release(const WeightRef& field) {
  if (field.linear) {
    *field.linear = LinearWeight();
  } else {
    *field.values = Tensor();
  }
  if (field.nvfp4) field.nvfp4->reset();
  if (field.static_input_scale) *field.static_input_scale = Tensor();
}

}  // namespace

Result<ModelWeights> copy_weights(const ModelWeights& weights, Device device) {
  const DeviceCopier copier(device);
  // weight_ref hands out mutable fields; the copy only reads the source's.
  ModelWeights& src = const_cast<ModelWeights&>(weights);
  ModelWeights out;
  out.config = weights.config;
  make_blocks(out, weights.mtp.size());
  const auto n_blocks = weights.config.n_layer + static_cast<int64_t>(weights.mtp.size());
  for (int64_t layer = -1; layer < n_blocks; ++layer) {
    DSV4_RETURN_IF_ERROR(copier.copy_block(src, out, layer, false));
  }
  // The copies run on this thread's stream; the model may run on others (a server's).
  if (device == Device::kCuda) DSV4_RETURN_IF_ERROR(finish_device_work());
  return out;
}

Result<LoadedModel> load_model_on(const std::string& model_dir, Device device,
                                  const DevicePlacement& placement, LoadOptions options) {
  const DeviceCopier copier(device);
  ModelWeights placed;
  ExpertOffloadPlan offload;
  bool blocks_made = false;
  int64_t layers_handed = 0;  // to placement.take_main_experts
  options.on_layer_loaded = [&](ModelWeights& host, int64_t layer) -> Status {
    if (!blocks_made) {
      placed.config = host.config;
      make_blocks(placed, host.mtp.size());
      blocks_made = true;
    }
    const auto l = static_cast<size_t>(layer);
    const bool experts_in_host_memory =
        layer >= 0 && l < offload.offloaded.size() && offload.offloaded[l];
    DSV4_RETURN_IF_ERROR(copier.copy_block(host, placed, layer, experts_in_host_memory));
    // The host copy goes as soon as the device has it.
    for (const SlotSpec* spec : block_slots(host.config, layer)) {
      release(weight_ref(host, spec->param, layer));
    }
    // A main layer's experts go to the caller before the next layer is decoded, so that it can
    // free them: the host then never holds more than one layer's.
    if (!placement.take_main_experts || layer < 0 || layer >= host.config.n_layer) {
      return ok_status();
    }
    RoutedExpertWeights& experts = placed.block(layer).ffn.experts;
    if (!experts.is_nvfp4()) return ok_status();
    ++layers_handed;
    return placement.take_main_experts(layer, experts);
  };
  const std::function<Status(const LoadPlan&)> caller_check = std::move(options.before_decode);
  options.before_decode = [&](const LoadPlan& plan) -> Status {
    if (caller_check) DSV4_RETURN_IF_ERROR(caller_check(plan));
    DSV4_ASSIGN_OR_RETURN(const int64_t free_bytes, free_device_bytes(device));
    if (device != Device::kCuda) {
      // The host holds the weights: nothing to offload to.
      return plan_expert_offload(plan, 0, free_bytes, placement.device_headroom, 0).status();
    }
    DSV4_ASSIGN_OR_RETURN(const int64_t host_free, free_device_bytes(Device::kCpu));
    if (!placement.take_main_experts) {
      DSV4_ASSIGN_OR_RETURN(offload,
                            plan_expert_offload(plan, placement.expert_offload_layers, free_bytes,
                                                placement.device_headroom, host_free));
      return ok_status();
    }
    // Every main layer's go through host memory; the MTP blocks' experts, which no caller
    // shards, stay on the device (offloading counts from the last layer, so they are cut from
    // the plan's choices). The caller frees each layer's before the next is decoded, so the host
    // needs room for the largest layer's, not for all of them.
    LoadPlan main = plan;
    main.expert_bulk_bytes.resize(
        std::min(main.expert_bulk_bytes.size(), static_cast<size_t>(plan.n_layer)));
    const int64_t layers =
        std::count_if(main.expert_bulk_bytes.begin(), main.expert_bulk_bytes.end(),
                      [](int64_t bytes) { return bytes > 0; });
    DSV4_ASSIGN_OR_RETURN(offload, plan_expert_offload(main, layers, free_bytes,
                                                       placement.device_headroom,
                                                       std::numeric_limits<int64_t>::max()));
    if (offload.copy_bytes > host_free) {
      return resource_exhausted("one layer's routed experts in host memory need " +
                                std::to_string(offload.copy_bytes) +
                                " bytes of pinned host memory while loading; the host has " +
                                std::to_string(host_free) + " available");
    }
    return ok_status();
  };
  // A GPU's linear kernels decode FP8 weights themselves: half the bytes of their bf16 form.
  options.keep_fp8 = device == Device::kCuda;
  DSV4_ASSIGN_OR_RETURN(LoadedModel loaded, load_model(model_dir, options));
  placed.config = loaded.weights.config;
  loaded.weights = std::move(placed);
  if (layers_handed > 0) {
    loaded.report.notes.push_back(
        "the NVFP4 routed experts of " + std::to_string(layers_handed) +
        " main layers were handed over as each layer loaded" +
        (device == Device::kCuda ? ", staged in at most " + std::to_string(offload.copy_bytes) +
                                       " bytes of pinned host memory at a time"
                                 : std::string()));
  } else if (offload.layers() > 0) {
    loaded.report.notes.push_back(offload.describe());
  }
  if (device == Device::kCuda) DSV4_RETURN_IF_ERROR(finish_device_work());
  return loaded;
}

}  // namespace dsv4::checkpoint
