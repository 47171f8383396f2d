// dsv4 quantize's calibration pass: a bf16/f32 checkpoint runs a calibration text's tokens on
// the CPU, one layer at a time as the loader decodes it (model/layerwise_forward.h: memory holds
// the globals and one layer in f32), every routed expert recording the amax of its inputs
// (model/expert_amaxes.h); each amax becomes ModelOpt's static input scale, amax / 2688
// (docs/nvfp4.md), for the W4A4 path's activation staging.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "checkpoint/quantize.h"
#include "dsv4/status.h"
#include "model/expert_amaxes.h"

namespace dsv4::runtime {

struct ExpertCalibration {
  checkpoint::ExpertInputScales scales;
  int64_t n_tokens = 0;
  // (layer, expert) pairs no calibration token was routed to; they take their layer's largest
  // scale (of the experts that were reached), the safe side for W4A4: a scale too large only
  // costs resolution, one too small saturates.
  int64_t n_unreached = 0;
};

// The input scales of recorded amaxes. Fails for a layer whose reached experts saw only zeros.
Result<ExpertCalibration> input_scales_of(const model::ExpertAmaxes& amaxes);

// Streams `model_dir` (its routed experts dense) and runs `tokens` through it as one sequence.
Result<ExpertCalibration> calibrate_expert_inputs(const std::string& model_dir,
                                                  std::span<const int64_t> tokens);

}  // namespace dsv4::runtime
