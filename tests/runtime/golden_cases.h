// The oracle's prompts and transformers' cached greedy continuations of one golden folder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/golden.h"

namespace dsv4::testing {

struct GoldenCase {
  std::vector<int64_t> prompt, greedy;
};

inline std::vector<GoldenCase> golden_cases(const std::string& folder) {
  const auto ref = open_golden(folder + "/reference.safetensors");
  std::vector<GoldenCase> cases;
  for (int i = 0; ref.find("prompt_" + std::to_string(i)); ++i) {
    const Tensor p = golden_tensor(ref, "prompt_" + std::to_string(i));
    const Tensor g = golden_tensor(ref, "greedy_" + std::to_string(i));
    cases.push_back({{p.data_as<int64_t>(), p.data_as<int64_t>() + p.numel()},
                     {g.data_as<int64_t>(), g.data_as<int64_t>() + g.numel()}});
  }
  return cases;
}

}  // namespace dsv4::testing
