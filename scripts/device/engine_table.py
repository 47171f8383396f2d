#!/usr/bin/env python3
"""Issue 30's whole-model table from one engine_bench.sh call: per binary and batch size, the
decode step's wall time at each depth (synthetic checkpoints of the config's first N layers),
the per-layer slope and the intercept fitted to them (least squares), the whole model's step
extrapolated from that fit (an extrapolation, and printed as one), the memory floor of a layer
and the measured slope's ratio to it, the time to first token at each depth, and, where the
call ran ncu on that depth and batch, the step's kernels: launches, their summed time and the
wall step's share of it (GPU busy; ncu runs the kernels serialised at its own clocks, so the
share is an estimate).

The floor: the bytes a decode step of B sequences reads at each depth (scripts/step_bytes.py,
the FP8 linears held as the checkpoint stores them), fitted over the depths as the times are,
so its slope is the bytes of the layers the depths add; divided by the device-to-device copy
rate read_ceiling measured in the same call. ratio = ms a layer / floor ms a layer.

Input: the call's $OUT folder:
  engine.txt        "== NAME, layers L, batch B" lines, each followed by the bench's "time to
                    first token: X ms" and "decode step: X ms" lines
  config.json       the config the checkpoints were cut from
  linears_lL.txt    "fp8" or "bf16": how depth L's checkpoint stores the FP8 linears
                    (step_bytes.py --linears-of)
  read_ceiling.txt  read_ceiling's output, whose "D2D copy N GB/s" line is the rate
  ncu_NAME_lL_bB.txt  ncu_step_summary.py's output; its last "step at launch" line is the
                    last decode step
Without config.json, a depth's linears file or read_ceiling.txt the floor columns are "-" and
a note says which is missing.

    usage: engine_table.py OUT_DIR [--extrapolate LAYERS] [--context P]
"""
import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from step_bytes import STORAGES, decode_step_bytes  # noqa: E402  (scripts/, one level up)

HEADER = re.compile(r"== (\S+), layers (\d+), batch (\d+)")
STEP = re.compile(r"^decode step:\s+([\d.]+) ms")
TTFT = re.compile(r"^time to first token:\s+([\d.]+) ms")
NCU_STEP = re.compile(r"step at launch \d+: (\d+) launches, ([\d.]+) us")
COPY = re.compile(r"D2D copy ([\d.]+) GB/s")


def bench_lines(path):
    """({(build, batch): {layers: decode ms}}, {(build, batch): {layers: first-token ms}})."""
    steps, ttfts = collections.defaultdict(dict), collections.defaultdict(dict)
    key = None
    for line in open(path, encoding="utf-8"):
        header = HEADER.search(line)
        if header:
            build, layers, batch = header.groups()
            key = (build, int(batch)), int(layers)
            continue
        for pattern, table in ((STEP, steps), (TTFT, ttfts)):
            found = pattern.search(line.strip())
            if found and key:
                table[key[0]][key[1]] = float(found.group(1))
    return steps, ttfts


def kernels(folder, build, layers, batch):
    """(launches, µs) of the last decode step under ncu, or None."""
    path = os.path.join(folder, f"ncu_{build}_l{layers}_b{batch}.txt")
    if not os.path.exists(path):
        return None
    found = [NCU_STEP.search(line) for line in open(path, encoding="utf-8")]
    found = [m for m in found if m]
    return (int(found[-1].group(1)), float(found[-1].group(2))) if found else None


def fit(points):
    """Least-squares (slope, intercept) of values over layers; None with fewer than two depths."""
    if len(points) < 2:
        return None
    xs, ys = zip(*sorted(points.items()))
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


