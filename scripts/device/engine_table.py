#!/usr/bin/env python3
"""Issue 30's whole-model table from one engine_bench.sh call: per binary and batch size, the
decode step's wall time at each depth (synthetic checkpoints of the config's first N layers),
the per-layer slope and the intercept fitted to them (least squares), the 43-layer step
extrapolated from that fit (an extrapolation, and printed as one), and, where the call ran ncu
on that depth and batch, the step's kernels: launches, their summed time and the wall step's
share of it (GPU busy; ncu runs the kernels serialised at its own clocks, so the share is an
estimate).

Input: the call's $OUT folder: engine.txt (lines "== BUILD, layers L, batch B" followed by the
bench's "decode step: X ms" line) and ncu_BUILD_lL_bB.txt (ncu_step_summary.py's output; its
last "step at launch" line is the last decode step).

    usage: engine_table.py OUT_DIR [LAYERS_TO_EXTRAPOLATE]
"""
import collections
import os
import re
import sys

HEADER = re.compile(r"== (\S+), layers (\d+), batch (\d+)")
STEP = re.compile(r"decode step:\s+([\d.]+) ms")
NCU_STEP = re.compile(r"step at launch \d+: (\d+) launches, ([\d.]+) us")


def wall_steps(path):
    """{(build, batch): {layers: ms}} from engine.txt."""
    steps = collections.defaultdict(dict)
    key = None
    for line in open(path, encoding="utf-8"):
        header = HEADER.search(line)
        if header:
            key = header.groups()
            continue
        step = STEP.search(line)
        if step and key:
            build, layers, batch = key
            steps[(build, int(batch))][int(layers)] = float(step.group(1))
    return steps


def kernels(folder, build, layers, batch):
    """(launches, µs) of the last decode step under ncu, or None."""
    path = os.path.join(folder, f"ncu_{build}_l{layers}_b{batch}.txt")
    if not os.path.exists(path):
        return None
    found = [NCU_STEP.search(line) for line in open(path, encoding="utf-8")]
    found = [m for m in found if m]
    return (int(found[-1].group(1)), float(found[-1].group(2))) if found else None


def fit(points):
    """Least-squares (slope, intercept) of ms over layers; None with fewer than two depths."""
    if len(points) < 2:
        return None
    xs, ys = zip(*sorted(points.items()))
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def main():
    folder = sys.argv[1]
    target = int(sys.argv[2]) if len(sys.argv) > 2 else 43
    steps = wall_steps(os.path.join(folder, "engine.txt"))
    depths = sorted({layers for by_depth in steps.values() for layers in by_depth})
    cols = " | ".join(f"{d} layers ms" for d in depths)
    print(f"| binary | B | {cols} | ms a layer | intercept ms | {target} layers ms "
          "(extrapolated) | kernels a step | kernel µs | GPU busy |")
    print("|---|---:|" + "---:|" * (len(depths) + 6))
    for (build, batch), by_depth in sorted(steps.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        walls = " | ".join(f"{by_depth[d]:.3f}" if d in by_depth else "-" for d in depths)
        line = fit(by_depth)
        fitted = (f"{line[0]:.3f} | {line[1]:.3f} | {line[1] + target * line[0]:.2f}"
                  if line else "- | - | -")
        measured = [(d, kernels(folder, build, d, batch)) for d in depths]
        measured = [(d, k) for d, k in measured if k and d in by_depth]
        launch = ", ".join(f"{k[0]} ({d} l.)" for d, k in measured) or "-"
        kernel_us = ", ".join(f"{k[1]:.0f}" for _, k in measured) or "-"
        busy = ", ".join(f"{k[1] / 1e3 / by_depth[d]:.0%}" for d, k in measured) or "-"
        print(f"| {build} | {batch} | {walls} | {fitted} | {launch} | {kernel_us} | {busy} |")


if __name__ == "__main__":
    main()
