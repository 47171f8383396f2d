#!/usr/bin/env python3
"""The flops of one prefill, per layer and op, from a DeepSeek-V4 config.json, and each op's
compute floor in each numerics profile: the flops at the dense GEMM rate of the operands the
profile multiplies (bench/kernels/gemm_rates measures the three rates). It is the compute floor of
a prefill as scripts/step_bytes.py is the memory floor of a decode step, and shares its config
reading; scripts/device/engine_table.py holds engine_bench.sh's measured prefill against it.

A prefill here: B sequences of P prompt tokens each, from an empty cache (positions 0 .. P - 1).
Flops are the useful ones: 2 N K a token for an [N, K] linear; for attention and the indexer
only the candidates a query may see (causal), though a kernel may compute more (the indexer's
prefill scores every entry of the chunk, then masks).

  op                    flops a token                          operands (docs/numerics.md)
  attn wq_a, wq_b, wkv,  2 N K each                             FP8-stored linears
    wo_b
  attn wo_a              2 (G R) (H/G Dh): G block-diagonal     FP8-stored (fast: o quantized,
                         groups                                 all groups one FP8 GEMM)
  compressor wkv+wgate   2 * 2 width D (CSA: width 2 Dh, HCA    bf16-stored linears
                         Dh)
  indexer wq_b           2 (HI DI) q                            FP8-stored
  indexer weights_proj,  2 HI D; 2 * 2 (2 DI) D                 bf16-stored
    its compressor
  shared expert          3 * 2 F D a shared expert              FP8-stored
  router gate            2 E D                                  f32 weight, f32 x
  routed experts         k * 3 * 2 F D                          NVFP4 decoded to bf16, x bf16
                                                                (W4A16, the bench's default)
  mHC mixes              2 sites * 2 ((2 + m) m) (m D)          f32 weight, f32 x
  sparse attention       4 H Dh a candidate (q.k and p.v over   exact: f32; fast: bf16
                         Dh); candidates min(p + 1, W), + CSA
                         min((p + 1) / 4, topk), + HCA (p + 1)/r
  indexer scores         2 HI DI an entry, (p + 1) / 4 entries  exact: f32; fast: e4m3
  head (once, not a      2 V D for each sequence's last token   bf16-stored
    layer)

The rate an op's floor takes follows its operands, not whichever kernel the plan picks:
  e4m3 x e4m3                   the FP8 rate, one pass (fast: FP8-stored linears quantize x)
  bf16 x bf16                   the bf16 rate, one pass (routed experts; fast's attention)
  bf16-exact weight x f32 x     the bf16 rate, three passes: exact to f32 needs x split in three
                                bf16 (8 + 8 + 8 bits), each times the weight (the exact
                                profile's linears, and the bf16-stored ones in both)
  f32 x f32                     the f32 (CUDA-core) rate: no tensor-core format holds f32
A checkpoint that stores the FP8 linears in bf16 (the synthetic default) runs them as
bf16-stored ones in both profiles.

usage: scripts/step_flops.py [CONFIG] [--batch B] [--prompt-tokens P] [--linears fp8|bf16]
                             [--rates bf16=T,fp8=T,f32=T]   (TFLOP/s)
"""
import argparse

from step_bytes import STORAGES, layer_kinds, load_config, visible_entries, window_rows

PROFILES = ("exact", "fast")
RATES = ("fp8", "bf16", "f32")  # gemm_rates' names

# Round figures of an H100 for a look without a measurement; engine_table.py passes the rates
# gemm_rates measured in the same call.
ASSUMED_RATES = {"bf16": 800.0, "fp8": 1600.0, "f32": 50.0}

# What an op's operands are (the table above), which decides its rate in each profile.
FP8_STORED, BF16_STORED, F32_WEIGHT, EXPERTS, ATTENTION, SCORES = (
    "fp8-stored", "bf16-stored", "f32", "experts", "attention", "scores")

# The kernels that run an op on the GPU, as scripts/device/ncu_step_summary.py groups them.
TENSOR_CORE_LINEARS = "tensor-core linears"
CUDA_CORE_LINEARS = "CUDA-core linears"
ROUTER, ROUTED, ATTEND, INDEX = "router", "routed experts", "sparse attention", "indexer scores"


class Op:
    def __init__(self, name, operands, kernels):
        self.name, self.operands, self.kernels = name, operands, kernels


