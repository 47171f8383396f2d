#!/usr/bin/env python3
"""Where one engine step's GPU time goes, from every launch of a `dsv4 bench` run under ncu.

Input: the stdout of
    ncu --csv --page raw --metrics gpu__time_duration.sum dsv4 bench ... > run.csv
(the program's own lines come first; the CSV starts at the line beginning with "ID"). A step
(prefill or decode) begins with the embedding kernel, so the launches split into steps there.
Prints each step's launch count and summed kernel time, then, for one step (by default the last:
a decode step when --gen-tokens is at least 2; STEP picks another, as a Python index into the
list printed first, so 0 is the first prefill), the kernels by total time: name, launches, µs,
and the grid of the longest launch. ncu serialises the kernels and runs them at its base clocks,
so the sums are above the program's own timings; they say where the time goes, not how long a
step takes.

With STEP `prefill` (and --runs R --gen-tokens G, the bench's --repeats + 1 and --gen-tokens)
it sums the last run's prefill: that run's steps (the last 1/R of them) but its last G − 1, which
decode; chunked prefill may split a prompt over several steps. Then it also prints the launches
and µs of each group of kernels that scripts/step_flops.py gives a compute floor ("group NAME:
N launches, X us"), and of the groups without one.

    usage: ncu_step_summary.py run.csv [top-N [STEP]] [--runs R --gen-tokens G]
"""
import argparse
import collections
import csv
import io
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import step_flops  # noqa: E402  (scripts/, one level up)

# Kernel name fragments -> the group of kernels that runs an op (step_flops.Op.kernels), the
# first match wins; groups without a floor (norms, RoPE, top-k, pooling, ...) after them.
KERNEL_GROUPS = (
    ("sparse_attention", step_flops.ATTEND),
    ("indexer_", step_flops.INDEX),
    ("router_", step_flops.ROUTER),
    ("route_", step_flops.ROUTER),
    ("moe_route", step_flops.ROUTER),
    ("linear_tensor_cores", step_flops.TENSOR_CORE_LINEARS),
    ("linear_few_rows_tensor_cores", step_flops.TENSOR_CORE_LINEARS),
    ("fp8_stream_gemm", step_flops.TENSOR_CORE_LINEARS),
    ("fp8_ws_gemm", step_flops.TENSOR_CORE_LINEARS),
    ("quantize_activation_fp8", step_flops.TENSOR_CORE_LINEARS),
    ("linear_kernel", step_flops.CUDA_CORE_LINEARS),
    ("linear_few_rows_kernel", step_flops.CUDA_CORE_LINEARS),
    ("expert_", step_flops.ROUTED),
    ("nvfp4_", step_flops.ROUTED),
    ("moe_", step_flops.ROUTED),
    ("swiglu", step_flops.ROUTED),
    ("permute_kernel", step_flops.ROUTED),
    ("combine", step_flops.ROUTED),
    ("gather_nvfp4", step_flops.ROUTED),
    ("gather_bf16", step_flops.ROUTED),
    ("round_to_bf16", step_flops.ROUTED),
    ("decode_staged", step_flops.ROUTED),
    ("amax_kernel", step_flops.ROUTED),
    ("quantize_kernel", step_flops.ROUTED),
    ("topk_", "top-k"),
    ("compressor_", "compressor pooling"),
    ("hc_", "mHC pre/post"),
    ("rms_norm", "norms, RoPE, elementwise"),
    ("rope", "norms, RoPE, elementwise"),
    ("embedding", "norms, RoPE, elementwise"),
    ("window_write", "norms, RoPE, elementwise"),
    ("gather_rows", "norms, RoPE, elementwise"),
    ("add_kernel", "norms, RoPE, elementwise"),
    ("softmax", "norms, RoPE, elementwise"),
)


