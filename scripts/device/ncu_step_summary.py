#!/usr/bin/env python3
"""Where one engine step's GPU time goes, from every launch of a `dsv4 bench` run under ncu.

Input: the stdout of
    ncu --csv --page raw --metrics gpu__time_duration.sum dsv4 bench ... > run.csv
(the program's own lines come first; the CSV starts at the line beginning with "ID"). A step
(prefill or decode) begins with the embedding kernel, so the launches split into steps there.
Prints each step's launch count and summed kernel time, then, for one step (by default the last:
a decode step when --gen-tokens is at least 2; STEP picks another, as a Python index into the
list printed first, so 0 is the first prefill), the kernels by total time: name, launches, µs,
and the grid of the longest launch. ncu serialises the kernels and runs them at its base clocks, so the sums
are above the program's own timings; they say where the time goes, not how long a step takes.

    usage: ncu_step_summary.py run.csv [top-N [STEP]]
"""
import collections
import csv
import io
import re
import sys


def launches(path):
    lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, units, data = rows[0], rows[1], rows[2:]
    name, grid = header.index("Kernel Name"), header.index("Grid Size")
    duration = header.index("gpu__time_duration.sum")
    scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[units[duration]]
    for row in data:
        yield row[name], row[grid], float(row[duration].replace(",", "")) * scale


def short_name(kernel):
    return re.sub(r"\(.*", "", kernel).replace("(anonymous namespace)::", "")[:80]


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    step = int(sys.argv[3]) if len(sys.argv) > 3 else -1
    all_launches = list(launches(path))
    starts = [i for i, (k, _, _) in enumerate(all_launches) if "embedding_kernel" in k]
    if not starts:
        sys.exit(f"{path}: no embedding kernel, so no step to split at")
    bounds = list(zip(starts, starts[1:] + [len(all_launches)]))
    for first, end in bounds:
        total = sum(us for _, _, us in all_launches[first:end])
        print(f"step at launch {first}: {end - first} launches, {total:.1f} us")
    if not -len(bounds) <= step < len(bounds):
        sys.exit(f"{path}: step {step} of {len(bounds)}")
    first, end = bounds[step]
    by_kernel = collections.defaultdict(lambda: [0, 0.0, 0.0, ""])
    for kernel, grid, us in all_launches[first:end]:
        entry = by_kernel[short_name(kernel)]
        entry[0] += 1
        entry[1] += us
        if us > entry[2]:
            entry[2], entry[3] = us, grid
    print(f"\nstep at launch {first} by kernel (us, launches, longest launch's grid):")
    ranked = sorted(by_kernel.items(), key=lambda item: -item[1][1])
    for kernel, (count, us, _, grid) in ranked[:top]:
        print(f"{us:10.1f} {count:5d}  {grid:>14}  {kernel}")


if __name__ == "__main__":
    main()
