#!/usr/bin/env python3
"""scripts/step_flops.py against a prefill's flops counted by hand on a tiny config, its rates
against docs/numerics.md's table of what each profile computes, and V4-Flash's flops against
issue 31's figure."""
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import step_bytes  # noqa: E402
import step_flops  # noqa: E402

FLASH = os.path.join(ROOT, "tests/checkpoint/fixtures/v4_flash_config.json")

# D 16, q rank 8, 2 heads of 4, 2 output groups of rank 4, expert width 6, 2 mHC streams, 4
# experts (2 a token), window 3, layers: window (hash-routed), CSA (top-1), HCA of 8.
TINY = {"hidden_size": 16, "q_lora_rank": 8, "num_attention_heads": 2, "head_dim": 4,
        "o_groups": 2, "o_lora_rank": 4, "moe_intermediate_size": 6, "hc_mult": 2,
        "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
        "sliding_window": 3, "compress_ratios": [0, 4, 8], "num_hash_layers": 1,
        "index_n_heads": 2, "index_head_dim": 4, "index_topk": 1, "vocab_size": 10,
        "num_hidden_layers": 3}

# Flops a token of the tiny config's linears, counted by hand (2 N K).
TINY_TOKEN = {"attn wq_a": 2 * 8 * 16, "attn wq_b": 2 * 8 * 8, "attn wkv": 2 * 4 * 16,
              "attn wo_a": 2 * 8 * 4,  # 8 outputs (2 groups of rank 4), each over 1 head of 4
              "attn wo_b": 2 * 16 * 8, "shared expert": 3 * 2 * 6 * 16,
              "router gate": 2 * 4 * 16, "routed experts": 2 * 3 * 2 * 6 * 16,
              "mHC mixes": 2 * 2 * 8 * 32}  # two sites, (2 + 2) 2 mixes of 2 · 16
BATCH, PROMPT = 2, 10


