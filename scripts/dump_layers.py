#!/usr/bin/env python3
"""Per-module intermediates of Hugging Face transformers' DeepSeek-V4 for one oracle prompt.

Given an output folder of hf_oracle.py (OUTDIR/model/, OUTDIR/reference.safetensors,
OUTDIR/oracle.json), this script

  1. loads the checkpoint into transformers' DeepseekV4ForCausalLM in float32
     - layout "pretrained" (names as written by save_pretrained): DeepseekV4ForCausalLM.from_pretrained
     - layout "state_dict" (transformers' in-memory names): build the model from model/config.json and
       load_state_dict from model/*.safetensors; only rotary buffers (never saved) may be missing;
  2. runs prompt_<P> of reference.safetensors (P = --prompt, default 0) once, without cache;
  3. records with register_forward_hook the OUTPUT of every named submodule:
       a tensor output          -> NAME
       a tuple / list output    -> NAME.out_K for each tensor element K (None elements skipped)
       a ModelOutput / dict     -> NAME.FIELD
       a module called again    -> NAME.call_N (N = 1, 2, ...) in front of the suffixes above
     The root module is recorded as "root" (root.logits). Everything is stored as float32 (integer
     outputs such as top-k indices too; they are small, so exact) in OUTDIR/layers.safetensors; its
     metadata holds "order" (call order), "dtypes" (original dtype of each entry), "prompt", "layout";
  4. checks that the logits reproduce logits_<P> of reference.safetensors to --tol (max abs difference
     relative to max |logit|) and prints the difference; exits 1 when they do not.

Usage: python3 scripts/dump_layers.py OUTDIR [--prompt 0] [--layout pretrained|state_dict]
                                      [--device cuda|cpu] [--tol 1e-5] [--out FILE]
Needs torch and transformers >= 5.17 (present on the GPU machine only).

Second mode, plain Python (no torch), used to shrink the committed dumps in tests/golden:
       python3 scripts/dump_layers.py --prune FILE... [--drop REGEX]
rewrites each layers.safetensors in place without the entries matching REGEX (default DEFAULT_DROP below:
the hyper-connection input norms, activation functions and the two query projections, all of which follow
from neighbouring entries) and without byte-identical duplicates (metadata "aliases": removed -> kept name).
"""
import argparse
import glob
import hashlib
import json
import os
import re
import struct
import sys

DEFAULT_DROP = r"\.input_norm$|\.act_fn(\.call_\d+)?$|self_attn\.q_b_proj$|self_attn\.q_a_proj$"


