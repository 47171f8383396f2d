#!/usr/bin/env python3
"""The bytes one decode step reads from GPU memory, per layer and part, from a DeepSeek-V4
config.json: the memory floor of a step that is bound by what it streams (decode at small
batches). scripts/verify_step_floor.py (T tokens of one sequence) and
scripts/device/engine_table.py (B sequences, against measured step times) both count with it.

What a step reads, as the GPU holds it (checkpoint/to_device.cpp, docs/numerics.md):
  FP8 linears      attention wq_a, wq_b, wkv, wo_a, wo_b; the indexer's wq_b; the shared
                   expert's w1, w2, w3. DeepSeek's release stores them e4m3 with a power-of-two
                   scale per 128 x 128 block: kept so on the GPU in both numerics profiles (1 byte
                   a value + an f32 scale a block; `exact` decodes them in the kernel, `fast` feeds
                   them to FP8 tensor cores: the same bytes). A checkpoint that stores them bf16
                   (the synthetic ones bench/checkpoint writes, or this engine before it kept FP8)
                   holds them bf16: STORED = "bf16".
  bf16 linears     the compressors' wkv and wgate, the indexer's weights_proj, the head: 2 bytes.
  f32              the router's gate [E, D] and the embedding (read whole: the loader widens
                   them), the mHC fn/base/scale, norms, sinks, ape, the router bias.
  routed experts   NVFP4: 0.5625 bytes a value (e2m1 + an e4m3 scale per 16, docs/nvfp4.md) and
                   two f32 scales a matrix; a step reads the experts its tokens pick, expected
                   E (1 - (1 - k/E)^T) distinct ones a layer when each of T tokens picks k of E
                   uniformly (the synthetic checkpoints' routing, score- and hash-routed alike).
  cache (f32)      per sequence at position P: min(P + 1, W) window rows of Dh; CSA: the
                   indexer's keys of every visible entry ((P + 1) / 4 of DI) and its top-k
                   entries of Dh; HCA: every visible entry ((P + 1) / m of Dh).
  per token        the embedding row, the router's tid2eid row (hash layers), a row of each ape.
Not counted: activations (B rows of M·D f32 at most 2 MB at B = 32, L2-resident), the
compressors' pooling state (under 20 KB a layer a sequence, amortised), and writes.

usage: scripts/step_bytes.py [CONFIG] [--batch 1,8,32] [--context P] [--rate-gbs R] [--parts]
       scripts/step_bytes.py --linears-of CHECKPOINT_DIR   (prints fp8 or bf16: how it stores
                                                             the FP8 linears)
"""
import argparse
import glob
import json
import math
import os
import struct

BF16, F32, I64 = 2, 4, 8
FP8_BLOCK = 128  # the release's 128 x 128 weight blocks, one f32 scale each on the GPU
NVFP4_BYTES = 0.5 + 1 / 16  # an e2m1 value + an e4m3 scale per 16 values
STORAGES = ("fp8", "bf16")

# The parts of a layer, in the order tables print them.
PARTS = ("attention", "compressor", "indexer", "shared expert", "router", "routed experts",
         "mHC", "norms", "cache")


def linear(n, k, stored):
    """Bytes of an [n, k] linear held as `stored`: fp8 (e4m3 + f32 block scales) or bf16."""
    if stored == "fp8":
        return n * k + math.ceil(n / FP8_BLOCK) * math.ceil(k / FP8_BLOCK) * F32
    if stored == "bf16":
        return n * k * BF16
    raise ValueError(f"stored: {stored!r} not in {STORAGES}")


class LayerKind:
    """What decides a layer's bytes: its compress ratio (0 window only, 4 CSA, else HCA) and
    whether it routes by token id (the first num_hash_layers layers)."""

    def __init__(self, ratio, hash_routed):
        self.ratio, self.hash_routed = ratio, hash_routed

    def __eq__(self, other):
        return (self.ratio, self.hash_routed) == (other.ratio, other.hash_routed)

    def __hash__(self):
        return hash((self.ratio, self.hash_routed))

    def name(self):
        attention = {0: "window", 4: "CSA"}.get(self.ratio, f"HCA {self.ratio}")
        return f"{attention}, {'hash' if self.hash_routed else 'score'}-routed"


