// Which NVFP4 GEMM kernel and grid a shape gets (heuristics.cpp). Kept apart from the kernels so
// the choice can be read and changed without touching device code.
#pragma once

#include "kernels/cuda/gemm/nvfp4/params.h"

namespace dsv4::kernels::cuda::sm90 {

// n_rows: T (all groups together); k: K, kp: K padded to kWeightKAlign; n_groups: G; n_sm:
// multiprocessors on the device.
Nvfp4GemmPlan plan_nvfp4_gemm(int n_rows, int n, int k, int kp, int n_groups, int n_sm);

// The small-M kernel's plan (token tiles, K slice, group slots), whatever the stream kernel
// would take; the benchmark times it against the stream kernel.
Nvfp4GemmPlan plan_small_m(int n_rows, int n, int kp, int n_groups, int n_sm);

// The warp-specialised kernel's plan (token tile width, persistent grid), whatever M is; the
// benchmark times it against the small-M kernel on grouped calls.
Nvfp4GemmPlan plan_ws(int n_rows, int n, int n_groups, int n_sm);

}  // namespace dsv4::kernels::cuda::sm90
