// Moving a loaded model to another device: every Tensor of ModelWeights (and every member of
// its NVFP4 stacks) is copied through copy_tensor into a fresh tensor on `device`; the config
// and the NVFP4 scale layout travel as they are. The runtime and `dsv4 verify/generate
// --device cuda` load on the host (the loader decodes there) and then call this once.
#pragma once

#include "base/tensor.h"
#include "checkpoint/weights.h"
#include "dsv4/status.h"

namespace dsv4::checkpoint {

// A copy of `weights` on `device`. Fails with resource_exhausted when the device memory runs
// out (the model size comes from the user's checkpoint), or unimplemented in a CPU-only build.
Result<ModelWeights> copy_weights(const ModelWeights& weights, Device device);

}  // namespace dsv4::checkpoint