class StepFlopsTest(unittest.TestCase):
    def layer(self, index):
        kind = step_bytes.layer_kinds(TINY)[index]
        return step_flops.layer_ops(TINY, kind, BATCH, PROMPT)

    def test_window_layer_counted_by_hand(self):
        ops = self.layer(0)
        for name, per_token in TINY_TOKEN.items():
            self.assertEqual(ops.pop(name), BATCH * PROMPT * per_token, name)
        # Positions 0..9 see min(p + 1, 3) rows: 1 + 2 + 3 * 8 = 27; 4 Dh flops a head and row.
        self.assertEqual(ops.pop("sparse attention"), BATCH * 4 * 2 * 4 * 27)
        self.assertEqual(ops, {})

    def test_csa_layer_counted_by_hand(self):
        ops = self.layer(1)
        tokens = BATCH * PROMPT
        self.assertEqual(ops["compressor wkv+wgate"], tokens * 2 * 2 * 8 * 16)  # width 2 Dh
        self.assertEqual(ops["indexer wq_b"], tokens * 2 * 8 * 8)
        self.assertEqual(ops["indexer weights_proj"], tokens * 2 * 2 * 16)
        self.assertEqual(ops["indexer compressor wkv+wgate"], tokens * 2 * 2 * 8 * 16)
        # (p + 1) // 4 entries: 0,0,0,1,1,1,1,2,2,2 (10); top-1 keeps 0,0,0,1,1,1,1,1,1,1 (7).
        self.assertEqual(ops["indexer scores"], BATCH * 2 * 2 * 4 * 10)
        self.assertEqual(ops["sparse attention"], BATCH * 4 * 2 * 4 * (27 + 7))

    def test_hca_layer_counted_by_hand(self):
        ops = self.layer(2)
        self.assertEqual(ops["compressor wkv+wgate"], BATCH * PROMPT * 2 * 2 * 4 * 16)  # Dh
        self.assertNotIn("indexer scores", ops)
        # (p + 1) // 8: one entry at positions 7, 8 and 9.
        self.assertEqual(ops["sparse attention"], BATCH * 4 * 2 * 4 * (27 + 3))

    def test_rates_follow_the_operands(self):
        ops = step_flops.OP_BY_NAME
        cases = [("attn wq_a", "fast", "fp8", ("fp8", 1)),
                 ("attn wq_a", "exact", "fp8", ("bf16", 3)),
                 ("attn wq_a", "fast", "bf16", ("bf16", 3)),
                 ("attn wo_a", "fast", "fp8", ("fp8", 1)),
                 ("attn wo_a", "exact", "fp8", ("bf16", 3)),
                 ("compressor wkv+wgate", "fast", "fp8", ("bf16", 3)),
                 ("routed experts", "exact", "fp8", ("bf16", 1)),
                 ("router gate", "fast", "fp8", ("f32", 1)),
                 ("mHC mixes", "exact", "fp8", ("f32", 1)),
                 ("sparse attention", "exact", "fp8", ("f32", 1)),
                 ("sparse attention", "fast", "bf16", ("bf16", 1)),
                 ("indexer scores", "exact", "fp8", ("f32", 1)),
                 ("indexer scores", "fast", "bf16", ("fp8", 1)),
                 ("head", "fast", "fp8", ("bf16", 3))]
        for name, profile, stored, want in cases:
            self.assertEqual(step_flops.rate_of(ops[name], profile, stored), want,
                             f"{name}, {profile}, {stored}")
        with self.assertRaisesRegex(ValueError, "profile: 'auto'"):
            step_flops.rate_of(ops["head"], "auto", "fp8")

    def test_the_floor_of_one_layer_by_hand(self):
        # Layer 0 and the head, fast, FP8 linears, at 1 / 2 / 0.5 TFLOP/s (bf16 / fp8 / f32):
        # µs = flops · passes / rate · 1e-6. Tokens 20.
        rates = {"bf16": 1.0, "fp8": 2.0, "f32": 0.5}
        want = (20 * (256 + 128 + 128 + 256 + 576) / 2  # the FP8-stored linears
                + 20 * 64 / 2  # wo_a, its groups one FP8 GEMM
                + 20 * (128 + 1024) / 0.5  # router and mHC in f32
                + 20 * 1152  # routed experts, one bf16 pass
                + 2 * 4 * 2 * 4 * 27  # the attention in bf16
                + 2 * 2 * 10 * 16 * 3)  # the head of two last tokens, three bf16 passes
        got = step_flops.prefill_floor_us(TINY, 1, "fast", "fp8", BATCH, PROMPT, rates)
        self.assertAlmostEqual(got, want * 1e-6, delta=1e-12)

    def test_flash_is_issue_31s_microsecond_a_token_a_layer(self):
        # Issue 31: ≈ 0.85 µs a token a layer at the bf16 rate (8 × 256 tokens, H100); the
        # H100's measured cuBLAS bf16 rate is 772-801 TFLOP/s (docs/bench.md), which gives
        # 0.76-0.79 µs here. 15 %: the issue states neither its rate nor how it counted the
        # attention (every CSA query at its full 640 candidates would add ~5 %); a factor, such
        # as the routed experts' half of the flops, is what this catches, and the tiny config's
        # hand counts catch the rest.
        c = step_bytes.load_config(FLASH)
        n = c["num_hidden_layers"]
        flops = sum(step_flops.prefill_ops(c, n, 8, 256).values()) / n / (8 * 256)
        for rate in (772e12, 801e12):
            self.assertAlmostEqual(flops / rate * 1e6, 0.85, delta=0.85 * 0.15)

    def test_parse_rates_wants_all_three(self):
        self.assertEqual(step_flops.parse_rates("bf16=800,fp8=1500,f32=50"),
                         {"bf16": 800.0, "fp8": 1500.0, "f32": 50.0})
        with self.assertRaisesRegex(ValueError, "missing f32"):
            step_flops.parse_rates("bf16=800,fp8=1500")
        with self.assertRaisesRegex(ValueError, "rate 'tf32'"):
            step_flops.parse_rates("tf32=1")

if __name__ == "__main__":
    unittest.main()
