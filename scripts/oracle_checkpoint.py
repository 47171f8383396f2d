#!/usr/bin/env python3
"""transformers' references for a trained checkpoint: what scripts/train_small.py writes after
training (reference.safetensors for its held-out prompts, perplexity.json), for any checkpoint
from_pretrained loads, computed in float32.

With --w4a16 the routed experts compute as `dsv4 --experts w4a16` does (docs/numerics.md): their
inputs and their SwiGLU outputs rounded to bf16. Together with scripts/dequantize_nvfp4.py (an
NVFP4 checkpoint's experts as the float32 values they stand for) this gives references for an
NVFP4 checkpoint, which is how the shipped default model's references were made:
    scripts/dequantize_nvfp4.py MODEL_NVFP4 DEQ
    scripts/oracle_checkpoint.py --model DEQ --data data/brown --excerpt EXCERPT --out OUT --w4a16
Needs torch, transformers >= 5.17 and tokenizers (the GPU machine); runs on CPU too.
Usage: scripts/oracle_checkpoint.py --model DIR --data DIR [--excerpt FILE] --out DIR [--w4a16]"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_small  # noqa: E402  (the shared prompts, reference writer and perplexity windows)


def round_experts_to_bf16(model):
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4Experts
    apply_gate = DeepseekV4Experts._apply_gate
    DeepseekV4Experts._apply_gate = lambda self, gate_up: \
        apply_gate(self, gate_up).to(torch.bfloat16).float()
    for module in model.modules():
        if isinstance(module, DeepseekV4Experts):
            module.register_forward_pre_hook(
                lambda mod, args: (args[0].to(torch.bfloat16).float(),) + tuple(args[1:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokenizer", help="default: MODEL/tokenizer.json")
    ap.add_argument("--data", required=True, help="scripts/brown_corpus.py's output folder")
    ap.add_argument("--excerpt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--w4a16", action="store_true", help="round expert inputs and SwiGLU outputs to bf16")
    a = ap.parse_args()
    from tokenizers import Tokenizer
    from transformers import DeepseekV4ForCausalLM
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tok = Tokenizer.from_file(a.tokenizer or os.path.join(a.model, "tokenizer.json"))
    model = DeepseekV4ForCausalLM.from_pretrained(a.model, dtype=torch.float32,
                                                  attn_implementation="eager").to(dev).eval()
    if a.w4a16:
        round_experts_to_bf16(model)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.data, "heldout.txt"), encoding="utf-8") as f:
        held = [t for t in f.read().split("\n\n") if t.strip()]
    train_small.references(model, tok, train_small.stream(tok, held), a.out, dev)
    json.dump({"model": os.path.abspath(a.model), "prompts": train_small.PROMPTS_NOTE,
               "gen": train_small.GEN, "w4a16": a.w4a16},
              open(os.path.join(a.out, "oracle.json"), "w"), indent=1)
    train_small.perplexities(model, tok, a.data, a.excerpt, a.out, dev)


if __name__ == "__main__":
    main()
