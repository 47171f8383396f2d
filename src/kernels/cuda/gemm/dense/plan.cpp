// The dense linear's choice of kernel (plan.h). In order: the tensor cores wherever a bf16 (or
// FP8, decoded to the same bf16) weight has the rows to fill them, since they are exact to f32 too
// (x split into three bf16); else the CUDA cores: the narrow kernel for many rows of few outputs,
// tiled where a call has the rows and the tiles for every SM, else the few-rows kernel.
#include "kernels/cuda/gemm/dense/plan.h"

#include "kernels/cuda/gemm/dense/config.h"

namespace dsv4::kernels::cuda {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// A weight the tensor-core kernels read 8 elements at a time: bf16 (16 bytes, 16-byte aligned)
// or e4m3 (8 bytes, which the kernels decode to the same bf16), rows a multiple of 8 apart.
bool tensor_core_weight(const WeightRows& w) {
  const auto address = reinterpret_cast<uintptr_t>(w.data);
  return w.row_stride % 8 == 0 && ((w.dtype == DType::kBF16 && address % 16 == 0) ||
                                   (w.dtype == DType::kF8E4M3 && address % 8 == 0));
}

// The many-rows tensor-core kernel: a bf16 weight with 16-byte aligned rows of a multiple of 8,
// more rows of x than the few-rows kernel takes, and enough 128 × 128 tiles to spread (a
// few-rows call of mHC's 24 outputs over a 16384-wide K is faster on the CUDA cores than 16
// tiles walking K alone). From 17 rows: a tile of 128 tokens costs about the same at 17 rows as
// at 32, while 17-31 rows on the CUDA cores cost several times more (the tiled SGEMM
// computes a 64-row tile, the few-rows kernel reads the weight once per 8 tokens; lm_head at 16
// rows took 1414 µs there, docs/bench.md "Dense linears"); a verify step of 8 sequences × 3 rows
// is 24. It also keeps a batch's rows their bits from 17 to 32 rows (each output row sums its
// own products in one order whatever T), so a padded bucket of 32 is its unpadded step bit for
// bit.
bool tensor_cores_fit(const LinearOperands& o, int64_t n_groups) {
  const int64_t tiles_n = ceil_div(o.w.n_rows / n_groups, kTensorCoreTileN);
  const int64_t tiles_t = ceil_div(o.x.n_rows, kTensorCoreTileT);
  return tensor_core_weight(o.w) && o.x.n_rows > kFewRowsTcMaxTokens && o.w.n_cols > 0 &&
         o.w.n_cols % 8 == 0 && tiles_n * tiles_t * n_groups >= 32 && tiles_t <= 65535 &&
         o.x.n_rows < (int64_t{1} << 31);
}

// Where the few-rows tensor-core kernel beats the CUDA cores, measured on an H100 against the
// CUDA-core kernel (linear_bench, docs/bench.md, "Dense linears"): at 5-16 rows from 32 m-tiles on
// (V4-Flash's wkv, 512 outputs: 7.0 against 8.7 µs at 8 rows; lm_head 334 against 750); at 2-4
// rows, whose CUDA-core kernel pays each weight 4 multiply-adds, only from 128 (wq_a, 1024
// outputs: 7.5 against 5.9 µs at 2 rows; shared w1, 2048: 9.4 against 10.3). Below 32 m-tiles a
// few CTAs walk all of K (mHC's 24 mixes of 16384: 15.6 against 3.7 µs).
bool enough_m_tiles(int64_t n_rows, int64_t t) {
  const int64_t tiles = ceil_div(n_rows, kFewRowsTcRows);
  return tiles >= 32 && (t > 4 || tiles >= 128);
}

// The few-rows tensor-core kernel: a bf16 weight with 16-byte aligned rows, K a multiple of 32,
// groups of a multiple of 16 outputs, 2-16 rows of x in 16-byte aligned rows (a decode step of a
// batch), and enough m-tiles.
bool few_rows_tensor_cores_fit(const LinearOperands& o, int64_t n_groups) {
  const int64_t group_rows = o.w.n_rows / n_groups;
  return tensor_core_weight(o.w) && o.x.n_rows >= 2 && o.x.n_rows <= kFewRowsTcMaxTokens &&
         o.w.n_cols > 0 && o.w.n_cols % kFewRowsTcStepK == 0 &&
         (n_groups == 1 || group_rows % kFewRowsTcRows == 0) && o.x.row_stride % 4 == 0 &&
         aligned16(o.x.data) && o.w.n_rows < (int64_t{1} << 31) &&
         enough_m_tiles(o.w.n_rows, o.x.n_rows);
}

// Its warps a CTA: 16 where 8 would leave SMs short of 16 warps (a 1024-output projection has
// 64 m-tiles) and K has the steps for them, else 8.
int few_rows_tensor_core_warps(const LinearOperands& o, int n_sm) {
  const int64_t tiles =
      ceil_div(o.w.n_rows, kFewRowsTcRows) * ceil_div(o.x.n_rows, kFewRowsTcTokens);
  return tiles * 8 < 16 * int64_t{n_sm} && o.w.n_cols / kFewRowsTcStepK >= 16 ? 16 : 8;
}

// The CUDA-core few-rows kernel's shape, by the number of outputs N: with 8192 and more, a warp
// walks all of K for 4 of them; from 1024 eight warps split K for 4, from 128 for 1; below, 16
// warps split K for one (mHC's 24 mixes of a 16384-wide residual). Four outputs a warp need
// groups of a multiple of 4. Tokens a block: T rounded up to 1, 4 or 8 (every token costs each
// weight a multiply-add, so a one-token step must not pay for eight). Measured on the H200:
// linear_bench, docs/bench.md.
DensePlan few_rows(const LinearOperands& o, int64_t group_rows) {
  DensePlan plan;
  plan.kernel = DenseKernel::kFewRows;
  const bool fours = group_rows % 4 == 0;
  if (o.w.n_rows >= 8192 && fours) {
    plan.cols = 4, plan.split = 1, plan.warps = 8;
  } else if (o.w.n_rows >= 1024 && fours) {
    plan.cols = 4, plan.split = 8, plan.warps = 8;
  } else if (o.w.n_rows >= 128) {
    plan.cols = 1, plan.split = 8, plan.warps = 8;
  } else {
    plan.cols = 1, plan.split = kFewRowsNarrowSplit, plan.warps = kFewRowsNarrowSplit;
  }
  plan.tokens = o.x.n_rows == 1 ? 1 : o.x.n_rows <= 4 ? 4 : kFewRowsChunk;
  return plan;
}

// The narrow kernel (linear_narrow.cu): one group of at most kNarrowMaxOutputs outputs (mHC's 24
// mixes, the indexer's 64 head weights), rows that its 16-byte loads can read (x 16-byte aligned,
// K and the strides multiples of 4, the weight aligned to 4 of its elements), and from
// kNarrowMinRows rows. It sums each output as the few-rows kernel does at this N (config.h), so
// the line changes no bits, only which kernel is faster: it is drawn well above the batch sizes
// of a decode step, which stay on the few-rows kernel that is tuned for them (one block an output
// and up to 8 tokens; the narrow kernel's tile of 8 or 16 tokens would be mostly padding there).
bool narrow_fits(const LinearOperands& o, int64_t n_groups) {
  const auto address = reinterpret_cast<uintptr_t>(o.w.data);
  const int64_t w_element = o.w.dtype == DType::kF32 ? 4 : o.w.dtype == DType::kBF16 ? 2 : 1;
  return n_groups == 1 && o.w.n_rows <= kNarrowMaxOutputs && o.x.n_rows >= kNarrowMinRows &&
         o.x.n_cols % 4 == 0 && o.x.row_stride % 4 == 0 && aligned16(o.x.data) &&
         o.w.row_stride % 4 == 0 && address % (4 * w_element) == 0 &&
         ceil_div(o.x.n_rows, narrow_tokens(kNarrowWarps)) <= 65535;
}

// Its shape: outputs a warp, the fewest of 1, 2, 3, 4 or 8 that give the 8 warps every output
// (a warp's outputs × tokens are a lane's accumulators: 8 × 8 at most); and the blocks of a
// cluster, the fewest of 2, 4 and 8 that give every SM two blocks (a block alone on an SM waits
// on each step of x it stages; 8 at most, the portable cluster size).
DensePlan narrow(const LinearOperands& o, int n_sm) {
  DensePlan plan;
  plan.kernel = DenseKernel::kNarrow;
  plan.warps = kNarrowWarps;
  const int64_t per_warp = ceil_div(o.w.n_rows, kNarrowWarps);
  plan.cols = per_warp <= 4 ? static_cast<int>(per_warp) : 8;
  plan.tokens = narrow_tokens(plan.cols);
  const int64_t tiles = ceil_div(o.x.n_rows, plan.tokens);
  plan.split = 2;
  while (plan.split < kNarrowMaxCluster && tiles * plan.split < 2 * int64_t{n_sm}) plan.split *= 2;
  return plan;
}

}  // namespace

