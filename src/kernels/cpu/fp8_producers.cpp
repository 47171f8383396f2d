// The producers of an FP8 linear's input fused with the quantizer (kernels/ops.h, "FP8"), CPU
// reference: each is the plain op, then quantize_activation_fp8 of its output, which is the
// contract the CUDA kernels match byte for byte.
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {

void rms_norm_fp8(const TensorView& x, const TensorView& weight, float eps, const TensorView& y,
                  const Fp8Activation& y_fp8) {
  cpu::rms_norm(x, weight, eps, y);
  cpu::quantize_activation_fp8(y, y_fp8);
}

void swiglu_fp8(const TensorView& gate_up, float limit, const TensorView& out,
                const Fp8Activation& out_fp8) {
  cpu::swiglu(gate_up, limit, out);
  cpu::quantize_activation_fp8(out, out_fp8);
}

void hc_pre_norm_fp8(const HcPreNormParams& params, const Fp8Activation& y_fp8) {
  cpu::hc_pre_norm(params);
  cpu::quantize_activation_fp8(params.y, y_fp8);
}

void rope_fp8(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
              RopeDirection direction, const Fp8Activation& x_fp8) {
  cpu::rope(x, positions, inv_freq, direction);
  const int64_t n_tokens = x.size(0);
  if (n_tokens == 0) return;
  cpu::quantize_activation_fp8(x.reshaped({n_tokens, x.numel() / n_tokens}), x_fp8);
}

}  // namespace dsv4::kernels::cpu