def layer_kinds(c, n_layers=None):
    """The kinds of the config's first n_layers layers (default all; MTP blocks excluded)."""
    n = c["num_hidden_layers"] if n_layers is None else n_layers
    if not 0 < n <= c["num_hidden_layers"]:
        raise ValueError(f"layers: {n} not in 1..{c['num_hidden_layers']}")
    return [LayerKind(c["compress_ratios"][i], i < c.get("num_hash_layers", 0)) for i in range(n)]


def distinct_experts(c, tokens):
    """Expected distinct experts of a layer that `tokens` tokens touch, each picking k of E."""
    e, k = c["n_routed_experts"], c["num_experts_per_tok"]
    return e * (1 - (1 - k / e) ** tokens)


def expert_bytes(c):
    """One routed expert: gate, up and down in NVFP4, each with its global and input scale."""
    return 3 * (c["moe_intermediate_size"] * c["hidden_size"] * NVFP4_BYTES + 2 * F32)


def window_rows(c, position):
    """The sliding-window rows the token at `position` attends to (itself included)."""
    return min(position + 1, c["sliding_window"])


def visible_entries(ratio, position):
    """The compressed entries complete at `position` in a layer of `ratio` > 0
    (kernels::visible_entries): one a block of `ratio` tokens."""
    return (position + 1) // ratio


def cache_bytes(c, ratio, position):
    """The f32 cache one sequence's token at `position` reads in a layer of `ratio`."""
    dh = c["head_dim"]
    b = window_rows(c, position) * dh * F32
    if ratio:
        entries = visible_entries(ratio, position)
        if ratio == 4:
            b += entries * c["index_head_dim"] * F32 + min(entries, c["index_topk"]) * dh * F32
        else:
            b += entries * dh * F32
    return b


