#!/usr/bin/env python3
"""scripts/step_bytes.py against numbers derived elsewhere (docs/numerics.md's FP8 values a
layer, `dsv4 check --plan`'s routed-expert total, a Monte Carlo draw of the routing, cache rows
counted by hand), and scripts/device/engine_table.py on an engine_bench.sh folder made by hand."""
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import step_bytes  # noqa: E402

FLASH = os.path.join(ROOT, "tests/checkpoint/fixtures/v4_flash_config.json")


def flash():
    return json.load(open(FLASH, encoding="utf-8"))


def layer_total(c, kind, stored, batch, position=272):
    return sum(step_bytes.layer_parts(c, kind, stored, batch, batch, position).values())


class StepBytesTest(unittest.TestCase):
    def test_fp8_linears_are_numerics_md_values_a_layer(self):
        # docs/numerics.md: 132.1 M FP8 values a layer (140.5 M on CSA layers), 264 MB in bf16,
        # 132 MB kept FP8 + 32 KB of f32 block scales. bf16 - fp8 = values - scale bytes.
        c = flash()
        for kind, values in ((step_bytes.LayerKind(128, False), 132.1e6),
                             (step_bytes.LayerKind(4, False), 140.5e6)):
            saved = layer_total(c, kind, "bf16", 1) - layer_total(c, kind, "fp8", 1)
            scales = values / 128 / 128 * 4
            self.assertAlmostEqual(saved + scales, values, delta=0.05e6, msg=kind.name())
            self.assertAlmostEqual(scales, 32e3, delta=3e3)

    def test_every_routed_expert_is_check_plans_total(self):
        # `dsv4 check --plan` (tests/tools): V4-Flash's routed experts are 145.1 GiB.
        c = flash()
        total = c["num_hidden_layers"] * c["n_routed_experts"] * step_bytes.expert_bytes(c)
        self.assertAlmostEqual(total / 2**30, 145.1, delta=0.05)

    def test_distinct_experts_match_a_monte_carlo_draw(self):
        seed = int.from_bytes(os.urandom(4), "little")
        rng = random.Random(seed)
        c = flash()
        e, k = c["n_routed_experts"], c["num_experts_per_tok"]
        for tokens in (1, 3, 8, 32):
            trials = 3000
            drawn = sum(len(set().union(*(rng.sample(range(e), k) for _ in range(tokens))))
                        for _ in range(trials)) / trials
            # The count's spread is under 6 experts, so the mean of 3000 is within ~0.1; 0.4
            # is four of those.
            self.assertAlmostEqual(step_bytes.distinct_experts(c, tokens), drawn, delta=0.4,
                                   msg=f"seed {seed}, {tokens} tokens")

    def test_cache_rows_counted_by_hand(self):
        c = flash()  # W = 128, Dh = 512, DI = 128, top-k 512
        # Position 272: 128 window rows; 273 // 4 = 68 CSA entries (their index keys of 128
        # and, fewer than 512, all of them as candidates); 273 // 128 = 2 HCA entries.
        self.assertEqual(step_bytes.cache_bytes(c, 0, 272), 128 * 512 * 4)
        self.assertEqual(step_bytes.cache_bytes(c, 4, 272), (128 * 512 + 68 * 128 + 68 * 512) * 4)
        self.assertEqual(step_bytes.cache_bytes(c, 128, 272), (128 + 2) * 512 * 4)
        # Position 4095: 1024 entries, the indexer keeps 512.
        self.assertEqual(step_bytes.cache_bytes(c, 4, 4095),
                         (128 * 512 + 1024 * 128 + 512 * 512) * 4)
        # Early: 10 window rows, no complete block.
        self.assertEqual(step_bytes.cache_bytes(c, 4, 9), (10 * 512 + 2 * 128 + 2 * 512) * 4)

    def test_a_batch_reads_each_sequences_cache_and_the_weights_once(self):
        c = flash()
        kind = step_bytes.LayerKind(4, False)
        one = step_bytes.layer_parts(c, kind, "fp8", 1, 1, 272)
        eight = step_bytes.layer_parts(c, kind, "fp8", 8, 8, 272)
        self.assertEqual(eight["cache"], 8 * one["cache"])
        self.assertEqual(eight["attention"], one["attention"])
        self.assertEqual(eight["shared expert"], one["shared expert"])
        self.assertGreater(eight["routed experts"], 7 * one["routed experts"])

    def test_layer_kinds_follow_the_config(self):
        kinds = step_bytes.layer_kinds(flash())
        self.assertEqual(len(kinds), 43)
        self.assertEqual([(k.ratio, k.hash_routed) for k in kinds[:5]],
                         [(0, True), (0, True), (4, True), (128, False), (4, False)])
        with self.assertRaisesRegex(ValueError, "layers: 44 not in 1..43"):
            step_bytes.layer_kinds(flash(), 44)
        with self.assertRaisesRegex(ValueError, "stored: 'f32'"):
            step_bytes.linear(4, 4, "f32")

    def test_linears_of_reads_the_safetensors_header(self):
        with tempfile.TemporaryDirectory() as folder:
            with self.assertRaisesRegex(ValueError, "no safetensors file"):
                step_bytes.fp8_linears_stored(folder)
            for dtype, stored in (("F8_E4M3", "fp8"), ("BF16", "bf16")):
                header = json.dumps({
                    "layers.0.attn.wq_a.weight": {"dtype": dtype, "shape": [1], "data_offsets":
                                                  [0, 2]},
                    "mtp.0.attn.wq_a.weight": {"dtype": "F32", "shape": [1], "data_offsets":
                                               [2, 6]}}).encode()
                with open(os.path.join(folder, "layer_0.safetensors"), "wb") as f:
                    f.write(struct.pack("<Q", len(header)) + header + bytes(6))
                self.assertEqual(step_bytes.fp8_linears_stored(folder), stored)


