#!/usr/bin/env python3
"""Summarises Nsight Compute's SASS source page of one kernel launch.

Input: `ncu --import R.ncu-rep --page source --print-source sass --csv > source.csv` on a
report with the SourceCounters section. Prints the stall reasons over all samples, the opcode
mix (share of executed instructions and of stall samples), every mbarrier try-wait with how
often it was not ready on the first try (the instruction after its branch runs only then:
how a pipeline shows which side waits for the other), and the most stalled instructions.

    usage: ncu_source_top.py source.csv [top-N]
"""
import collections
import csv
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read_rows(path):
    rows = list(csv.reader(open(path, errors="replace")))
    for i, row in enumerate(rows):
        header = [c.strip() for c in row]
        if "Source" in header and "Address" in header:
            body = [r for r in rows[i + 1:] if len(r) >= len(header)]
            return header, body
    sys.exit(f"{path}: no SASS source table (want --page source --print-source sass --csv)")


def opcode(source):
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    header, body = read_rows(sys.argv[1])
    col = {name: i for i, name in enumerate(header)}
    samples_col = col.get("Warp Stall Sampling (All Samples)")
    executed_col = col.get("Instructions Executed")
    if samples_col is None or executed_col is None:
        sys.exit("the report lacks SourceCounters (stall samples, instructions executed)")
    source = [r[col["Source"]].strip() for r in body]
    samples = [number(r[samples_col]) for r in body]
    executed = [number(r[executed_col]) for r in body]
    total_samples = sum(samples) or 1.0
    total_executed = sum(executed) or 1.0
    print(f"{len(body)} instructions, {total_samples:.0f} stall samples, "
          f"{total_executed:.0f} warp instructions executed")

    reasons = [name for name in header if name.startswith("stall_") and "(Not Issued)" not in name]
    print("\nstall reasons, % of all samples:")
    by_reason = {name: sum(number(r[col[name]]) for r in body) for name in reasons}
    for name, value in sorted(by_reason.items(), key=lambda kv: -kv[1]):
        if value > 0.001 * total_samples:
            print(f"  {name[len('stall_'):]:20s} {100 * value / total_samples:5.1f}")

    executed_by_op = collections.Counter()
    samples_by_op = collections.Counter()
    for text, e, s in zip(source, executed, samples):
        executed_by_op[opcode(text)] += e
        samples_by_op[opcode(text)] += s
    print("\nopcode: % executed, % of samples")
    for op, e in executed_by_op.most_common(top):
        print(f"  {op:12s} {100 * e / total_executed:5.1f} {100 * samples_by_op[op] / total_samples:5.1f}")

    print("\nmbarrier try-waits: executed, not ready on the first try")
    for i, text in enumerate(source[:-2]):
        if "TRYWAIT" in text and "BRA" in source[i + 1] and executed[i] > 0:
            print(f"  {body[i][col['Address']]}: {executed[i]:.0f}, "
                  f"{100 * executed[i + 2] / executed[i]:.0f} %  ({text[:60]})")

    print("\nmost stalled instructions, % of all samples:")
    for i in sorted(range(len(body)), key=lambda i: -samples[i])[:top]:
        print(f"  {100 * samples[i] / total_samples:5.1f}  {source[i][:90]}")


if __name__ == "__main__":
    main()