class Floor:
    """The bytes model and the copy rate of the call, or why there is no floor (`missing`)."""

    def __init__(self, folder, depths, context):
        self.missing, self.context = [], context
        self.config, self.linears, self.copy_gbs = None, {}, None
        config = os.path.join(folder, "config.json")
        if os.path.exists(config):
            self.config = json.load(open(config, encoding="utf-8"))
        else:
            self.missing.append("config.json")
        for depth in depths:
            path = os.path.join(folder, f"linears_l{depth}.txt")
            stored = open(path, encoding="utf-8").read().strip() if os.path.exists(path) else ""
            if stored in STORAGES:
                self.linears[depth] = stored
            else:
                self.missing.append(f"linears_l{depth}.txt (fp8 or bf16)")
        path = os.path.join(folder, "read_ceiling.txt")
        rates = [COPY.search(line) for line in open(path, encoding="utf-8")] \
            if os.path.exists(path) else []
        rates = [float(m.group(1)) for m in rates if m]
        if rates:
            self.copy_gbs = rates[0]
        else:
            self.missing.append("read_ceiling.txt (its \"D2D copy N GB/s\" line)")

    def bytes_fit(self, depths, batch):
        """(bytes a layer, intercept bytes) fitted over `depths` at `batch`, or None."""
        if self.missing:
            return None
        return fit({d: decode_step_bytes(self.config, d, self.linears[d], batch, self.context)
                    for d in depths})

    def ms(self, n_bytes):
        return n_bytes / self.copy_gbs / 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--extrapolate", type=int,
                   help="layers to extrapolate to (default: the config's, else 43)")
    p.add_argument("--context", type=int, default=272,
                   help="the decode steps' mean position (engine_bench.sh: prompt + 16)")
    a = p.parse_args()
    folder = a.out_dir
    steps, ttfts = bench_lines(os.path.join(folder, "engine.txt"))
    depths = sorted({layers for by_depth in steps.values() for layers in by_depth})
    floor = Floor(folder, depths, a.context)
    target = a.extrapolate or (floor.config or {}).get("num_hidden_layers", 43)
    cols = " | ".join(f"{d} layers ms" for d in depths)
    print(f"| binary | B | {cols} | ms a layer | intercept ms | {target} layers ms "
          "(extrapolated) | MB a layer | floor ms a layer | ratio | time to first token ms | "
          "kernels a step | kernel µs | GPU busy |")
    print("|---|---:|" + "---:|" * (len(depths) + 10))
    for (build, batch), by_depth in sorted(steps.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        walls = " | ".join(f"{by_depth[d]:.3f}" if d in by_depth else "-" for d in depths)
        line = fit(by_depth)
        fitted = (f"{line[0]:.3f} | {line[1]:.3f} | {line[1] + target * line[0]:.2f}"
                  if line else "- | - | -")
        per_layer = floor.bytes_fit(sorted(by_depth), batch)
        if per_layer and line:
            floor_ms = floor.ms(per_layer[0])
            floors = f"{per_layer[0] / 1e6:.1f} | {floor_ms:.3f} | {line[0] / floor_ms:.2f}"
        else:
            floors = "- | - | -"
        ttft = ttfts.get((build, batch), {})
        first = ", ".join(f"{ttft[d]:.1f} ({d} l.)" for d in depths if d in ttft) or "-"
        measured = [(d, kernels(folder, build, d, batch)) for d in depths]
        measured = [(d, k) for d, k in measured if k and d in by_depth]
        launch = ", ".join(f"{k[0]} ({d} l.)" for d, k in measured) or "-"
        kernel_us = ", ".join(f"{k[1]:.0f}" for _, k in measured) or "-"
        busy = ", ".join(f"{k[1] / 1e3 / by_depth[d]:.0%}" for d, k in measured) or "-"
        print(f"| {build} | {batch} | {walls} | {fitted} | {floors} | {first} | {launch} | "
              f"{kernel_us} | {busy} |")
    print()
    if floor.missing:
        print("no floor: missing " + "; ".join(floor.missing))
    else:
        held = ", ".join(f"{d} layers {floor.linears[d]}" for d in depths)
        print(f"floor: the bytes of a decode step of B sequences at position {a.context} "
              f"(scripts/step_bytes.py; FP8 linears held as {held}), fitted over the depths, "
              f"at the D2D copy rate read_ceiling measured in this call, {floor.copy_gbs:.0f} "
              "GB/s; ratio = ms a layer / floor ms a layer")


if __name__ == "__main__":
    main()
