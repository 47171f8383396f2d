// Gated softmax pooling of the KV compressor (transformers' DeepseekV4HCACompressor /
// DeepseekV4CSACompressor; ../shared/docs/deepseek_v4.md §2.4.4). Rows are tokens of
// consecutive blocks of m = ape rows, the first row at a block start, so row r gets the position
// bias ape[r mod m]. Each output dimension is a softmax over the window's slots (f32, max
// subtracted), weighting the kv of the same slot and dimension.
//   overlap == false (HCA, c = 1): entry w pools the m rows of block w.
//   overlap == true  (CSA, c = 2): each row is [A | B], d wide each; entry w pools block w's A
//     halves and block w+1's B halves (2m slots), so n rows hold n/m − 1 entries. A block whose
//     gate is −inf (the "previous block" before the first) weighs nothing.
//
// Dimension letters: S rows, m compress ratio, c halves, d entry width, n entries.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {

void compressor_pool(const CompressorPoolParams& p) {
  const auto [width, n_halves, ratio, n_rows, n_entries] = compressor_pool_dims(p);
  const int64_t row_width = n_halves * width;
  const float* kv = p.kv.data_as<const float>();
  const float* gate = p.gate.data_as<const float>();
  const float* ape = p.ape.data_as<const float>();
  float* out = p.out.data_as<float>();
  const int64_t n_slots = n_halves * ratio;
#pragma omp parallel if (n_entries * width * n_slots > kParallelWork)
  {
    std::vector<float> score(n_slots);
    std::vector<int64_t> offset(n_slots);
#pragma omp for schedule(static)
    for (int64_t w = 0; w < n_entries; ++w) {
      for (int64_t i = 0; i < width; ++i) {
        // Slot s is row w·m + s; with overlap the second block's slots read the B half.
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t s = 0; s < n_slots; ++s) {
          const int64_t col = (s / ratio) * width + i;
          offset[s] = (w * ratio + s) * row_width + col;
          score[s] = gate[offset[s]] + ape[(s % ratio) * row_width + col];
          max_score = std::max(max_score, score[s]);
        }
        float denom = 0.0f;
        for (int64_t s = 0; s < n_slots; ++s) {
          score[s] = std::exp(score[s] - max_score);
          denom += score[s];
        }
        float acc = 0.0f;
        for (int64_t s = 0; s < n_slots; ++s) acc += kv[offset[s]] * (score[s] / denom);
        out[w * width + i] = acc;
      }
    }
  }
}

}  // namespace dsv4::kernels::cpu
