// What a calibration forward records of the routed experts' inputs (dsv4 quantize): per layer
// and expert, the largest |value| among the rows the expert multiplied, of its gate-up input
// (the ffn-normed hidden state) and of its down input (the SwiGLU output), and how many rows it
// took. ModelOpt's static input scale of an NVFP4 linear is that amax / 2688 (6 · 448).
//
// Dimension letters: L layers, E routed experts, R grouped rows, D model width, F expert width.
#pragma once

#include <cstdint>
#include <vector>

#include "base/tensor.h"
#include "dsv4/status.h"

namespace dsv4::model {

struct ExpertAmax {
  float gate_up = 0.0f;  // max |x| over the expert's rows
  float down = 0.0f;     // max |swiglu(...)| over them
  int64_t rows = 0;
};

class ExpertAmaxes {
 public:
  ExpertAmaxes(int64_t n_layers, int64_t n_experts);

  // One layer's grouped rows: offsets i32 [E+1] (expert e's rows are [offsets[e],
  // offsets[e+1])), rows f32 [R, D] the gathered inputs, hidden f32 [R, F] the SwiGLU outputs;
  // on any device (device ones are copied to the host here). A non-finite value is data_loss
  // naming the layer and expert: its scale would be meaningless.
  Status record(int64_t layer, const TensorView& offsets, const TensorView& rows,
                const TensorView& hidden);

  const ExpertAmax& at(int64_t layer, int64_t expert) const {
    return amaxes_[layer * n_experts_ + expert];
  }
  int64_t n_layers() const { return n_layers_; }
  int64_t n_experts() const { return n_experts_; }

 private:
  int64_t n_layers_, n_experts_;
  std::vector<ExpertAmax> amaxes_;  // [L, E]
};

}  // namespace dsv4::model