def launches(path):
    lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:  # ncu stopped (its timeout, an error) before writing its table
        sys.exit(f"{path}: no kernel table; ncu said: " + " | ".join(lines[-3:]))
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, units, data = rows[0], rows[1], rows[2:]
    name, grid = header.index("Kernel Name"), header.index("Grid Size")
    duration = header.index("gpu__time_duration.sum")
    scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[units[duration]]
    for row in data:
        yield row[name], row[grid], float(row[duration].replace(",", "")) * scale


def function_name(kernel):
    """`kernel` without its parameter list. ncu names a kernel by its function alone by default
    (--print-kernel-base function); a demangled name loses "(anonymous namespace)::" first."""
    return re.sub(r"\(.*", "", kernel.replace("(anonymous namespace)::", ""))


def short_name(kernel):
    return function_name(kernel)[:80]


def kernel_group(kernel):
    """The group of `kernel`: KERNEL_GROUPS' first match in its name, else "other"."""
    return next((group for fragment, group in KERNEL_GROUPS if fragment in kernel), "other")


def chosen_steps(bounds, step, runs, gen_tokens):
    """The (first, end) launch ranges STEP picks: one step by index, or the last run's prefill."""
    if step != "prefill":
        index = int(step)
        if not -len(bounds) <= index < len(bounds):
            raise ValueError(f"step {index} of {len(bounds)}")
        return [bounds[index]]
    if len(bounds) % runs:
        raise ValueError(f"{len(bounds)} steps are not {runs} runs of the same steps")
    last_run = bounds[len(bounds) - len(bounds) // runs:]
    prefill = last_run[:len(last_run) - (gen_tokens - 1)]
    if not prefill:
        raise ValueError(f"a run of {len(last_run)} steps has no prefill before {gen_tokens - 1} "
                         "decode steps")
    return prefill


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv")
    p.add_argument("top", nargs="?", type=int, default=30)
    p.add_argument("step", nargs="?", default="-1", help="a step's index, or prefill")
    p.add_argument("--runs", type=int, default=2, help="runs the bench made (its --repeats + 1)")
    p.add_argument("--gen-tokens", type=int, default=3, help="the bench's --gen-tokens")
    a = p.parse_args()
    all_launches = list(launches(a.csv))
    starts = [i for i, (k, _, _) in enumerate(all_launches) if "embedding_kernel" in k]
    if not starts:
        sys.exit(f"{a.csv}: no embedding kernel, so no step to split at")
    bounds = list(zip(starts, starts[1:] + [len(all_launches)]))
    for first, end in bounds:
        total = sum(us for _, _, us in all_launches[first:end])
        print(f"step at launch {first}: {end - first} launches, {total:.1f} us")
    try:
        steps = chosen_steps(bounds, a.step, a.runs, a.gen_tokens)
    except ValueError as e:
        sys.exit(f"{a.csv}: {e}")
    picked = [launch for first, end in steps for launch in all_launches[first:end]]
    by_kernel = collections.defaultdict(lambda: [0, 0.0, 0.0, ""])
    for kernel, grid, us in picked:
        entry = by_kernel[short_name(kernel)]
        entry[0] += 1
        entry[1] += us
        if us > entry[2]:
            entry[2], entry[3] = us, grid
    what = (f"steps at launch {', '.join(str(first) for first, _ in steps)} (the last run's "
            "prefill)" if a.step == "prefill" else f"step at launch {steps[0][0]}")
    print(f"\n{what} by kernel (us, launches, longest launch's grid):")
    ranked = sorted(by_kernel.items(), key=lambda item: -item[1][1])
    for kernel, (count, us, _, grid) in ranked[:a.top]:
        print(f"{us:10.1f} {count:5d}  {grid:>14}  {kernel}")
    if a.step != "prefill":
        return
    groups = collections.defaultdict(lambda: [0, 0.0])
    for kernel, _, us in picked:
        group = groups[kernel_group(function_name(kernel))]
        group[0] += 1
        group[1] += us
    print(f"\n{what} by group of kernels:")
    for group, (count, us) in sorted(groups.items(), key=lambda item: -item[1][1]):
        print(f"group {group}: {count} launches, {us:.1f} us")


if __name__ == "__main__":
    main()