def layer_parts(c, kind, stored, tokens, sequences, position):
    """{part: bytes} of one layer's step: `tokens` tokens over `sequences` sequences (a decode
    step of B: B and B; a verify step of T tokens: T and 1), the last at `position`."""
    d, q, h, dh = c["hidden_size"], c["q_lora_rank"], c["num_attention_heads"], c["head_dim"]
    g, r, f, m = c["o_groups"], c["o_lora_rank"], c["moe_intermediate_size"], c["hc_mult"]
    e, k = c["n_routed_experts"], c["num_experts_per_tok"]
    parts = dict.fromkeys(PARTS, 0.0)
    parts["attention"] = (linear(q, d, stored) + linear(h * dh, q, stored)
                          + linear(dh, d, stored) + linear(g * r, h // g * dh, stored)
                          + linear(d, g * r, stored) + (q + dh + h) * F32)  # q/kv norm, sinks
    if kind.ratio:
        width = (2 if kind.ratio == 4 else 1) * dh  # CSA pools overlapping pairs of blocks
        parts["compressor"] = 2 * linear(width, d, "bf16") + (tokens * width + dh) * F32
    if kind.ratio == 4:
        hi, di = c["index_n_heads"], c["index_head_dim"]
        parts["indexer"] = (linear(hi * di, q, stored) + linear(hi, d, "bf16")
                            + 2 * linear(2 * di, d, "bf16") + (tokens * 2 * di + di) * F32)
    parts["shared expert"] = c.get("n_shared_experts", 1) * (2 * linear(f, d, stored)
                                                             + linear(d, f, stored))
    parts["router"] = e * d * F32 + (tokens * k * I64 if kind.hash_routed else e * F32)
    parts["routed experts"] = distinct_experts(c, tokens) * expert_bytes(c)
    mix = (2 + m) * m
    parts["mHC"] = 2 * (mix * m * d + mix + 3) * F32  # hc_attn and hc_ffn: fn, base, scale
    parts["norms"] = 2 * d * F32
    parts["cache"] = sequences * cache_bytes(c, kind.ratio, position)
    return parts


def global_bytes(c, tokens):
    """Outside the layers: the head (bf16, read whole), the tokens' embedding rows, the final
    mHC collapse and norm."""
    d, m = c["hidden_size"], c["hc_mult"]
    return (linear(c["vocab_size"], d, "bf16") + tokens * d * F32
            + (m * m * d + m + 1 + d) * F32)


def step_bytes(c, kinds, stored, tokens, sequences, position):
    """The whole step over layers of `kinds`."""
    return global_bytes(c, tokens) + sum(
        sum(layer_parts(c, kind, stored, tokens, sequences, position).values()) for kind in kinds)


def decode_step_bytes(c, n_layers, stored, batch, position):
    """A decode step of `batch` sequences, one token each, on the config's first n_layers."""
    return step_bytes(c, layer_kinds(c, n_layers), stored, batch, batch, position)


def load_config(path):
    """The config.json at `path`, as a dict."""
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def fp8_linears_stored(checkpoint_dir):
    """How a checkpoint directory stores the FP8 linears ("fp8" or "bf16"), read from its
    safetensors headers: the dtype of the first attention wq_a weight found."""
    for path in sorted(glob.glob(os.path.join(checkpoint_dir, "*.safetensors"))):
        with open(path, "rb") as file:
            header = json.loads(file.read(struct.unpack("<Q", file.read(8))[0]))
        for name, entry in header.items():
            if name.endswith("attn.wq_a.weight") and not name.startswith("mtp."):
                return "fp8" if entry["dtype"].startswith("F8") else "bf16"
    raise ValueError(f"{checkpoint_dir}: no safetensors file holds an attn.wq_a.weight")


def print_layer_table(c, batches, position, parts):
    """Markdown: MB a layer's step reads, per layer kind (and part, with `parts`), for the FP8
    linears held either way, at each batch size."""
    all_kinds = layer_kinds(c)
    cols = [(s, b) for s in STORAGES for b in batches]
    print("| layer kind (layers) | " + ("part | " if parts else "")
          + " | ".join(f"{s}, B = {b}" for s, b in cols) + " |")
    print("|---|" + ("---|" if parts else "") + "---:|" * len(cols))
    for kind in dict.fromkeys(all_kinds):
        per = {col: layer_parts(c, kind, col[0], col[1], col[1], position) for col in cols}
        rows = [(p, [per[col][p] for col in cols]) for p in PARTS] if parts else []
        rows.append(("total", [sum(per[col].values()) for col in cols]))
        label = f"{kind.name()} ({all_kinds.count(kind)})"
        for part, values in rows:
            if not any(values):
                continue
            cells = " | ".join(f"{v / 1e6:.1f}" for v in values)
            print(f"| {label} | " + (f"{part} | " if parts else "") + f"{cells} |")
            label = ""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config", nargs="?", default="tests/checkpoint/fixtures/v4_flash_config.json")
    p.add_argument("--batch", default="1,8,32", help="comma-separated batch sizes")
    p.add_argument("--context", type=int, default=272,
                   help="position of the step (engine_bench.sh: 256-token prompts, 32 tokens)")
    p.add_argument("--rate-gbs", type=float, default=3350,
                   help="read rate for the whole-step floor (default: H100 SXM's HBM3 peak)")
    p.add_argument("--parts", action="store_true", help="each layer kind's parts as rows")
    p.add_argument("--linears-of", metavar="CHECKPOINT_DIR",
                   help="print how CHECKPOINT_DIR stores the FP8 linears, and nothing else")
    a = p.parse_args()
    if a.linears_of:
        print(fp8_linears_stored(a.linears_of))
        return
    c = load_config(a.config)
    batches = [int(b) for b in a.batch.split(",")]
    print(f"{a.config}: MB a decode step of B sequences reads, per layer, at position "
          f"{a.context} (computed, not measured). fp8: the FP8 linears kept FP8, as both "
          "profiles hold them (exact and fast read the same bytes); bf16: held bf16, as the "
          "synthetic checkpoints store them and this engine held them before.\n")
    print_layer_table(c, batches, a.context, a.parts)
    print(f"\nwhole step, {c['num_hidden_layers']} layers, GB (floor ms at {a.rate_gbs:.0f} GB/s):")
    totals = {(s, b): decode_step_bytes(c, None, s, b, a.context)
              for s in STORAGES for b in batches}
    for stored in STORAGES:
        print(f"  FP8 linears {stored}: " + ", ".join(
            f"B = {b}: {totals[stored, b] / 1e9:.2f} "
            f"({totals[stored, b] / a.rate_gbs / 1e6:.2f} ms)" for b in batches))
    print("  fp8 / bf16: " + ", ".join(
        f"B = {b}: {totals['fp8', b] / totals['bf16', b]:.2f}" for b in batches))


if __name__ == "__main__":
    main()