class EngineTableTest(unittest.TestCase):
    """An engine_bench.sh folder written by hand: two variants at 4 and 8 layers, B = 1 and 8,
    each step exactly intercept + slope · layers."""

    SLOPE = {("exact", 1): 0.5, ("fast", 1): 0.25, ("exact", 8): 1.5, ("fast", 8): 1.0}
    INTERCEPT, COPY_GBS = 2.0, 3000.0

    def write_folder(self, folder, with_ceiling=True):
        with open(os.path.join(folder, "engine.txt"), "w", encoding="utf-8") as f:
            for layers in (4, 8):
                for batch in (1, 8):
                    for name in ("exact", "fast"):
                        ms = self.INTERCEPT + self.SLOPE[(name, batch)] * layers
                        f.write(f"== {name}, layers {layers}, batch {batch}\n"
                                f"time to first token: {10 * layers + batch:.3f} ms [1, 2]  "
                                "prefill 1.0 tokens/s\n"
                                f"decode step:         {ms:.3f} ms [1, 2]  9.0 tokens/s (9.0 a "
                                "sequence)\n")
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(flash(), f)
        for layers in (4, 8):
            with open(os.path.join(folder, f"linears_l{layers}.txt"), "w") as f:
                f.write("bf16\n")
        if with_ceiling:
            with open(os.path.join(folder, "read_ceiling.txt"), "w") as f:
                f.write(f"device NVIDIA H100 80GB HBM3, 132 SMs; D2D copy {self.COPY_GBS:.0f} "
                        "GB/s (read + write)\n\n| bytes | best µs a launch |\n")
        with open(os.path.join(folder, "ncu_fast_l8_b1.txt"), "w") as f:
            f.write("step at launch 0: 900 launches, 9000.0 us\n"
                    "step at launch 950: 300 launches, 3000.0 us\n")

    def run_table(self, folder):
        return subprocess.run([sys.executable, os.path.join(ROOT, "scripts/device/engine_table.py"),
                               folder], capture_output=True, text=True)

    def table(self, folder):
        ran = self.run_table(folder)
        self.assertEqual(ran.returncode, 0, ran.stderr)
        out = ran.stdout
        rows = {}
        for line in out.splitlines():
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if len(cells) > 2 and re.fullmatch(r"\d+", cells[1]):
                rows[(cells[0], int(cells[1]))] = cells
        return out, rows

    def test_floor_ratio_and_first_token(self):
        with tempfile.TemporaryDirectory() as folder:
            self.write_folder(folder)
            out, rows = self.table(folder)
        self.assertEqual(len(rows), 4, out)
        c = flash()
        kinds = step_bytes.layer_kinds(c)[4:8]  # what the 8-layer checkpoint adds
        for (name, batch), slope in self.SLOPE.items():
            cells = rows[(name, batch)]
            # binary, B, 4 l., 8 l., ms a layer, intercept, 43 l., MB a layer, floor, ratio,
            # first token, kernels, kernel µs, busy
            self.assertEqual(float(cells[4]), slope)
            self.assertEqual(float(cells[5]), self.INTERCEPT)
            self.assertAlmostEqual(float(cells[6]), self.INTERCEPT + 43 * slope, places=2)
            layer = sum(layer_total(c, k, "bf16", batch) for k in kinds) / len(kinds)
            self.assertAlmostEqual(float(cells[7]), layer / 1e6, delta=0.05)
            floor_ms = layer / (self.COPY_GBS * 1e9) * 1e3
            self.assertAlmostEqual(float(cells[8]), floor_ms, delta=5e-4)
            self.assertAlmostEqual(float(cells[9]), slope / floor_ms, delta=0.01)
            self.assertEqual(cells[10], f"{40 + batch:.1f} (4 l.), {80 + batch:.1f} (8 l.)")
        # The last decode step's 3 ms of kernels in a wall step of 2 + 0.25 · 8 ms.
        self.assertEqual(rows[("fast", 1)][11:], ["300 (8 l.)", "3000", f"{3.0 / 4.0:.0%}"])
        self.assertEqual(rows[("exact", 1)][11:], ["-", "-", "-"])
        self.assertIn("3000 GB/s", out)

    def test_without_the_copy_rate_the_floor_is_left_out_and_said(self):
        with tempfile.TemporaryDirectory() as folder:
            self.write_folder(folder, with_ceiling=False)
            out, rows = self.table(folder)
        self.assertEqual(rows[("exact", 1)][7:10], ["-", "-", "-"])
        self.assertEqual(float(rows[("exact", 1)][4]), 0.5)
        self.assertIn("no floor: missing read_ceiling.txt", out)

    def test_lines_that_do_not_parse_are_named_and_skipped(self):
        """A folder edited by hand: an 8-layer step of "1.2.3" ms, the copy rate 0 before the
        measured one, an ncu step of "1..0" µs after the good one. Each is said with its file and
        line and left out; the rest of the table is as before."""
        with tempfile.TemporaryDirectory() as folder:
            self.write_folder(folder)
            with open(os.path.join(folder, "engine.txt"), "a", encoding="utf-8") as f:
                f.write("== odd, layers 4, batch 1\ndecode step: 3.000 ms\n"
                        "== odd, layers 8, batch 1\ndecode step: 1.2.3 ms\n")
            ceiling = os.path.join(folder, "read_ceiling.txt")
            with open(ceiling, encoding="utf-8") as f:
                measured = f.read()
            with open(ceiling, "w", encoding="utf-8") as f:
                f.write("D2D copy 0 GB/s\n" + measured)
            with open(os.path.join(folder, "ncu_fast_l8_b1.txt"), "a", encoding="utf-8") as f:
                f.write("step at launch 990: 5 launches, 1..0 us\n")
            ran = self.run_table(folder)
        self.assertEqual(ran.returncode, 0, ran.stderr)
        said = ran.stderr.splitlines()
        self.assertEqual(len(said), 3, ran.stderr)
        self.assertRegex(said[0],
                         r"engine\.txt:28: .*'1\.2\.3'; line skipped: decode step: 1\.2\.3 ms$")
        self.assertRegex(said[1], r"read_ceiling\.txt:1: 0 is not a positive rate; line skipped")
        self.assertRegex(said[2], r"ncu_fast_l8_b1\.txt:3: .*'1\.\.0'; line skipped")
        rows = {}
        for line in ran.stdout.splitlines():
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if len(cells) > 2 and re.fullmatch(r"\d+", cells[1]):
                rows[(cells[0], int(cells[1]))] = cells
        self.assertEqual(rows[("odd", 1)][2:7], ["3.000", "-", "-", "-", "-"])  # one depth: no fit
        self.assertEqual(float(rows[("fast", 1)][4]), 0.25)
        self.assertEqual(rows[("fast", 1)][11:], ["300 (8 l.)", "3000", f"{3.0 / 4.0:.0%}"])
        self.assertIn("3000 GB/s", ran.stdout)

    def test_a_config_the_bytes_model_cannot_read_leaves_the_floor_out_and_says_why(self):
        for text, why in (("{not json", "config.json (no JSON at line 1: "),
                          ("{}", "config.json (the bytes model refuses it: KeyError("),
                          (json.dumps(dict(flash(), num_hidden_layers=4)),
                           "config.json (the bytes model refuses it: ValueError('layers: 8")):
            with self.subTest(config=text[:20]), tempfile.TemporaryDirectory() as folder:
                self.write_folder(folder)
                with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
                    f.write(text)
                ran = self.run_table(folder)
                self.assertEqual(ran.returncode, 0, ran.stderr)
                self.assertIn("no floor: missing " + why, ran.stdout)
                self.assertIn("| exact | 1 | 4.000 | 6.000 | 0.500 | 2.000 |", ran.stdout)

    def test_without_engine_txt_it_says_so_and_fails(self):
        with tempfile.TemporaryDirectory() as folder:
            self.write_folder(folder)
            os.remove(os.path.join(folder, "engine.txt"))
            ran = self.run_table(folder)
        self.assertEqual(ran.returncode, 1)
        self.assertIn("engine.txt: missing", ran.stderr)
        self.assertNotIn("Traceback", ran.stderr)


if __name__ == "__main__":
    unittest.main()
