// Synthetic checkpoints on disk for the loader tests, and a float64 reference decoder of every
// stored form written from the format descriptions (../shared/docs/deepseek_v4.md §3.1.5,
// §3.1.6, §3.3), independently of src/checkpoint/decode.cpp:
//   fp8    W[r, c] = e4m3(w[r, c]) · s[r/128, c/128]        (s e8m0 = 2^(b-127), or f32)
//   mxfp4  W[r, c] = e2m1(nibble c of row r) · 2^(s[r, c/32] - 127)
//   nvfp4  W[r, c] = e2m1(nibble c of row r) · e4m3(s[r, c/16]) · global
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/official_inventory.h"
#include "checkpoint/tiny_model.h"
#include "testing/tiny_checkpoint.h"

namespace dsv4::testing {

// ---- float64 decoders ----

inline double ref_bf16(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline double ref_e4m3(uint8_t b) {
  const int sign = b >> 7, exponent = (b >> 3) & 15, mantissa = b & 7;
  if (exponent == 15 && mantissa == 7) return NAN;
  const double magnitude = exponent == 0 ? mantissa / 8.0 * std::pow(2.0, -6)
                                         : (1.0 + mantissa / 8.0) * std::pow(2.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

inline double ref_e8m0(uint8_t b) { return std::pow(2.0, static_cast<int>(b) - 127); }

inline double ref_e2m1(uint8_t code) {
  static const double kMagnitude[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8) ? -kMagnitude[code & 7] : kMagnitude[code & 7];
}

inline double ref_scalar(DType dtype, const std::vector<uint8_t>& bytes, size_t i) {
  switch (dtype) {
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      return ref_bf16(h);
    }
    case DType::kF32: {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      return f;
    }
    case DType::kF8E4M3:
      return ref_e4m3(bytes[i]);
    case DType::kF8E8M0:
      return ref_e8m0(bytes[i]);
    default:
      ADD_FAILURE() << "no reference decoder for " << dtype_name(dtype);
      return 0;
  }
}

// ---- The checkpoint ----

struct StoredBytes {
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};

class SyntheticCheckpoint {
 public:
  // Random non-zero contents for every tensor of `list`, with the constraints real files keep:
  // expert ids in [0, E), positive NVFP4 scales, and one global scale per expert shared by its
  // w1 and w3 (§5 item 18).
  SyntheticCheckpoint(const std::vector<NamedShape>& list, int64_t n_experts,
                      std::mt19937_64& rng) {
    for (const NamedShape& t : list) {
      order_.push_back(t.name);
      tensors_[t.name] = {t.dtype, t.shape, contents(t, n_experts, rng)};
    }
  }

  StoredBytes& at(const std::string& name) { return tensors_.at(name); }
  const StoredBytes& at(const std::string& name) const { return tensors_.at(name); }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }

  // DIR/config.json and DIR/model.safetensors.
  Status write(const std::string& dir, const std::string& config_json, std::mt19937_64& rng) const {
    DSV4_RETURN_IF_ERROR(write_text(dir + "/config.json", config_json));
    std::vector<TinyTensor> tiny;
    for (const std::string& name : order_) {
      const StoredBytes& t = tensors_.at(name);
      tiny.push_back({name, t.dtype, t.shape, t.bytes});
    }
    return write_tiny_safetensors(dir + "/model.safetensors", tiny, rng);
  }

  // The f64 values of the [B, N, K] matrix stored under `weight` (a `.weight` name, or a fused
  // 3-D parameter name) with whatever scale siblings it has.
  std::vector<double> matrix(const std::string& weight, int64_t n, int64_t k) const {
    const StoredBytes& w = tensors_.at(weight);
    const std::string stem =
        weight.ends_with(".weight") ? weight.substr(0, weight.size() - 7) : weight;
    const bool fused = stem == weight;
    auto sibling = [&](const char* dotted, const char* underscored) -> const StoredBytes* {
      const std::string name = fused ? stem + underscored : stem + dotted;
      return has(name) ? &tensors_.at(name) : nullptr;
    };
    const StoredBytes* block = sibling(".scale", "_weight_scale");
    if (!block) block = sibling(".weight_scale", "_weight_scale");
    const StoredBytes* global = sibling(".weight_scale_2", "_weight_scale_2");
    const int64_t b_count =
        w.shape.numel() * (w.dtype == DType::kU8 || w.dtype == DType::kI8 ? 2 : 1) / (n * k);
    std::vector<double> out(static_cast<size_t>(b_count * n * k));
    for (int64_t b = 0; b < b_count; ++b) {
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) {
          const size_t i = static_cast<size_t>((b * n + r) * k + c);
          out[i] = element(w, block, global, b, r, c, n, k);
        }
      }
    }
    return out;
  }

