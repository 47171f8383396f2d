// The one device switch of the tree: each op checks that its tensors share a device and calls
// the CPU reference or the CUDA implementation. Ops without a CUDA implementation yet say so
// through an unimplemented Status instead of silently computing on the host.
#include "kernels/ops.h"

#include <initializer_list>
#include <string>

#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels {
namespace {

// The device all non-empty operands live on; mixing devices in one call is a bug.
Device device_of(std::initializer_list<const TensorView*> views) {
  const TensorView* first = nullptr;
  for (const TensorView* view : views) {
    if (view->data == nullptr) continue;
    if (first == nullptr) first = view;
    DSV4_CHECK(view->device == first->device, "operands on different devices");
  }
  return first ? first->device : Device::kCpu;
}

Status no_cuda(const char* op) {
  return unimplemented(std::string(op) + ": no CUDA implementation yet");
}

}  // namespace

// ---- Dense ops (f32) ----

Status linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  if (device_of({&x, &w, &y}) == Device::kCuda) return no_cuda("linear");
  cpu::linear(x, w, y);
  return ok_status();
}

Status rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y) {
  if (device_of({&x, &weight, &y}) == Device::kCuda) return no_cuda("rms_norm");
  cpu::rms_norm(x, weight, eps, y);
  return ok_status();
}

Status softmax(const TensorView& x, const TensorView& y) {
  if (device_of({&x, &y}) == Device::kCuda) return no_cuda("softmax");
  cpu::softmax(x, y);
  return ok_status();
}

Status swiglu(const TensorView& gate_up, float limit, const TensorView& out) {
  if (device_of({&gate_up, &out}) == Device::kCuda) return no_cuda("swiglu");
  cpu::swiglu(gate_up, limit, out);
  return ok_status();
}

Status add(const TensorView& a, const TensorView& b, const TensorView& y) {
  if (device_of({&a, &b, &y}) == Device::kCuda) return no_cuda("add");
  cpu::add(a, b, y);
  return ok_status();
}

Status embedding(const TensorView& table, const TensorView& ids, const TensorView& y) {
  if (device_of({&table, &ids, &y}) == Device::kCuda) return no_cuda("embedding");
  cpu::embedding(table, ids, y);
  return ok_status();
}

// ---- NVFP4 ----
// The CUDA branch returns unimplemented until kernels/cuda defines the cuda_ops.h functions.

namespace {

Device nvfp4_device(const StagedActivation* a, const TensorView* x, const format::Nvfp4View& b,
                    const TensorView* offsets, const TensorView& d) {
  const TensorView empty;
  const TensorView* a_packed = a ? &a->packed : &empty;
  const TensorView* a_scale = a ? &a->block_scale : &empty;
  const TensorView* a_global = a ? &a->global_scale : &empty;
  return device_of({a_packed, a_scale, a_global, x ? x : &empty, &b.packed, &b.block_scale,
                    &b.global_scale, offsets ? offsets : &empty, &d});
}

}  // namespace

Status stage_activation(const TensorView& x, const TensorView& input_scale,
                        const StagedActivation& out) {
  if (device_of({&x, &input_scale, &out.packed, &out.block_scale, &out.global_scale}) ==
      Device::kCuda) {
    return no_cuda("stage_activation");
  }
  cpu::stage_activation(x, input_scale, out);
  return ok_status();
}

Status nvfp4_gemm(const StagedActivation& a, const format::Nvfp4View& b, const TensorView& d) {
  if (nvfp4_device(&a, nullptr, b, nullptr, d) == Device::kCuda) return no_cuda("nvfp4_gemm");
  cpu::nvfp4_gemm(a, b, d);
  return ok_status();
}

Status nvfp4_gemm(const TensorView& a, const format::Nvfp4View& b, const TensorView& d) {
  if (nvfp4_device(nullptr, &a, b, nullptr, d) == Device::kCuda) return no_cuda("nvfp4_gemm");
  cpu::nvfp4_gemm(a, b, d);
  return ok_status();
}

Status nvfp4_grouped_gemm(const StagedActivation& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d) {
  if (nvfp4_device(&a, nullptr, b, &group_offsets, d) == Device::kCuda) {
    return no_cuda("nvfp4_grouped_gemm");
  }
  cpu::nvfp4_grouped_gemm(a, b, group_offsets, d);
  return ok_status();
}

Status nvfp4_grouped_gemm(const TensorView& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d) {
  if (nvfp4_device(nullptr, &a, b, &group_offsets, d) == Device::kCuda) {
    return no_cuda("nvfp4_grouped_gemm");
  }
  cpu::nvfp4_grouped_gemm(a, b, group_offsets, d);
  return ok_status();
}

}  // namespace dsv4::kernels
