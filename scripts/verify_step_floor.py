#!/usr/bin/env python3
"""The byte floor of a decode step of T tokens of one sequence against a step of one token
(issue 34: a speculative verify step of k + 1 tokens against a plain step), from a DeepSeek-V4
config.json. At B = 1 a step is bound by the bytes it reads, so the floor's ratio is the least a
verify step can cost over a plain one. The bytes are scripts/step_bytes.py's: the dense weights
read once whatever T, the routed experts the T tokens touch (E · (1 − (1 − k/E)^T) distinct ones
a layer under uniform routing), the sequence's cache at context P, the tokens' per-token rows.

Two checkpoints: the one the verify step was measured on (speculative_bench.sh: V4-Flash's
shapes cut to a CSA and an HCA layer, score-routed, every dense weight bf16 as the synthetic
writer stores it) and V4-Flash as released (every layer of the config, the FP8 linears of
../shared/docs/deepseek_v4.md §3.1.2 kept FP8 on the GPU). The MTP block drafts outside the
verify forward (bench splits it off), so it is not counted.

usage: scripts/verify_step_floor.py [CONFIG] [--context P] [--rate-gbs R]
"""
import argparse
import json

from step_bytes import distinct_experts, expert_bytes, layer_kinds, step_bytes


def report(name, c, stored, context, rate_gbs):
    kinds = layer_kinds(c)
    ratios = sorted({kind.ratio for kind in kinds})
    one = step_bytes(c, kinds, stored, 1, 1, context)
    print(f"{name}: {len(kinds)} layers (compress ratios {ratios}), context {context}")
    print("  T  experts/layer  GB/step  floor ms  floor(T)/floor(1)")
    for t in (1, 2, 3, 4):
        b = step_bytes(c, kinds, stored, t, 1, context)
        print(f"  {t}  {distinct_experts(c, t):13.2f}  {b / 1e9:7.3f}  {b / rate_gbs / 1e6:8.3f}"
              f"  {b / one:.3f}")
    routed = len(kinds) * distinct_experts(c, 1) * expert_bytes(c)
    print(f"  routed experts at T = 1: {routed / one:.0%} of the bytes")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config", nargs="?", default="tests/checkpoint/fixtures/v4_flash_config.json")
    p.add_argument("--context", type=int, default=64, help="position P of the step (bench: 64)")
    p.add_argument("--rate-gbs", type=float, default=3350,
                   help="read rate for the ms column (default: H100 SXM's HBM3 peak)")
    a = p.parse_args()
    c = json.load(open(a.config, encoding="utf-8"))
    # speculative_bench.sh's cut: a CSA and an HCA layer, no hash routing.
    measured = dict(c, num_hidden_layers=2, compress_ratios=[4, 128], num_hash_layers=0)
    report("measured checkpoint (speculative_bench.sh: a CSA and an HCA layer, dense bf16)",
           measured, "bf16", a.context, a.rate_gbs)
    report("the released model (its layers, FP8 linears kept FP8)", c, "fp8", a.context,
           a.rate_gbs)


if __name__ == "__main__":
    main()