 private:
  static double element(const StoredBytes& w, const StoredBytes* block, const StoredBytes* global,
                        int64_t b, int64_t r, int64_t c, int64_t n, int64_t k) {
    const size_t row = static_cast<size_t>(b * n + r);
    if (w.dtype == DType::kBF16 || w.dtype == DType::kF32)
      return ref_scalar(w.dtype, w.bytes, row * k + c);
    if (w.dtype == DType::kF8E4M3) {
      const size_t sn = static_cast<size_t>((n + 127) / 128),
                   sk = static_cast<size_t>((k + 127) / 128);
      return ref_e4m3(w.bytes[row * k + c]) *
             ref_scalar(block->dtype, block->bytes, (b * sn + r / 128) * sk + c / 128);
    }
    const uint8_t byte = w.bytes[row * (k / 2) + c / 2];
    const double e2m1 = ref_e2m1(c % 2 == 0 ? byte & 15 : byte >> 4);
    if (block->dtype == DType::kF8E8M0)
      return e2m1 * ref_e8m0(block->bytes[row * (k / 32) + c / 32]);
    const size_t g = global->shape.numel() == 1 ? 0 : static_cast<size_t>(b);
    return e2m1 * ref_e4m3(block->bytes[row * (k / 16) + c / 16]) *
           ref_scalar(DType::kF32, global->bytes, g);
  }

  static std::vector<uint8_t> f32_bytes(float v) {
    std::vector<uint8_t> out(4);
    std::memcpy(out.data(), &v, 4);
    return out;
  }

  static std::vector<uint8_t> contents(const NamedShape& t, int64_t n_experts,
                                       std::mt19937_64& rng) {
    const int64_t numel = t.shape.numel();
    if (t.name.ends_with("tid2eid")) {
      std::vector<uint8_t> out(static_cast<size_t>(numel) * dtype_size(t.dtype));
      for (int64_t i = 0; i < numel; ++i) {
        const int64_t id = static_cast<int64_t>(rng() % static_cast<uint64_t>(n_experts));
        std::memcpy(out.data() + i * static_cast<int64_t>(dtype_size(t.dtype)), &id,
                    dtype_size(t.dtype));
      }
      return out;
    }
    if ((t.name.ends_with("weight_scale_2") || t.name.ends_with("input_scale"))) {
      std::string shared = t.name;  // w1 and w3 of one expert: the same value
      if (const size_t at = shared.find(".w3."); at != std::string::npos)
        shared.replace(at, 4, ".w1.");
      std::mt19937_64 per_expert(std::hash<std::string>{}(shared));
      std::vector<uint8_t> out;
      for (int64_t i = 0; i < std::max<int64_t>(numel, 1); ++i) {
        const std::vector<uint8_t> v =
            f32_bytes(std::ldexp(1.0f + static_cast<float>(per_expert() % 1000) / 1000.0f, -8));
        out.insert(out.end(), v.begin(), v.end());
      }
      return out;
    }
    std::vector<uint8_t> out = random_nonzero_bytes(t.dtype, numel, rng);
    if (t.dtype == DType::kF8E4M3 && t.name.find("weight_scale") != std::string::npos) {
      for (uint8_t& b : out) b &= 0x7f;  // UE4M3 block scales are positive
    }
    return out;
  }

  std::vector<std::string> order_;
  std::map<std::string, StoredBytes> tensors_;
};

}  // namespace dsv4::testing
