// The CPU reference of every op in kernels/ops.h: plain loops, f32 accumulation, OpenMP across
// rows at most, GEMMs through OpenBLAS. Same contracts as ops.h; called only by ops.cpp, which
// has already checked that the tensors are on the host.
#pragma once

#include "base/tensor.h"

namespace dsv4::kernels::cpu {

// ---- Dense ops (f32) ----
void linear(const TensorView& x, const TensorView& w, const TensorView& y);
void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y);
void softmax(const TensorView& x, const TensorView& y);
void swiglu(const TensorView& gate_up, float limit, const TensorView& out);
void add(const TensorView& a, const TensorView& b, const TensorView& y);
void embedding(const TensorView& table, const TensorView& ids, const TensorView& y);

}  // namespace dsv4::kernels::cpu