def prune(path, drop):
    """Rewrite a layers.safetensors in place without torch: drop the entries whose name matches the regex
    `drop`, and keep only the first of several entries with byte-identical contents (metadata "aliases" maps
    each removed duplicate to the entry that holds the same values; "dropped" lists the removed names)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    meta = hdr.pop("__metadata__", {})
    order = json.loads(meta.get("order", "[]")) or sorted(hdr)
    rx = re.compile(drop) if drop else None
    old_aliases = json.loads(meta.get("aliases", "{}"))
    seen, aliases, dropped, keep = {}, {}, [], []
    for name in order:
        v = hdr[name] if name in hdr else hdr[old_aliases[name]]
        blob = data[v["data_offsets"][0]:v["data_offsets"][1]]
        if rx is not None and rx.search(name):
            dropped.append(name)
            continue
        key = (v["dtype"], tuple(v["shape"]), hashlib.sha256(blob).hexdigest())
        if key in seen:
            aliases[name] = seen[key]
            continue
        seen[key] = name
        keep.append((name, v["dtype"], v["shape"], blob))
    old = json.loads(meta.get("dropped", "{}"))
    meta["order"] = json.dumps([x for x in order if x not in dropped])
    meta["aliases"] = json.dumps(aliases)
    meta["dropped"] = json.dumps({"regex": " | ".join(r for r in (old.get("regex"), drop) if r),
                                  "names": old.get("names", []) + dropped})
    out, off, blobs = {"__metadata__": meta}, 0, []
    for name, dt, shape, blob in sorted(keep):
        out[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(blob)]}
        off += len(blob)
        blobs.append(blob)
    hj = json.dumps(out, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for blob in blobs:
            f.write(blob)
    os.replace(path + ".tmp", path)
    print(f"{path}: {len(data)} -> {off} bytes of data; {len(dropped)} dropped, {len(aliases)} aliases")


def load_model(mdir, layout, dev):
    import torch
    from safetensors.torch import load_file
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
    if layout == "pretrained":
        model, info = DeepseekV4ForCausalLM.from_pretrained(
            mdir, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
        bad = {}
        for k, v in info.items():
            if k == "error_msgs" or not isinstance(v, (list, tuple, set, dict)):
                continue
            v = [n for n in v if "rotary_emb" not in str(n) and "inv_freq" not in str(n)]
            if v:
                bad[k] = v
        if bad or info.get("error_msgs"):
            print("LOADING PROBLEMS:", bad, info.get("error_msgs"))
            sys.exit(2)
    else:
        cfg = DeepseekV4Config.from_pretrained(mdir)
        cfg._attn_implementation = "eager"
        model = DeepseekV4ForCausalLM(cfg)
        sd = {}
        for f in sorted(glob.glob(os.path.join(mdir, "*.safetensors"))):
            sd.update(load_file(f))
        sd = {k: (v.float() if v.is_floating_point() else v) for k, v in sd.items()}
        missing, unexpected = model.load_state_dict(sd, strict=False)
        missing = [k for k in missing if "rotary_emb" not in k and "inv_freq" not in k]
        if missing or unexpected:
            print("LOADING PROBLEMS: missing", missing, "unexpected", unexpected)
            sys.exit(2)
    model.config._attn_implementation = "eager"
    return model.float().eval().to(dev)


def main():
    if "--prune" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--prune", nargs="+", required=True, metavar="LAYERS_SAFETENSORS")
        ap.add_argument("--drop", default=DEFAULT_DROP, help="regex of entry names to remove ('' keeps all)")
        a = ap.parse_args()
        for p in a.prune:
            prune(p, a.drop)
        return
    import torch
    from safetensors.torch import load_file, save_file

    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--prompt", type=int, default=0)
    ap.add_argument("--layout", default=None, help="default: the layout named in oracle.json")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--out", default=None, help="default: OUTDIR/layers.safetensors")
    a = ap.parse_args()

    oracle = json.load(open(os.path.join(a.outdir, "oracle.json")))
    layout = a.layout or oracle.get("layout", "pretrained")
    ref = load_file(os.path.join(a.outdir, "reference.safetensors"))
    ids = ref[f"prompt_{a.prompt}"].long()[None].to(a.device)
    ref_logits = ref[f"logits_{a.prompt}"].float()

    model = load_model(os.path.join(a.outdir, "model"), layout, a.device)

    records, dtypes, order, calls = {}, {}, [], {}

    def store(name, out):
        if out is None:
            return
        if torch.is_tensor(out):
            records[name] = out.detach().float().cpu().contiguous().clone()
            dtypes[name] = str(out.dtype).replace("torch.", "")
            order.append(name)
        elif isinstance(out, dict):  # ModelOutput is an OrderedDict of its non-None fields
            for k, v in out.items():
                store(f"{name}.{k}", v)
        elif isinstance(out, (tuple, list)):
            for k, v in enumerate(out):
                store(f"{name}.out_{k}", v)

    def make_hook(name):
        def hook(module, args, output):
            n = calls.get(name, 0)
            calls[name] = n + 1
            store(name if n == 0 else f"{name}.call_{n}", output)
        return hook

    handles = [m.register_forward_hook(make_hook(n or "root")) for n, m in model.named_modules()]
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[0].float().cpu()
    for h in handles:
        h.remove()

    d = (logits - ref_logits).abs().max().item()
    scale = ref_logits.abs().max().item()
    rel = (logits - ref_logits).norm().item() / ref_logits.norm().item()
    ok = d <= a.tol * max(scale, 1.0)
    print(f"{a.outdir}: layout {layout}, prompt {a.prompt} (len {ids.shape[1]}): logits max|diff| {d:.3e} "
          f"(max|logit| {scale:.3e}), relative L2 {rel:.3e} -> {'OK' if ok else 'MISMATCH'} at tol {a.tol:g}")

    # Diagnostic: how much the logits move if the rotary inv_freq buffers are rounded to bf16, which is what a
    # model.to(bfloat16) ... .float() round trip does to them (they are non-persistent fp32 buffers).
    with torch.no_grad():
        saved = {n: b.clone() for n, b in model.named_buffers() if "inv_freq" in n}
        for n, b in model.named_buffers():
            if n in saved:
                b.copy_(b.to(torch.bfloat16).float())
        l2 = model(input_ids=ids, use_cache=False).logits[0].float().cpu()
        for n, b in model.named_buffers():
            if n in saved:
                b.copy_(saved[n])
    print(f"  diagnostic: with bf16-rounded rotary inv_freq the logits would differ by max|diff| "
          f"{(l2 - ref_logits).abs().max().item():.3e}")

    out = a.out or os.path.join(a.outdir, "layers.safetensors")
    meta = {"order": json.dumps(order), "dtypes": json.dumps(dtypes), "prompt": str(a.prompt),
            "prompt_len": str(ids.shape[1]), "layout": layout, "logits_max_abs_diff": f"{d:.3e}",
            "torch": torch.__version__}
    try:
        import transformers
        meta["transformers"] = transformers.__version__
    except Exception:
        pass
    save_file(records, out, metadata=meta)
    nbytes = sum(t.numel() * 4 for t in records.values())
    print(f"  saved {len(records)} tensors ({nbytes / 1e6:.2f} MB) to {out}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
