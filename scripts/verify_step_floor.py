#!/usr/bin/env python3
"""The byte floor of a decode step of T tokens of one sequence against a step of one token
(issue 34: a speculative verify step of k + 1 tokens against a plain step), from a DeepSeek-V4
config.json. At B = 1 a step is bound by the bytes it reads, so the floor's ratio is the least a
verify step can cost over a plain one:

  bytes(T) = the dense weights, read once whatever T (attention with its compressor and indexer,
             the router, the shared expert, the mHC mixing, the head)
           + the routed experts the T tokens touch: E · (1 − (1 − k/E)^T) distinct experts a
             layer when each token picks its k of E uniformly (as the synthetic checkpoints route;
             bench/checkpoint/synthetic_checkpoint.h), each expert's three NVFP4 matrices at
             0.5625 bytes a value (docs/nvfp4.md)
           + the KV cache at context P (read once a step; at the bench's P = 64, nothing).

Two checkpoints: the one the verify step was measured on (speculative_bench.sh: V4-Flash's
shapes cut to a CSA and an HCA layer, score-routed, every dense weight bf16 as the synthetic
writer stores it) and V4-Flash as released (every layer of the config, the FP8 linears of
../shared/docs/deepseek_v4.md §3.1.2 kept FP8 on the GPU, the rest bf16). The MTP block drafts
outside the verify forward (bench splits it off), so it is not counted.

usage: scripts/verify_step_floor.py [CONFIG] [--context P] [--rate-gbs R]
"""
import argparse
import json

NVFP4_BYTES = 0.5625  # 4-bit value + an e4m3 scale per 16 values
BF16, F32 = 2, 4
FP8 = 1 + 4 / (128 * 128)  # e4m3 + an f32 scale per 128 x 128 block


def layer_bytes(c, ratio, dense, fp8):
    """One layer's dense bytes. `dense`: bytes a value of the bf16-stored weights; `fp8`: of the
    weights the release stores in FP8 (the synthetic checkpoint writes both as bf16)."""
    d, q, h, dh = c["hidden_size"], c["q_lora_rank"], c["num_attention_heads"], c["head_dim"]
    g, r, f = c["o_groups"], c["o_lora_rank"], c["moe_intermediate_size"]
    m, e = c["hc_mult"], c["n_routed_experts"]
    attention = (q * d + h * dh * q + dh * d + g * r * (h // g) * dh + d * g * r) * fp8
    compressor = indexer = 0
    if ratio:
        c_dh = (2 if ratio == 4 else 1) * dh  # CSA overlaps two blocks
        compressor = 2 * c_dh * d * dense
        if ratio == 4:
            hi, di = c["index_n_heads"], c["index_head_dim"]
            indexer = hi * di * q * fp8 + (hi * d + 2 * 2 * di * d) * dense
    shared = 3 * f * d * c.get("n_shared_experts", 1) * fp8
    router = e * d * dense
    mixing = 2 * (2 + m) * m * m * d * F32  # hc_attn and hc_ffn fn
    return attention + compressor + indexer + shared + router + mixing


def cache_bytes(c, ratio, context):
    """The KV cache one token's attention reads at position `context`: the window ring, and the
    compressed entries (CSA: the indexer's keys of all, then its top-k picks; HCA: all)."""
    dh, window = c["head_dim"], c["sliding_window"]
    b = min(context, window) * dh * F32
    if ratio == 4:
        entries = context // 4
        b += entries * c["index_head_dim"] * F32 + min(entries, c["index_topk"]) * dh * F32
    elif ratio:
        b += context // ratio * dh * F32
    return b


def expert_bytes(c):
    return 3 * c["moe_intermediate_size"] * c["hidden_size"] * NVFP4_BYTES


def distinct_experts(c, t):
    e, k = c["n_routed_experts"], c["num_experts_per_tok"]
    return e * (1 - (1 - k / e) ** t)


def step_bytes(c, ratios, dense, fp8, t, context):
    head = c["vocab_size"] * c["hidden_size"] * BF16
    routed = distinct_experts(c, t) * expert_bytes(c)
    return head + sum(layer_bytes(c, r, dense, fp8) + routed + cache_bytes(c, r, context)
                      for r in ratios)


def report(name, c, ratios, dense, fp8, context, rate_gbs):
    one = step_bytes(c, ratios, dense, fp8, 1, context)
    print(f"{name}: {len(ratios)} layers (compress ratios {sorted(set(ratios))}), context {context}")
    print("  T  experts/layer  GB/step  floor ms  floor(T)/floor(1)")
    for t in (1, 2, 3, 4):
        b = step_bytes(c, ratios, dense, fp8, t, context)
        print(f"  {t}  {distinct_experts(c, t):13.2f}  {b / 1e9:7.3f}  {b / rate_gbs / 1e6:8.3f}"
              f"  {b / one:.3f}")
    dense_share = (one - len(ratios) * distinct_experts(c, 1) * expert_bytes(c)) / one
    print(f"  routed experts at T = 1: {1 - dense_share:.0%} of the bytes")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config", nargs="?", default="tests/checkpoint/fixtures/v4_flash_config.json")
    p.add_argument("--context", type=int, default=64, help="position P of the step (bench: 64)")
    p.add_argument("--rate-gbs", type=float, default=3350,
                   help="read rate for the ms column (default: H100 SXM's HBM3 peak)")
    a = p.parse_args()
    c = json.load(open(a.config))
    report("measured checkpoint (speculative_bench.sh: a CSA and an HCA layer, dense bf16)", c,
           [4, 128], BF16, BF16, a.context, a.rate_gbs)
    report("the released model (its layers, FP8 linears kept FP8)", c,
           c["compress_ratios"][: c["num_hidden_layers"]], BF16, FP8, a.context, a.rate_gbs)


if __name__ == "__main__":
    main()