OPS = (
    Op("attn wq_a", FP8_STORED, TENSOR_CORE_LINEARS),
    Op("attn wq_b", FP8_STORED, TENSOR_CORE_LINEARS),
    Op("attn wkv", FP8_STORED, TENSOR_CORE_LINEARS),
    Op("attn wo_a", FP8_STORED, TENSOR_CORE_LINEARS),
    Op("attn wo_b", FP8_STORED, TENSOR_CORE_LINEARS),
    Op("compressor wkv+wgate", BF16_STORED, TENSOR_CORE_LINEARS),
    Op("indexer wq_b", FP8_STORED, TENSOR_CORE_LINEARS),
    # [HI, D]: too few output tiles for the tensor-core kernel (kernels/cuda/gemm/dense/plan.cpp).
    Op("indexer weights_proj", BF16_STORED, CUDA_CORE_LINEARS),
    Op("indexer compressor wkv+wgate", BF16_STORED, TENSOR_CORE_LINEARS),
    Op("shared expert", FP8_STORED, TENSOR_CORE_LINEARS),
    Op("router gate", F32_WEIGHT, ROUTER),
    Op("routed experts", EXPERTS, ROUTED),
    Op("mHC mixes", F32_WEIGHT, CUDA_CORE_LINEARS),
    Op("sparse attention", ATTENTION, ATTEND),
    Op("indexer scores", SCORES, INDEX),
)
HEAD = Op("head", BF16_STORED, TENSOR_CORE_LINEARS)
OP_BY_NAME = {op.name: op for op in OPS + (HEAD,)}


def rate_of(op, profile, stored):
    """(rate name, passes) of `op`'s floor in `profile` when the checkpoint stores the FP8
    linears as `stored` ("fp8" or "bf16")."""
    if profile not in PROFILES:
        raise ValueError(f"profile: {profile!r} not in {PROFILES}")
    if stored not in STORAGES:
        raise ValueError(f"stored: {stored!r} not in {STORAGES}")
    fast = profile == "fast"
    if op.operands == FP8_STORED:
        return ("fp8", 1) if fast and stored == "fp8" else ("bf16", 3)
    if op.operands == BF16_STORED:
        return "bf16", 3
    if op.operands == F32_WEIGHT:
        return "f32", 1
    if op.operands == EXPERTS:
        return "bf16", 1
    if op.operands == ATTENTION:
        return ("bf16", 1) if fast else ("f32", 1)
    return ("fp8", 1) if fast else ("f32", 1)  # SCORES


