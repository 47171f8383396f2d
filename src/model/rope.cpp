// Every step below mirrors one tensor expression of transformers in f32, so that the table (and
// with it every rotated q, kv and compressed entry) matches to the last bit or two.
//
// Attention factor: YaRN would also scale cos/sin by an "mscale"; transformers' V4 config forces
// attention_factor = 1.0 on the compress rope (the official reference applies none), so cos/sin
// stay unscaled here and RopeConfig has no such field.
#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "model/upload.h"

namespace dsv4::model {
namespace {

// base ** (arange(0, dim, 2).float() / dim), element i, as f32.
float pair_frequency_base(double base, int64_t i, int64_t dim) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
  return static_cast<float>(std::pow(base, static_cast<double>(exponent)));
}

// find_correction_dim: the dim index whose wavelength fits `n_rotations` turns in the original
// context.
double correction_dim(double n_rotations, int64_t dim, double base, double original_max) {
  return (static_cast<double>(dim) *
          std::log(original_max / (n_rotations * 2.0 * std::numbers::pi))) /
         (2.0 * std::log(base));
}

}  // namespace

std::vector<float> rope_inv_freq(const checkpoint::RopeConfig& rope, int64_t rope_head_dim) {
  const int64_t n_pairs = rope_head_dim / 2;
  std::vector<float> inv_freq(n_pairs);
  if (!rope.yarn) {
    for (int64_t i = 0; i < n_pairs; ++i) {
      inv_freq[i] = 1.0f / pair_frequency_base(rope.theta, i, rope_head_dim);
    }
    return inv_freq;
  }
  // find_correction_range with truncate = True (transformers reads `truncate` from the top level
  // of V4's nested rope_parameters, where it never is, so it is always the default).
  const double original_max = static_cast<double>(rope.original_max_position);
  double low = std::floor(correction_dim(rope.beta_fast, rope_head_dim, rope.theta, original_max));
  double high = std::ceil(correction_dim(rope.beta_slow, rope_head_dim, rope.theta, original_max));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rope_head_dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's guard against a zero-width ramp
  const float factor = static_cast<float>(rope.factor);
  for (int64_t i = 0; i < n_pairs; ++i) {
    const float pos_freq = pair_frequency_base(rope.theta, i, rope_head_dim);
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (factor * pos_freq);
    const float ramp = std::clamp(
        (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f,
        1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    inv_freq[i] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return inv_freq;
}

Result<RopeTables> RopeTables::create(const checkpoint::ModelConfig& config, Device device) {
  RopeTables tables;
  for (auto [rope, table] : {std::pair{&config.rope_sliding, &tables.sliding},
                             std::pair{&config.rope_compressed, &tables.compressed}}) {
    const std::vector<float> inv_freq = rope_inv_freq(*rope, config.rope_head_dim);
    DSV4_ASSIGN_OR_RETURN(*table,
                          upload(inv_freq, {static_cast<int64_t>(inv_freq.size())}, device));
  }
  return tables;
}

TensorView RopeTables::of_layer(const checkpoint::ModelConfig& config, int64_t layer) const {
  const bool is_sliding = config.schedule(layer).attention == checkpoint::AttentionType::kSliding;
  return is_sliding ? sliding.view() : compressed.view();
}

}  // namespace dsv4::model
