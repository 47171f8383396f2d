// The two numerics profiles a model runs in (docs/numerics.md).
#pragma once

namespace dsv4 {

// kExact: every op f32-exact against transformers (the CPU's only profile, and what `dsv4
// verify` checks). kFast: DeepSeek's own inference numerics on the GPU (FP8 linears with
// 1 × 128 activation groups, bf16 tensor-core attention, FP8 indexer), measured against kExact.
enum class Numerics { kExact, kFast };

}  // namespace dsv4
