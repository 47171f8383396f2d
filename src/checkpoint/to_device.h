// Moving a model to another device: every weight the table lists (tensor_names.h: block_slots,
// weight_ref; an NVFP4 stack member by member) is copied through copy_tensor into a fresh tensor
// on `device`; the config and the NVFP4 scale layout travel as they are. The loader decodes on the
// host; load_model_on moves each layer as soon as it is decoded, copy_weights a model already
// loaded.
#pragma once

#include <cstdint>
#include <functional>

#include "base/tensor.h"
#include "checkpoint/expert_offload.h"
#include "checkpoint/loader.h"
#include "checkpoint/weights.h"
#include "dsv4/status.h"

namespace dsv4::checkpoint {

// A copy of `weights` on `device`. Fails with resource_exhausted when the device memory runs
// out (the model size comes from the user's checkpoint), or unimplemented in a CPU-only build.
Result<ModelWeights> copy_weights(const ModelWeights& weights, Device device);

// Where load_model_on puts the weights on a GPU: all in device memory, except the routed
// experts of the layers expert offload picks (expert_offload.h), and what it leaves free.
struct DevicePlacement {
  int64_t expert_offload_layers = kAutoExpertOffload;  // or a number of layers; 0: none
  int64_t device_headroom = 0;  // bytes the weights must leave free (caches, scratch)
  // For a caller that places the main layers' routed experts itself (runtime/placement.h: each
  // expert-parallel rank copies its share to its own GPU, so no GPU holds another's): when set,
  // each main layer's NVFP4 routed experts are handed to it once that layer is placed, before
  // the next layer is decoded; on a GPU their codes and block scales are then in mapped pinned
  // host memory (expert_offload_layers aside) and the per-matrix scales on the device, on the
  // host where they are. It frees the codes and block scales once it has them elsewhere, so host
  // memory holds one layer's experts at a time. The MTP blocks' experts, which no caller shards,
  // stay on the device and are not handed over. An error stops the load.
  std::function<Status(int64_t layer, RoutedExpertWeights& experts)> take_main_experts = nullptr;
};

// load_model with every layer copied to `device` (as copy_weights copies it) once the loader has
// decoded it, and its host copy then freed; on a GPU with LoadOptions::keep_fp8, so an FP8
// checkpoint's linears stay FP8 there: the host holds one layer at a time (and the
// embedding and head), so a model larger than host memory loads onto a GPU that holds it. The
// report is load_model's, with a note naming the layers whose experts went to host memory (or
// to the caller, take_main_experts); the weights are only valid when it is clean.
// Before decoding anything it plans the placement (plan_expert_offload): a checkpoint too large
// for the device, even with offload, fails in seconds, not after minutes of decoding. On the host
// (Device::kCpu) nothing is offloaded. The caller's `options.before_decode` runs first, and its
// error stops the load as this plan's does (runtime/placement.h's check of every
// expert-parallel rank); on_layer_loaded and keep_fp8 are load_model_on's own.
Result<LoadedModel> load_model_on(const std::string& model_dir, Device device,
                                  const DevicePlacement& placement = {}, LoadOptions options = {});

}  // namespace dsv4::checkpoint