def token_flops(c, kind):
    """{op name: flops a token} of the linears of a layer of `kind` (step_bytes.LayerKind)."""
    d, q, h, dh = c["hidden_size"], c["q_lora_rank"], c["num_attention_heads"], c["head_dim"]
    g, r, f, m = c["o_groups"], c["o_lora_rank"], c["moe_intermediate_size"], c["hc_mult"]
    e, k = c["n_routed_experts"], c["num_experts_per_tok"]
    flops = {"attn wq_a": 2 * q * d, "attn wq_b": 2 * h * dh * q, "attn wkv": 2 * dh * d,
             "attn wo_a": 2 * g * r * (h // g * dh), "attn wo_b": 2 * d * g * r,
             "shared expert": c.get("n_shared_experts", 1) * 3 * 2 * f * d,
             "router gate": 2 * e * d, "routed experts": k * 3 * 2 * f * d,
             "mHC mixes": 2 * 2 * (2 + m) * m * (m * d)}
    if kind.ratio:
        width = (2 if kind.ratio == 4 else 1) * dh  # CSA pools overlapping pairs of blocks
        flops["compressor wkv+wgate"] = 2 * 2 * width * d
    if kind.ratio == 4:
        hi, di = c["index_n_heads"], c["index_head_dim"]
        flops["indexer wq_b"] = 2 * hi * di * q
        flops["indexer weights_proj"] = 2 * hi * d
        flops["indexer compressor wkv+wgate"] = 2 * 2 * (2 * di) * d
    return flops


def candidates(c, ratio, position):
    """The cache rows the sparse attention reads for the query at `position`."""
    n = window_rows(c, position)
    if ratio == 4:
        n += min(visible_entries(ratio, position), c["index_topk"])
    elif ratio:
        n += visible_entries(ratio, position)
    return n


def layer_ops(c, kind, batch, prompt):
    """{op name: flops} of one layer of `kind` over a prefill of `batch` sequences of `prompt`
    tokens: every op of OPS the layer runs."""
    tokens = batch * prompt
    flops = {name: tokens * value for name, value in token_flops(c, kind).items()}
    h, dh = c["num_attention_heads"], c["head_dim"]
    flops["sparse attention"] = batch * 4 * h * dh * sum(
        candidates(c, kind.ratio, p) for p in range(prompt))
    if kind.ratio == 4:
        flops["indexer scores"] = batch * 2 * c["index_n_heads"] * c["index_head_dim"] * sum(
            visible_entries(4, p) for p in range(prompt))
    return {op.name: flops[op.name] for op in OPS if op.name in flops}


def head_flops(c, batch):
    """The head over each sequence's last token (a prefill samples one token a sequence)."""
    return batch * 2 * c["vocab_size"] * c["hidden_size"]


def floor_us(name, flops, profile, stored, rates):
    """µs of `flops` of op `name` at `rates` (TFLOP/s by rate name)."""
    rate, passes = rate_of(OP_BY_NAME[name], profile, stored)
    return flops * passes / (rates[rate] * 1e12) * 1e6


def prefill_ops(c, n_layers, batch, prompt):
    """{op name: flops} summed over the config's first n_layers layers (the head apart)."""
    total = {}
    for kind in layer_kinds(c, n_layers):
        for name, flops in layer_ops(c, kind, batch, prompt).items():
            total[name] = total.get(name, 0) + flops
    return total


def prefill_floor_us(c, n_layers, profile, stored, batch, prompt, rates):
    """The compute floor of the whole prefill on the first n_layers layers, head included, µs."""
    ops = prefill_ops(c, n_layers, batch, prompt)
    return (sum(floor_us(name, flops, profile, stored, rates) for name, flops in ops.items())
            + floor_us("head", head_flops(c, batch), profile, stored, rates))


def parse_rates(text):
    """"bf16=800,fp8=1600,f32=50" -> {name: TFLOP/s}; every name of RATES must be given."""
    rates = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name not in RATES:
            raise ValueError(f"rate {name!r} not in {RATES}")
        rates[name] = float(value)
    missing = [name for name in RATES if name not in rates]
    if missing:
        raise ValueError(f"rates: missing {', '.join(missing)}")
    return rates


def print_tables(c, batch, prompt, stored, rates):
    kinds = layer_kinds(c)
    tokens = batch * prompt
    cols = " | ".join(f"{p}: rate | {p}: µs" for p in PROFILES)
    print(f"| layer kind (layers) | op | GFLOP | MFLOP a token | {cols} |")
    print("|---|---|---:|---:|" + "---|---:|" * len(PROFILES))
    for kind in dict.fromkeys(kinds):
        label = f"{kind.name()} ({kinds.count(kind)})"
        ops = layer_ops(c, kind, batch, prompt)
        totals = dict.fromkeys(PROFILES, 0.0)
        for name, flops in ops.items():
            cells = []
            for profile in PROFILES:
                rate, passes = rate_of(OP_BY_NAME[name], profile, stored)
                us = floor_us(name, flops, profile, stored, rates)
                totals[profile] += us
                cells.append(f"{rate}{f' x{passes}' if passes > 1 else ''} | {us:.1f}")
            print(f"| {label} | {name} | {flops / 1e9:.2f} | {flops / tokens / 1e6:.2f} | "
                  + " | ".join(cells) + " |")
            label = ""
        flops = sum(ops.values())
        print(f"| | total | {flops / 1e9:.2f} | {flops / tokens / 1e6:.2f} | "
              + " | ".join(f"| {totals[p]:.1f}" for p in PROFILES) + " |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config", nargs="?", default="tests/checkpoint/fixtures/v4_flash_config.json")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=2048)
    p.add_argument("--linears", choices=STORAGES, default="fp8",
                   help="how the checkpoint stores the FP8 linears (the release: fp8)")
    p.add_argument("--rates", help="TFLOP/s, bf16=T,fp8=T,f32=T (default: round H100 figures, "
                   + ", ".join(f"{k}={v:.0f}" for k, v in ASSUMED_RATES.items()) + ")")
    a = p.parse_args()
    c = load_config(a.config)
    rates = parse_rates(a.rates) if a.rates else ASSUMED_RATES
    print(f"{a.config}: a prefill of {a.batch} x {a.prompt_tokens} tokens, per layer and op "
          f"(computed, not measured); FP8 linears stored {a.linears}; floors at "
          + ", ".join(f"{k} {v:.0f}" for k, v in rates.items())
          + (" TFLOP/s" if a.rates else " TFLOP/s (assumed, not measured)") + "\n")
    print_tables(c, a.batch, a.prompt_tokens, a.linears, rates)
    n = c["num_hidden_layers"]
    flops = sum(prefill_ops(c, n, a.batch, a.prompt_tokens).values())
    per_token = flops / n / (a.batch * a.prompt_tokens)
    print(f"\nmean over the {n} layers: {per_token / 1e6:.1f} MFLOP a token a layer, "
          f"{per_token / (rates['bf16'] * 1e12) * 1e6:.3f} µs at the bf16 rate in one pass")
    for profile in PROFILES:
        us = prefill_floor_us(c, n, profile, a.linears, a.batch, a.prompt_tokens, rates)
        print(f"  {profile}: floor of the whole prefill {us / 1e3:.2f} ms, "
              f"{a.batch * a.prompt_tokens / us * 1e6:.0f} tokens/s")


if __name__ == "__main__":
    main()
