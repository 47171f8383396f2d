#include "checkpoint/to_device.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "base/float_convert.h"
#include "base/parallel_for.h"

namespace dsv4::checkpoint {
namespace {

constexpr int64_t kChunkValues = int64_t{1} << 20;  // values a thread converts at a time

// Copies tensors to one device; an empty tensor (an absent optional weight) stays empty.
class DeviceCopier {
 public:
  DeviceCopier(Device device, Numerics numerics) : device_(device), numerics_(numerics) {}

  Status copy(const Tensor& src, Tensor& dst) const {
    if (src.empty_tensor()) {
      dst = Tensor();
      return ok_status();
    }
    DSV4_ASSIGN_OR_RETURN(dst, Tensor::empty(src.dtype(), src.shape(), device_));
    return copy_tensor(dst.view(), src.view());
  }

  // A linear's weight: an FP8 one (LoadOptions::keep_fp8) as it is, codes and scales, marked
  // for the profile the weights are placed for.
  Status copy_linear(const LinearWeight& src, LinearWeight& dst) const {
    DSV4_RETURN_IF_ERROR(copy_linear_values(src, dst));
    dst.numerics = numerics_;
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
              bool bulk_in_host_memory = false) const {
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

  template <typename T>
  Status copy(const std::optional<T>& src, std::optional<T>& dst) const {
    if (!src.has_value()) {
      dst.reset();
      return ok_status();
    }
    dst.emplace();
    return copy(*src, *dst);
  }

  Status copy(const HyperConnectionWeights& src, HyperConnectionWeights& dst) const {
    DSV4_RETURN_IF_ERROR(copy_linear_values(src.fn, dst.fn));
    DSV4_RETURN_IF_ERROR(copy(src.base, dst.base));
    return copy(src.scale, dst.scale);
  }

  Status copy(const CompressorWeights& src, CompressorWeights& dst) const {
    DSV4_RETURN_IF_ERROR(copy_linear(src.wkv, dst.wkv));
    DSV4_RETURN_IF_ERROR(copy_linear(src.wgate, dst.wgate));
    DSV4_RETURN_IF_ERROR(copy(src.ape, dst.ape));
    return copy(src.norm, dst.norm);
  }

  Status copy(const IndexerWeights& src, IndexerWeights& dst) const {
    DSV4_RETURN_IF_ERROR(copy_linear(src.wq_b, dst.wq_b));
    DSV4_RETURN_IF_ERROR(copy_linear(src.weights_proj, dst.weights_proj));
    return copy(src.compressor, dst.compressor);
  }

  Status copy(const AttentionWeights& src, AttentionWeights& dst) const {
    DSV4_RETURN_IF_ERROR(copy(src.attn_sink, dst.attn_sink));
    DSV4_RETURN_IF_ERROR(copy(src.q_norm, dst.q_norm));
    DSV4_RETURN_IF_ERROR(copy(src.kv_norm, dst.kv_norm));
    for (auto [from, to] : {std::pair{&src.wq_a, &dst.wq_a},
                            {&src.wq_b, &dst.wq_b},
                            {&src.wkv, &dst.wkv},
                            {&src.wo_a, &dst.wo_a},
                            {&src.wo_b, &dst.wo_b}}) {
      DSV4_RETURN_IF_ERROR(copy_linear(*from, *to));
    }
    DSV4_RETURN_IF_ERROR(copy(src.compressor, dst.compressor));
    return copy(src.indexer, dst.indexer);
  }

  Status copy(const DenseExpertWeights& src, DenseExpertWeights& dst) const {
    DSV4_RETURN_IF_ERROR(copy_linear(src.w1, dst.w1));
    DSV4_RETURN_IF_ERROR(copy_linear(src.w3, dst.w3));
    return copy_linear(src.w2, dst.w2);
  }

  Status copy(const MoeWeights& src, MoeWeights& dst, bool experts_in_host_memory) const {
    DSV4_RETURN_IF_ERROR(copy(src.gate, dst.gate));
    DSV4_RETURN_IF_ERROR(copy(src.bias, dst.bias));
    DSV4_RETURN_IF_ERROR(copy(src.tid2eid, dst.tid2eid));
    DSV4_RETURN_IF_ERROR(copy(src.experts.w13, dst.experts.w13));
    DSV4_RETURN_IF_ERROR(copy(src.experts.w2, dst.experts.w2));
    // Host memory only stands in for a GPU's, and holds only NVFP4 stacks.
    dst.experts.in_host_memory =
        experts_in_host_memory && device_ == Device::kCuda && src.experts.is_nvfp4();
    for (auto [from, to] : {std::pair{&src.experts.w13_nvfp4, &dst.experts.w13_nvfp4},
                            {&src.experts.w2_nvfp4, &dst.experts.w2_nvfp4}}) {
      to->reset();
      if (from->has_value()) {
        DSV4_RETURN_IF_ERROR(copy(**from, to->emplace(), dst.experts.in_host_memory));
      }
    }
    DSV4_RETURN_IF_ERROR(copy(src.experts.w13_input_scale, dst.experts.w13_input_scale));
    DSV4_RETURN_IF_ERROR(copy(src.experts.w2_input_scale, dst.experts.w2_input_scale));
    return copy(src.shared_expert, dst.shared_expert);
  }

  // The weights outside the layers: embedding, head, final norm, hc_head.
  Status copy_globals(const ModelWeights& src, ModelWeights& dst) const {
    DSV4_RETURN_IF_ERROR(copy(src.embed, dst.embed));
    DSV4_RETURN_IF_ERROR(copy_linear(src.head, dst.head));
    DSV4_RETURN_IF_ERROR(copy(src.norm, dst.norm));
    return copy(src.hc_head, dst.hc_head);
  }

  Status copy(const LayerWeights& src, LayerWeights& dst, bool experts_in_host_memory) const {
    DSV4_RETURN_IF_ERROR(copy(src.hc_attn, dst.hc_attn));
    DSV4_RETURN_IF_ERROR(copy(src.hc_ffn, dst.hc_ffn));
    DSV4_RETURN_IF_ERROR(copy(src.attn_norm, dst.attn_norm));
    DSV4_RETURN_IF_ERROR(copy(src.ffn_norm, dst.ffn_norm));
    DSV4_RETURN_IF_ERROR(copy(src.attn, dst.attn));
    return copy(src.ffn, dst.ffn, experts_in_host_memory);
  }

  Status copy(const MtpWeights& src, MtpWeights& dst, bool experts_in_host_memory) const {
    DSV4_RETURN_IF_ERROR(copy_linear(src.e_proj, dst.e_proj));
    DSV4_RETURN_IF_ERROR(copy_linear(src.h_proj, dst.h_proj));
    for (const auto& [from, to] :
         {std::pair(&src.enorm, &dst.enorm), std::pair(&src.hnorm, &dst.hnorm),
          std::pair(&src.norm, &dst.norm)})
      DSV4_RETURN_IF_ERROR(copy(*from, *to));
    DSV4_RETURN_IF_ERROR(copy(src.hc_head, dst.hc_head));
    return copy(src.block, dst.block, experts_in_host_memory);
  }

 private:
  // Host to pinned host memory: copy_tensor has finished it when it returns (a host-to-host
  // cudaMemcpyAsync is synchronous), so the source may go at once.
  static Status copy_to_mapped_host(const Tensor& src, Tensor& dst) {
    DSV4_ASSIGN_OR_RETURN(dst, Tensor::empty_mapped_host(src.dtype(), src.shape()));
    return copy_tensor(dst.view(), src.view());
  }

  Device device_;
  Numerics numerics_;
};

}  // namespace

Result<ModelWeights> copy_weights(const ModelWeights& weights, Device device, Numerics numerics) {
  const DeviceCopier copier(device, numerics);
  ModelWeights out;
  out.config = weights.config;
  DSV4_RETURN_IF_ERROR(copier.copy_globals(weights, out));
  out.layers.resize(weights.layers.size());
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    DSV4_RETURN_IF_ERROR(copier.copy(weights.layers[i], out.layers[i], false));
  }
  out.mtp.resize(weights.mtp.size());
  for (size_t i = 0; i < weights.mtp.size(); ++i) {
    DSV4_RETURN_IF_ERROR(copier.copy(weights.mtp[i], out.mtp[i], false));
  }
  // The copies run on this thread's stream; the model may run on others (a server's).
  if (device == Device::kCuda) DSV4_RETURN_IF_ERROR(finish_device_work());
  return out;
}

Result<LoadedModel> load_model_on(const std::string& model_dir, Device device,
                                  const DevicePlacement& placement, LoadOptions options) {
  const DeviceCopier copier(device, placement.numerics);
  ModelWeights placed;
  ExpertOffloadPlan offload;
  options.on_layer_loaded = [&](ModelWeights& host, int64_t layer) -> Status {
    placed.layers.resize(host.layers.size());
    placed.mtp.resize(host.mtp.size());
    if (layer < 0) {
      DSV4_RETURN_IF_ERROR(copier.copy_globals(host, placed));
      for (Tensor* t : {&host.embed, &host.norm}) *t = Tensor();
      host.head = LinearWeight();
      host.hc_head = HyperConnectionWeights{};
      return ok_status();
    }
    const auto l = static_cast<size_t>(layer);
    const bool experts_in_host_memory = l < offload.offloaded.size() && offload.offloaded[l];
    if (layer >= host.config.n_layer) {  // an MTP block
      const size_t i = l - static_cast<size_t>(host.config.n_layer);
      DSV4_RETURN_IF_ERROR(copier.copy(host.mtp[i], placed.mtp[i], experts_in_host_memory));
      host.mtp[i] = MtpWeights{};
      return ok_status();
    }
    DSV4_RETURN_IF_ERROR(copier.copy(host.layers[l], placed.layers[l], experts_in_host_memory));
    host.layers[l] = LayerWeights{};  // the host copy goes as soon as the device has it
    return ok_status();
  };
  options.before_decode = [&](const LoadPlan& plan) -> Status {
    DSV4_ASSIGN_OR_RETURN(const int64_t free_bytes, free_device_bytes(device));
    if (device != Device::kCuda) {
      // The host holds the weights: nothing to offload to.
      return plan_expert_offload(plan, 0, free_bytes, placement.device_headroom, 0).status();
    }
    DSV4_ASSIGN_OR_RETURN(const int64_t host_free, free_device_bytes(Device::kCpu));
    DSV4_ASSIGN_OR_RETURN(offload,
                          plan_expert_offload(plan, placement.expert_offload_layers, free_bytes,
                                              placement.device_headroom, host_free));
    return ok_status();
  };
  // A GPU's linear kernels decode FP8 weights themselves: half the bytes of their bf16 form.
  options.keep_fp8 = device == Device::kCuda;
  DSV4_ASSIGN_OR_RETURN(LoadedModel loaded, load_model(model_dir, options));
  placed.config = loaded.weights.config;
  loaded.weights = std::move(placed);
  if (offload.layers() > 0) loaded.report.notes.push_back(offload.describe());
  if (device == Device::kCuda) DSV4_RETURN_IF_ERROR(finish_device_work());
  return loaded;
}

}  // namespace dsv4::checkpoint
