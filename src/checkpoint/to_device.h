// Moving a model to another device: every Tensor of ModelWeights (and every member of its NVFP4
// stacks) is copied through copy_tensor into a fresh tensor on `device`; the config and the
// NVFP4 scale layout travel as they are. The loader decodes on the host; load_model_on moves
// each layer as soon as it is decoded, copy_weights a model already loaded.
#pragma once

#include "base/tensor.h"
#include "checkpoint/loader.h"
#include "checkpoint/weights.h"
#include "dsv4/status.h"

namespace dsv4::checkpoint {

// A copy of `weights` on `device`. Fails with resource_exhausted when the device memory runs
// out (the model size comes from the user's checkpoint), or unimplemented in a CPU-only build.
Result<ModelWeights> copy_weights(const ModelWeights& weights, Device device);

// load_model with every layer copied to `device` (as copy_weights copies it) once the loader has
// decoded it, and its host copy then freed: the host holds one layer at a time (and the
// embedding and head), so a model larger than host memory loads onto a GPU that holds it. The
// report is load_model's; the weights are only valid when it is clean.
// Before decoding anything it checks that the weights can fit (weights_fit): a checkpoint too
// large for the device fails in seconds, not after minutes of decoding.
Result<LoadedModel> load_model_on(const std::string& model_dir, Device device,
                                  LoadOptions options = {});

// resource_exhausted, saying what needs how much, when `plan`'s smallest device form is more
// than `free_bytes`.
Status weights_fit(const LoadPlan& plan, int64_t free_bytes);

}  // namespace dsv4::checkpoint