DensePlan plan_dense(const LinearOperands& o, int64_t n_groups, int n_sm) {
  DensePlan plan;
  if (o.x.n_rows == 0 || o.w.n_rows == 0) return plan;
  if (tensor_cores_fit(o, n_groups)) {
    plan.kernel = DenseKernel::kTensorCores;
    return plan;
  }
  if (few_rows_tensor_cores_fit(o, n_groups)) {
    plan.kernel = DenseKernel::kFewRowsTensorCores;
    plan.warps = few_rows_tensor_core_warps(o, n_sm);
    return plan;
  }
  if (narrow_fits(o, n_groups)) return narrow(o, n_sm);
  // The tiled kernel where it has rows to share a tile and blocks for every SM (132 on the
  // H200), else the few-rows one (then T < 64 · 128, so its grid's y stays small).
  const int64_t group_rows = o.w.n_rows / n_groups;
  const int64_t blocks = ceil_div(group_rows, kTiledTile) * ceil_div(o.x.n_rows, kTiledTile);
  if (o.x.n_rows <= 2 * kFewRowsChunk || blocks < 128) return few_rows(o, group_rows);
  plan.kernel = DenseKernel::kTiled;
  return plan;
}

std::string describe(const DensePlan& plan) {
  switch (plan.kernel) {
    case DenseKernel::kNone:
      return "none (empty call)";
    case DenseKernel::kTensorCores:
      return "tensor cores 128×128";
    case DenseKernel::kFewRowsTensorCores:
      return "tensor cores few rows, " + std::to_string(plan.warps) + " warps";
    case DenseKernel::kTiled:
      return "CUDA cores tiled 64×64";
    case DenseKernel::kFewRows:
      return "CUDA cores few rows, " + std::to_string(plan.cols) + " outputs × " +
             std::to_string(plan.split) + " warps, " + std::to_string(plan.tokens) + " tokens";
    case DenseKernel::kNarrow:
      return "CUDA cores narrow, " + std::to_string(plan.cols) + " outputs a warp, " +
             std::to_string(plan.tokens) + " tokens × " + std::to_string(plan.split) +
             " blocks a cluster";
  }
  return "?";
}

}  // namespace dsv4::kernels::cuda
