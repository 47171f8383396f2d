#!/usr/bin/env python3
"""Fails on an include inside src/ (and include/dsv4/) that goes against the dependency rule.

The rule is docs/architecture.md's layer diagram, as the libraries' target_link_libraries in
src/*/CMakeLists.txt state it, written down here as a graph: each part of the tree names the
parts it may include directly; what those may include, it may include too. Anything else (a
lower layer reaching up, or a sibling reaching sideways) is reported with the file, the line and
the rule it breaks. The public headers in include/dsv4/ are parts of their own: the contracts
that a layer implements, which the layers that only call through them may include without
depending on the implementation.

Usage: scripts/check_includes.py [repo-root]    (exit status 1 when an include breaks the rule)
"""
import os
import re
import sys

# part -> the parts it may include directly (the transitive closure is allowed).
ALLOWED = {
    # include/dsv4/: the public API, declarations only.
    "api/status": [],  # status.h, numerics.h
    "api/tokenizer": ["api/status"],
    "api/chat": ["api/status", "api/tokenizer"],
    "api/structured_output": ["api/status"],
    "api/engine": ["api/status"],
    # src/: one static library per layer (src/*/CMakeLists.txt).
    "base": ["api/status"],
    "nvfp4": ["base"],  # dsv4_nvfp4: format/nvfp4 and format/fp8_block.h, for the kernels
    "format": ["nvfp4"],
    "tokenizer": ["format", "api/tokenizer"],
    "grammar": ["format", "tokenizer"],
    "chat": ["grammar", "api/chat"],
    "structured_output": ["chat", "api/structured_output"],  # grammar/structured_output.cpp
    "checkpoint": ["format"],
    # kernels: the op interface (ops.h, contracts), its two implementations, and ops.cpp, the
    # only place that sees both.
    "kernels/interface": ["nvfp4"],
    "kernels/cpu": ["kernels/interface"],
    # kernels/cuda's folders (kernels/cuda/README.md), one way down: the launchers, the MoE
    # pipeline, the matrix multiplies, then the device helpers they share; the folder's own
    # headers (cuda_ops.h, cuda_check.h, stream.h, scratch.h, tensor_map.h) under them all.
    "kernels/cuda": ["kernels/interface"],
    "kernels/cuda/device": ["kernels/cuda"],
    "kernels/cuda/gemm": ["kernels/cuda/device"],
    "kernels/cuda/attention": ["kernels/cuda/device"],
    "kernels/cuda/moe": ["kernels/cuda/gemm"],
    "kernels/cuda/ops": ["kernels/cuda/moe", "kernels/cuda/attention"],
    "kernels/dispatch": ["kernels/cpu", "kernels/cuda/ops"],
    "kernels/ep": ["kernels/dispatch"],
    # The model is written once against kernels/ops.h: never a backend's header.
    "model": ["kernels/interface", "checkpoint"],
    # The sampler applies a TokenConstraint through its interface only.
    "runtime": ["model", "kernels/ep", "api/engine", "api/structured_output"],
    "server": ["runtime", "structured_output", "api/engine"],
}

# Path prefix (relative to the repository root) -> part; the longest matching prefix wins.
PARTS = {
    "include/dsv4/status.h": "api/status",
    "include/dsv4/numerics.h": "api/status",
    "include/dsv4/tokenizer.h": "api/tokenizer",
    "include/dsv4/chat.h": "api/chat",
    "include/dsv4/structured_output.h": "api/structured_output",
    "include/dsv4/engine.h": "api/engine",
    "src/base/": "base",
    "src/format/": "format",
    "src/format/nvfp4.": "nvfp4",
    "src/format/fp8_block.h": "nvfp4",
    "src/tokenizer/": "tokenizer",
    "src/grammar/": "grammar",
    "src/grammar/structured_output.cpp": "structured_output",
    "src/chat/": "chat",
    "src/checkpoint/": "checkpoint",
    "src/kernels/": "kernels/interface",
    "src/kernels/ops.cpp": "kernels/dispatch",
    "src/kernels/cpu/": "kernels/cpu",
    "src/kernels/cuda/": "kernels/cuda",
    "src/kernels/cuda/device/": "kernels/cuda/device",
    "src/kernels/cuda/gemm/": "kernels/cuda/gemm",
    "src/kernels/cuda/attention/": "kernels/cuda/attention",
    "src/kernels/cuda/moe/": "kernels/cuda/moe",
    "src/kernels/cuda/ops/": "kernels/cuda/ops",
    "src/kernels/ep/": "kernels/ep",
    "src/model/": "model",
    "src/runtime/": "runtime",
    "src/server/": "server",
}

SOURCE = re.compile(r"\.(h|cpp|cu|cuh|inc)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def part_of(path):
    best = None
    for prefix, part in PARTS.items():
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, part)
    return best[1] if best else None


def closure(part, seen=None):
    seen = set() if seen is None else seen
    for dep in ALLOWED[part]:
        if dep not in seen:
            seen.add(dep)
            closure(dep, seen)
    return seen


def header_path(root, source, include):
    """The repository path a quoted include names: beside `source`, or under src/ or include/."""
    for base in (os.path.dirname(source), "src", "include"):
        path = os.path.normpath(os.path.join(base, include))
        if os.path.exists(os.path.join(root, path)):
            return path
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    unknown_parts = set(PARTS.values()) - set(ALLOWED)
    assert not unknown_parts, f"parts without a rule: {unknown_parts}"
    reach = {part: closure(part) | {part} for part in ALLOWED}
    broken, unplaced = [], []
    for top in ("src", "include/dsv4"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                path = os.path.relpath(os.path.join(dirpath, name), root)
                if not SOURCE.search(name):
                    continue
                source = part_of(path)
                if source is None:
                    unplaced.append(path)
                    continue
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target_path = header_path(root, path, m.group(1))
                        if target_path is None:
                            broken.append(f"{path}:{n}: {m.group(1)} names no file in the tree")
                            continue
                        target = part_of(target_path)
                        if target is None:
                            unplaced.append(target_path)
                        elif target not in reach[source]:
                            broken.append(f"{path}:{n}: {source} may not include {target} "
                                          f"({m.group(1)})")
    for path in sorted(set(unplaced)):
        print(f"{path}: in no part of scripts/check_includes.py's map")
    for line in broken:
        print(line)
    if broken or unplaced:
        return 1
    print(f"includes follow the dependency rule ({len(ALLOWED)} parts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
