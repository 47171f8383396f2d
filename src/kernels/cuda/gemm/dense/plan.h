// Which kernel runs a dense linear, y[T, N] = x[T, K] · w[N, K]ᵀ (kernels/contracts.h's
// LinearOperands; G block-diagonal groups side by side, 1 for a plain linear), and with which
// launch shape: the one place that decides, from the call's shape alone (plan.cpp gives the
// measurements behind each threshold). Plain C++: launch.cu runs the plan, linear_bench prints it.
//
// Dimension letters: T tokens (rows of x and y), N output features (rows of w), K input features,
// G groups.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/contracts.h"

namespace dsv4::kernels::cuda {

enum class DenseKernel {
  kNone,                // no rows or no outputs: nothing to launch
  kTensorCores,         // linear_tensor_cores.cu: a bf16 weight, ≥ 17 rows (prefill, verify)
  kFewRowsTensorCores,  // linear_few_rows_tensor_cores.cu: a bf16 weight, 2-16 rows
  kTiled,               // linear_cuda_cores.cu: the tiled SGEMM, many rows and wide outputs
  kFewRows,             // linear_cuda_cores.cu: a few rows (decode) or narrow outputs
  kNarrow,              // linear_narrow.cu: many rows, ≤ 64 outputs (the few-rows kernel's bits)
};

struct DensePlan {
  DenseKernel kernel = DenseKernel::kNone;
  int warps = 0;   // kFewRowsTensorCores: warps a CTA (8, 16); kFewRows: warps a block (8, 16)
  int cols = 0;    // kFewRows: outputs a group of warps computes (1 or 4); kNarrow: a warp's
                   // (1, 2, 3, 4 or 8)
  int split = 0;   // kFewRows: warps of a group, each a slice of K (1, 8 or 16); kNarrow: blocks
                   // of a cluster, sharing K's 16 slices (2, 4 or 8)
  int tokens = 0;  // kFewRows: most tokens a block (1, 4 or 8); kNarrow: tokens a block (8, 16)
};

// The plan for a call of n_groups groups on a device of n_sm multiprocessors.
DensePlan plan_dense(const LinearOperands& o, int64_t n_groups, int n_sm);

// One line for benchmarks and logs, e.g. "CUDA-core few rows: 4 outputs × 8 warps, 1 token".
std::string describe(const DensePlan& plan);

}  // namespace dsv4::kernels::cuda
