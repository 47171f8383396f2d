// Every tolerance the tests use, each with the reason it is what it is. A test that needs a new
// one adds it here rather than writing a literal.
#pragma once

namespace dsv4::testing {

// An f32 op against a float64 reference of the same math: a few ulps per accumulation step
// over K ≤ a few thousand terms, relative to the row norm.
inline constexpr double kF32OpRelTol = 1e-5;

// A GEMM with the SwiGLU epilogue, silu(gate) · up, f32 on both sides: the product adds the two
// GEMMs' relative errors, and silu multiplies the gate's by |1 + g·(1 - σ(g))|, which is up to
// ~3 where the outputs are not negligible (g ≈ -2); so ~4 × kF32OpRelTol. Measured on the H200
// (T = 300, N = 256, K = 1024): 1.0006e-5 and 2.47e-5 on two fresh seeds. A wrong index, scale or
// clamp moves rows by > 1e-3.
inline constexpr double kSwigluF32RelTol = 4e-5;

// A CUDA f32 op against its CPU reference on the same f32 inputs: both accumulate in f32 but in
// different orders (block reductions, FMA contraction on the device, OpenBLAS blocking on the
// host) and expf/cosf may differ from glibc in the last ulp; over rows of ≤ ~1000 terms that is
// ≤ ~1e-6 relative. 1e-5 still fails a wrong index, scale or clamp (errors ≥ 1e-3).
inline constexpr double kCudaF32OpRelTol = 1e-5;

// The CPU forward against transformers' fp32 forward: the acceptance bar of issue 4. Both sides
// are f32 with different summation orders (OpenBLAS vs torch's GEMMs), which over ~6 layers
// leaves ~1e-6 relative; 1e-4 leaves room without hiding a wrong formula (those give > 1e-2).
inline constexpr double kGoldenLogitsRelTol = 1e-4;

// One submodule's output against layers.safetensors: a single layer's worth of f32 rounding.
inline constexpr double kGoldenLayerRelTol = 1e-4;

// An f32-accumulated result rounded to bf16 on output, against the unrounded reference: bf16
// keeps 8 significant bits, so each element is within 2^-8 ≈ 3.9e-3 relative (round to nearest)
// and so is a row's norm, plus the f32 part (~1e-6); 4e-3 still fails on a wrong alpha or a
// missed row (errors ≥ 1e-1). Against a reference rounded to bf16 too, one flip can cost a
// whole ulp (2^-7): compare with the unrounded one.
inline constexpr double kBf16OutputRelTol = 4e-3;

// A layer whose activations are staged to NVFP4 (W4A4) against the same layer with f32
// activations, the worst of its rows: E2M1 with a UE4M3 scale per 16 values leaves ~10% RMS
// relative error per staged tensor, and an expert stages two (its input and its SwiGLU output).
// Measured on MoeNvfp4Test's 9-row draws (seeds 1-400): median 0.22, 99th percentile 0.32, worst
// 0.36, and 0.39 for one seed CI drew (DSV4_TEST_SEED=4308889933233572424), which a bound of
// 0.35 fails. 0.5 still fails a wrong global or block scale (errors of order 1).
inline constexpr double kNvfp4ActivationRelTol = 0.5;

// The fused MoE block (moe_ffn) in W4A16 against float64 or against another summation order:
// the NVFP4 products are exact and f32 sums agree to ~1e-6, but the SwiGLU output is rounded to
// bf16, and a different order can move an activation across a rounding boundary (one bf16 ulp,
// 2^-8 of it). A few such flips per row stay below 2e-3; a wrong expert, weight or scale is > 0.1.
inline constexpr double kMoeW4A16RelTol = 2e-3;

// The same in W4A4, over the whole output: a flipped activation moves by one E2M1 step (up to a
// third of its value) instead of a bf16 ulp, so a rare flip can cost one row ~1e-2; measured
// over all T·D values it stays far below 2e-2, which a wrong scale or expert still exceeds.
inline constexpr double kMoeW4A4RelTol = 2e-2;

// attention_forward over one sequence in steps (chunked prefill, decode) against the same
// sequence in one call: the same f32 formulas, only the GEMMs' blocking changes with the number
// of rows (~1e-7 relative); a cache bug (a wrong window row, a lost compressor row, an entry at
// the wrong position) moves rows by > 1e-2.
inline constexpr double kStepwiseRelTol = 1e-5;

// NVFP4 round-to-nearest of Gaussian-like weights: relative RMS error 0.095 at any scale
// (../shared/docs/nvfp4.md §5.2; the golden experts measure 0.0948-0.0957). 0.11 fails on a
// wrong block or global scale or a code off by one step (those give ≥ 0.2).
inline constexpr double kNvfp4WeightRelRmsTol = 0.11;

// A whole tiny random-weight model with NVFP4 experts in W4A16 against the same model with the
// dequantized experts dense, per logits row: W4A16 rounds each routed expert's input and SwiGLU
// output to bf16 (2^-9 relative per element), which moves one MoE layer's output by ~4e-3 and
// tiny_b's logits rows by ~6e-3 (measured). 2e-2 still fails a wrong block or global scale, a
// lost expert or staging to NVFP4 (W4A4 lands near 0.8).
inline constexpr double kBf16ExpertInputsModelRelTol = 2e-2;

// A whole tiny random-weight model with NVFP4 experts in W4A4 against the same weights with f32
// activations (W4A16), per logits row. These models amplify perturbations (NVFP4 weight rounding
// alone moves tiny_b's logits rows by ~0.65 against bf16), so W4A4 lands near 0.8 and only a
// gross failure is caught here (NaN, saturation blowing rows up by orders of magnitude); the
// tight bound on staged activations is per layer (kNvfp4ActivationRelTol).
inline constexpr double kNvfp4ActivationModelRelTol = 1.5;

// The FP8 linear (kernels/ops.h linear_fp8) against a float64 evaluation of the same quantized
// operands, as a bound on |y - y64| relative to Σ_k |a_k · w_k| (the scaled products' absolute
// sum, which bounds any summation order's rounding). CPU: f32 partial sums of ≤ 128 exact
// products (≤ 127 roundings of 2^-24 each) and one fused promotion a block, so ≤ (127 + Kb)·2^-24;
// 2^-16 covers K up to ~30k. CUDA: the wgmma FP8 path truncates its running sum inside a
// 128-column block (DeepSeek-V3's report: ~14 bits kept on Hopper, the reason for promoting
// every 128 columns); measured up to 6.2e-4 (H100) and 7.9e-4 = 2^-10.3 (H200) over 2.4M outputs
// (the mma.sync stream kernel: ≤ 1.8e-7); 2^-9 leaves a factor 2.5. A wrong scale, index or block
// moves y by about |y|, ~Σ|a_k · w_k| / √K for random signs: ≥ 1e-2 at K ≤ 10^4.
inline constexpr double kFp8LinearCpuSumRelTol = 1.0 / 65536.0;
inline constexpr double kFp8LinearCudaSumRelTol = 1.0 / 512.0;

// The fast profile's linear (activation quantized to e4m3 in 1 × 128 groups with power-of-two
// scales) against the exact one on the same FP8 weight, per row: rounding to 3 mantissa bits
// moves each activation by ≤ 2^-4 of itself, ~2.5 % RMS for Gaussian rows (more for the values
// a group's scale pushes toward e4m3's subnormals), and a row of random-sign products keeps
// that relative error. 0.06 leaves room for a row's worst draws; a wrong group scale or a lost
// block moves rows by ≥ 0.3.
inline constexpr double kFastLinearRelTol = 0.06;

// The whole tiny random-weight golden models with FP8 linears, their linears in the fast profile
// against exact, per logits row: each linear moves by ~2.5 % (kFastLinearRelTol) and these models
// amplify perturbations (kNvfp4ActivationModelRelTol). Measured with the CPU reference of the FP8
// linear, prompt_0's prefill: 0.217-0.356 over the six models (docs/numerics.md); 0.75 leaves
// twice the worst for the GPU's other summation order, and still fails NaN or a wrong scale
// (rows of order 1 and more).
inline constexpr double kFastModelLogitsRelTol = 0.75;

// The fast profile's sparse attention (sparse_attention_bf16) on the GPU against its CPU
// reference, per output row: both see the same bf16 q and rows, but the GPU also rounds its
// unnormalised probabilities to bf16 before weighting the rows (2⁻⁹ relative each, uniformly
// signed), which moves a row o = Σ p_j·v_j by ~2⁻⁹/√3 ≈ 1.1e-3 of its norm whatever the spread
// of p; the f32 sums add ~1e-6. 4e-3 (2⁻⁸) still fails a wrong candidate, scale or sink (≥ 5e-2).
inline constexpr double kBf16AttentionRelTol = 4e-3;

// The same op against the exact f32 one (the per-op cost of the fast profile), on uniform
// [−1, 1] inputs at Dh = 512 with logits scaled to spread p over tens of candidates: q's and the
// rows' bf16 rounding moves each logit by ~2e-3 rms and each value by 2⁻⁹, the probabilities'
// rounding adds 1.1e-3: ~5e-3 a row, the worst rows about twice that. 2e-2 still fails a wrong
// candidate or sink (≥ 5e-2).
inline constexpr double kBf16AttentionVsExactRelTol = 2e-2;

// The fast profile's indexer scores (indexer_scores_fp8) on the GPU against its CPU reference,
// per scores row: the E4M3 values and scales are the same bits, the products exact; only the
// tensor cores' f32 sums (their FP8 accumulation keeps fewer bits than an FMA chain, ~2⁻¹³ of
// the partial sums) and the order over heads differ. 1e-3 still fails a wrong scale or a
// mis-quantized row (≥ 3e-2).
inline constexpr double kFp8IndexerRelTol = 1e-3;

// The same op against the exact f32 one: E4M3 keeps 3 mantissa bits, so each quantized q and k
// value is off by up to 2⁻⁴ relative (~3.6 % rms), a dot product by ~5 % of its rms, and a
// score, a weighted sum over 64 heads of ReLU'd dots, by about as much. 0.15 still fails a scale
// off by a power of two (≥ 0.5).
inline constexpr double kFp8IndexerVsExactRelTol = 0.15;

// A golden model's logits with the fast profile's attention ops (bf16 sparse attention, FP8
// indexer scores) against the exact profile's, per row, on prompts whose indexer picks every
// compressed entry (so only the attention's rounding differs): each attention output moves by
// ~3e-3 (fast_attention_bench, kBf16AttentionRelTol), and tiny_a's random weights amplify a
// perturbation about tenfold layer over layer (its FP8 linears' 2.5 % a row move its logits by
// 0.24, docs/numerics.md): measured on the H200, 0.0048 (5 tokens) and 0.078 (21 tokens). The
// trained model's perplexity is the measure of accuracy (fast within 0.03 % of exact, docs/
// quality.md); this bound catches a fast op on the wrong candidates or heads, which moves the
// logits like the 130-token prompt whose FP8 scores pick other entries (0.31).
inline constexpr double kFastAttentionLogitsRelTol = 0.15;

}  // namespace dsv4::testing
