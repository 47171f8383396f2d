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

Issue 31's prefill, when the call measured one (gemm_rates.txt present): per binary and batch
size, the time to first token (the prefill of B prompts of P tokens) at each depth, fitted as
above (ms a layer, intercept), the whole model's prefill and tokens/s extrapolated from the fit,
each binary's tokens/s over the first one's (variants.txt's order: the "before" or exact path),
and the compute floor of a layer (scripts/step_flops.py: the flops of each op at the dense GEMM
rate its operands take in the binary's numerics profile, measured by gemm_rates in the same call;
fitted over the depths, so the layers the depths add) with the slope's ratio to it. Then the
floor per op, and, where ncu ran the prefill, ncu's µs per group of kernels a layer against the
floors of the ops those kernels run (a fit over the ncu depths; from one depth, its total over
its layers, the head and embedding included).

More input for it:
  gemm_rates.txt    gemm_rates' output: "rate NAME: X TFLOP/s" for bf16, fp8 and f32
  variants.txt      NAME, BINARY, FLAGS a line (tab-separated): the profile is the FLAGS'
                    --numerics (auto or none: fast, dsv4's default on cuda)
  ncu_NAME_lL_bB_prefill.txt  ncu_step_summary.py's "group NAME: N launches, X us" lines

Folders made or edited by hand: a line whose number does not parse ("1.2.3") or a rate that is
not positive is named on stderr (file:line) and skipped, as if it were not there; a config.json
that is no JSON or that the bytes model refuses (a key missing, fewer layers than a depth)
counts as missing, with the reason, as does a binary of engine.txt that variants.txt does not
list. Without engine.txt the script says so and exits with 1.

    usage: engine_table.py OUT_DIR [--extrapolate LAYERS] [--context P] [--prompt-tokens P]
"""
import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from step_bytes import STORAGES, decode_step_bytes  # noqa: E402  (scripts/, one level up)
import step_flops  # noqa: E402

HEADER = re.compile(r"== (\S+), layers (\d+), batch (\d+)")
STEP = re.compile(r"^decode step:\s+([\d.]+) ms")
TTFT = re.compile(r"^time to first token:\s+([\d.]+) ms")
NCU_STEP = re.compile(r"step at launch \d+: (\d+) launches, ([\d.]+) us")
COPY = re.compile(r"D2D copy ([\d.]+) GB/s")
RATE = re.compile(r"^rate (\w+): ([\d.]+) TFLOP/s")
GROUP = re.compile(r"^group (.+): (\d+) launches, ([\d.]+) us")
NUMERICS = re.compile(r"--numerics[ =](\w+)")


def numbered_lines(path):
    """(line number, line stripped) of path's lines; bytes that are not UTF-8 read as U+FFFD, so
    such a line matches no pattern. None without the file."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        return [(n, line.strip()) for n, line in enumerate(f, 1)]


def positive(text):
    """A rate: a float above 0 (a rate of 0 would divide by zero)."""
    value = float(text)
    if not value > 0:
        raise ValueError(f"{text} is not a positive rate")
    return value


def values(found, types, path, number, line):
    """found's groups converted by `types` (int, float, positive), or None where one does not
    convert: the line is named on stderr and skipped."""
    try:
        return tuple(convert(text) for convert, text in zip(types, found.groups()))
    except ValueError as e:
        print(f"engine_table.py: {path}:{number}: {e}; line skipped: {line}", file=sys.stderr)
        return None


def parsed(path, pattern, *types):
    """[groups of each line of path that `pattern` matches, converted by `types`]: a line whose
    values do not convert is said and skipped (values()); [] without the file."""
    found = [(n, line, pattern.search(line)) for n, line in numbered_lines(path) or []]
    rows = [values(m, types, path, n, line) for n, line, m in found if m]
    return [row for row in rows if row is not None]


def bench_lines(path):
    """({(build, batch): {layers: decode ms}}, {(build, batch): {layers: first-token ms}})."""
    steps, ttfts = collections.defaultdict(dict), collections.defaultdict(dict)
    key = None
    for number, line in numbered_lines(path):
        header = HEADER.search(line)
        if header:
            build, layers, batch = header.groups()
            key = (build, int(batch)), int(layers)
            continue
        for pattern, table in ((STEP, steps), (TTFT, ttfts)):
            found = pattern.search(line)
            ms = values(found, (float,), path, number, line) if found and key else None
            if ms:
                table[key[0]][key[1]] = ms[0]
    return steps, ttfts


def kernels(folder, build, layers, batch):
    """(launches, µs) of the last decode step under ncu, or None."""
    found = parsed(os.path.join(folder, f"ncu_{build}_l{layers}_b{batch}.txt"), NCU_STEP, int,
                   float)
    return found[-1] if found else None


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
        self.linears, self.copy_gbs = {}, None
        self.config = self.read_config(os.path.join(folder, "config.json"), depths)
        for depth in depths:
            lines = numbered_lines(os.path.join(folder, f"linears_l{depth}.txt")) or []
            stored = "".join(line for _, line in lines)
            if stored in STORAGES:
                self.linears[depth] = stored
            else:
                self.missing.append(f"linears_l{depth}.txt (fp8 or bf16)")
        rates = parsed(os.path.join(folder, "read_ceiling.txt"), COPY, positive)
        if rates:
            self.copy_gbs = rates[0][0]
        else:
            self.missing.append("read_ceiling.txt (its \"D2D copy N GB/s\" line)")

    def read_config(self, path, depths):
        """The config as a dict, or None with the reason in `missing`: no file, no JSON, or a
        config the bytes model refuses at the deepest depth (a key it reads missing, fewer
        layers)."""
        if not os.path.exists(path):
            self.missing.append("config.json")
            return None
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                config = json.load(f)
            if depths:
                decode_step_bytes(config, max(depths), STORAGES[0], 1, self.context)
        except json.JSONDecodeError as e:
            self.missing.append(f"config.json (no JSON at line {e.lineno}: {e.msg})")
            return None
        except (KeyError, TypeError, ValueError) as e:
            self.missing.append(f"config.json (the bytes model refuses it: {e!r})")
            return None
        return config

    def bytes_fit(self, depths, batch):
        """(bytes a layer, intercept bytes) fitted over `depths` at `batch`, or None."""
        if self.missing:
            return None
        return fit({d: decode_step_bytes(self.config, d, self.linears[d], batch, self.context)
                    for d in depths})

    def ms(self, n_bytes):
        return n_bytes / self.copy_gbs / 1e6


def per_layer(by_depth):
    """A layer's share of values measured at several depths: the fit's slope over two or more,
    else the one depth's value over its layers."""
    line = fit(by_depth)
    if line:
        return line[0]
    (depth, value), = by_depth.items()
    return value / depth


def variant_profiles(folder):
    """[(name, profile)] in the call's order (variants.txt), or None without the file."""
    lines = numbered_lines(os.path.join(folder, "variants.txt"))
    if lines is None:
        return None
    profiles = []
    for _, line in lines:
        if line:
            name, _, flags = (line.split("\t") + ["", ""])[:3]
            found = NUMERICS.search(flags)
            profile = found.group(1) if found else "auto"
            profiles.append((name, "fast" if profile == "auto" else profile))
    return profiles


class Prefill:
    """What the prefill's floors need: the rates, the profiles of the binaries `names`, the
    prompt, the bytes model's config and storage (Floor's), or why the floors cannot be given
    (`missing`)."""

    def __init__(self, folder, floor, prompt, names):
        self.folder, self.floor, self.prompt = folder, floor, prompt
        self.rates = dict(parsed(os.path.join(folder, "gemm_rates.txt"), RATE, str, positive))
        self.profiles = variant_profiles(folder)
        self.missing = [m for m in floor.missing if not m.startswith("read_ceiling")]
        absent = [r for r in step_flops.RATES if r not in self.rates]
        if absent:
            self.missing.append("gemm_rates.txt's rate " + ", ".join(absent))
        if self.profiles is None:
            self.missing.append("variants.txt")
            return
        if any(p not in step_flops.PROFILES for _, p in self.profiles):
            self.missing.append("a --numerics of " + "/".join(step_flops.PROFILES))
        unlisted = sorted(set(names) - {n for n, _ in self.profiles})
        if unlisted:
            self.missing.append("variants.txt's line for " + ", ".join(unlisted))

    def measured(self):
        return os.path.exists(os.path.join(self.folder, "gemm_rates.txt"))

    def profile(self, name):
        return dict(self.profiles or []).get(name)

    def floor_ms(self, name, depth, batch):
        c, stored = self.floor.config, self.floor.linears[depth]
        return step_flops.prefill_floor_us(c, depth, self.profile(name), stored, batch,
                                           self.prompt, self.rates) / 1e3

    def op_floors_us(self, name, depth, batch):
        """{op name: floor µs} over the first `depth` layers."""
        ops = step_flops.prefill_ops(self.floor.config, depth, batch, self.prompt)
        return {op: step_flops.floor_us(op, flops, self.profile(name), self.floor.linears[depth],
                                        self.rates) for op, flops in ops.items()}


def print_prefill(prefill, ttfts, depths, target):
    """The prefill table: time to first token over the depths against its compute floor."""
    names = [n for n, _ in prefill.profiles or []]
    order = {n: i for i, n in enumerate(names)}
    keys = sorted(ttfts, key=lambda k: (k[1], order.get(k[0], len(order)), k[0]))
    first = {}
    cols = " | ".join(f"{d} layers ms" for d in depths)
    print(f"\nprefill: B prompts of {prefill.prompt} tokens, time to first token\n")
    print(f"| binary | numerics | B | {cols} | ms a layer | intercept ms | {target} layers ms "
          f"(extrapolated) | tokens/s, {target} layers | vs first | floor ms a layer | ratio |")
    print("|---|---|---:|" + "---:|" * (len(depths) + 7))
    for name, batch in keys:
        by_depth = ttfts[(name, batch)]
        walls = " | ".join(f"{by_depth[d]:.1f}" if d in by_depth else "-" for d in depths)
        line = fit(by_depth)
        cells = "- | - | - | - | -"
        if line:
            whole = line[1] + target * line[0]
            rate = batch * prefill.prompt / whole * 1e3
            first.setdefault(batch, (name, rate))
            versus = f"{rate / first[batch][1]:.2f}× {first[batch][0]}"
            cells = f"{line[0]:.2f} | {line[1]:.1f} | {whole:.0f} | {rate:.0f} | {versus}"
        floors = "- | -"
        if line and not prefill.missing:
            per = fit({d: prefill.floor_ms(name, d, batch) for d in by_depth})
            floors = f"{per[0]:.2f} | {line[0] / per[0]:.2f}"
        print(f"| {name} | {prefill.profile(name) or '-'} | {batch} | {walls} | {cells} | "
              f"{floors} |")


def print_prefill_ops(prefill, ttfts):
    """Per batch: each op's floor a layer in each binary's profile, and ncu's µs per group of
    kernels against the floors of its ops."""
    names = [n for n, _ in prefill.profiles]
    rates = ", ".join(f"{r} {prefill.rates[r]:.0f}" for r in step_flops.RATES)
    for batch in sorted({b for _, b in ttfts}):
        ran = sorted({d for (n, b), by in ttfts.items() if b == batch for d in by})
        ops = {d: step_flops.prefill_ops(prefill.floor.config, d, batch, prefill.prompt)
               for d in ran}
        floors = {n: {d: prefill.op_floors_us(n, d, batch) for d in ran} for n in names}
        print(f"\nprefill floor per op, B = {batch}, a layer (rates TFLOP/s: {rates}; x3: the "
              "three bf16 passes of an f32-exact product)\n")
        print("| op | kernels | GFLOP a layer | " + " | ".join(f"{n}: rate | {n}: µs"
                                                             for n in names) + " |")
        print("|---|---|---:|" + "---|---:|" * len(names))
        for op in step_flops.OPS:
            if op.name not in ops[ran[-1]]:
                continue
            flops = per_layer({d: ops[d].get(op.name, 0) for d in ran})
            cells = []
            for n in names:
                rate, passes = step_flops.rate_of(op, prefill.profile(n),
                                                  prefill.floor.linears[ran[-1]])
                us = per_layer({d: floors[n][d].get(op.name, 0.0) for d in ran})
                cells.append(f"{rate}{f' x{passes}' if passes > 1 else ''} | {us:.0f}")
            print(f"| {op.name} | {op.kernels} | {flops / 1e9:.1f} | " + " | ".join(cells) + " |")
        print_prefill_groups(prefill, names, floors, batch)


def print_prefill_groups(prefill, names, floors, batch):
    """ncu's µs a layer per group of kernels (ncu_NAME_lL_bB_prefill.txt) beside the floors."""
    measured = {}
    for n in names:
        by_depth = {}
        for d in floors[n]:
            found = parsed(os.path.join(prefill.folder, f"ncu_{n}_l{d}_b{batch}_prefill.txt"),
                           GROUP, str, int, float)
            if found:
                by_depth[d] = {group: us for group, _, us in found}
        if by_depth:
            measured[n] = by_depth
    if not measured:
        return
    groups = list(dict.fromkeys([op.kernels for op in step_flops.OPS] + sorted(
        {g for by_depth in measured.values() for groups in by_depth.values() for g in groups})))
    print(f"\nprefill under ncu per group of kernels, B = {batch}, µs a layer (ncu's depths: "
          + "; ".join(f"{n} {', '.join(map(str, sorted(measured[n])))}" for n in measured)
          + "; ratio = ncu / floor)\n")
    print("| kernels | " + " | ".join(f"{n}: floor | {n}: ncu | {n}: ratio" for n in measured)
          + " |")
    print("|---|" + "---:|" * (3 * len(measured)))
    for group in groups:
        cells = []
        for n, by_depth in measured.items():
            floor = per_layer({d: sum(us for op, us in floors[n][d].items()
                                      if step_flops.OP_BY_NAME[op].kernels == group)
                               for d in by_depth})
            ran = any(group in groups_ for groups_ in by_depth.values())
            ncu = per_layer({d: groups_.get(group, 0.0) for d, groups_ in by_depth.items()})
            cells.append(" | ".join((f"{floor:.0f}" if floor else "-",
                                     f"{ncu:.0f}" if ran else "-",
                                     f"{ncu / floor:.2f}" if floor and ran else "-")))
        print(f"| {group} | " + " | ".join(cells) + " |")
    cells = []
    for n, by_depth in measured.items():
        floor = per_layer({d: sum(floors[n][d].values()) for d in by_depth})
        ncu = per_layer({d: sum(groups_.values()) for d, groups_ in by_depth.items()})
        cells.append(f"{floor:.0f} | {ncu:.0f} | {ncu / floor:.2f}")
    print("| all | " + " | ".join(cells) + " |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--extrapolate", type=int,
                   help="layers to extrapolate to (default: the config's, else 43)")
    p.add_argument("--context", type=int, default=272,
                   help="the decode steps' mean position (engine_bench.sh: prompt + gen/2)")
    p.add_argument("--prompt-tokens", type=int, default=256,
                   help="each sequence's prompt: the prefill's tokens are B times it")
    a = p.parse_args()
    folder = a.out_dir
    engine = os.path.join(folder, "engine.txt")
    if not os.path.exists(engine):
        sys.exit(f"engine_table.py: {engine}: missing (engine_bench.sh's output, the table's rows)")
    steps, ttfts = bench_lines(engine)
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
    prefill = Prefill(folder, floor, a.prompt_tokens, {name for name, _ in ttfts})
    if not prefill.measured():
        return
    print_prefill(prefill, ttfts, depths, target)
    if prefill.missing:
        print("\nno prefill floor: missing " + "; ".join(prefill.missing))
        return
    print("\nprefill floor: scripts/step_flops.py's flops of each op at the rate of its operands "
          "in the binary's profile, measured by gemm_rates in this call; ratio = ms a layer / "
          "floor ms a layer")
    print_prefill_ops(prefill, ttfts)


if __name__ == "__main__":
    main()
