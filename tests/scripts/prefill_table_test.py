#!/usr/bin/env python3
"""scripts/device/ncu_step_summary.py's prefill selection and kernel groups on an ncu CSV written
by hand, and scripts/device/engine_table.py's prefill tables on an engine_bench.sh folder written
by hand (its floors recomputed from scripts/step_flops.py, which step_flops_test.py checks)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import step_bytes  # noqa: E402
import step_flops  # noqa: E402

FLASH = os.path.join(ROOT, "tests/checkpoint/fixtures/v4_flash_config.json")


def ncu_csv(steps):
    """An ncu --csv --page raw output: `steps` lists each step's (kernel, µs) launches."""
    lines = ["==PROF== the program's own lines", '"ID","Kernel Name","Grid Size",'
             '"gpu__time_duration.sum"', '"","","","usecond"']
    for step in steps:
        for kernel, us in [("embedding_kernel", 1.0)] + step:
            lines.append(f'"{len(lines)}","void dsv4::{kernel}(int)","(1, 1, 1)","{us}"')
    return "\n".join(lines) + "\n"


class NcuPrefillTest(unittest.TestCase):
    # One run: two prefill steps (a long prompt chunked) and two decode steps (--gen-tokens 3).
    PREFILL_A = [("linear_tensor_cores_kernel<128>", 10.0), ("expert_mma_kernel", 20.0)]
    PREFILL_B = [("fp8_ws_gemm_sm90_kernel", 5.0), ("sparse_attention_bf16_kernel", 7.0),
                 ("topk_select_kernel", 2.0), ("linear_few_rows_kernel", 3.0)]
    DECODE = [("linear_few_rows_kernel", 100.0)]

    def summary(self, steps, *args):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "run.csv")
            with open(path, "w", encoding="utf-8") as f:
                f.write(ncu_csv(steps))
            return subprocess.run([sys.executable, os.path.join(
                ROOT, "scripts/device/ncu_step_summary.py"), path, "40", *args],
                capture_output=True, text=True)

    def test_the_last_runs_prefill_by_group(self):
        warm = [self.PREFILL_A, self.PREFILL_B, self.DECODE, self.DECODE]
        # The timed run's kernels take twice the warm-up's: only they may be summed.
        timed = [[(k, 2 * us) for k, us in step] for step in warm]
        out = self.summary(warm + timed, "prefill", "--runs", "2", "--gen-tokens", "3")
        self.assertEqual(out.returncode, 0, out.stderr)
        groups = {m.group(1): (int(m.group(2)), float(m.group(3)))
                  for m in re.finditer(r"^group (.+): (\d+) launches, ([\d.]+) us$", out.stdout,
                                       re.M)}
        self.assertEqual(groups, {
            step_flops.TENSOR_CORE_LINEARS: (2, 30.0), step_flops.ROUTED: (1, 40.0),
            step_flops.ATTEND: (1, 14.0), step_flops.CUDA_CORE_LINEARS: (1, 6.0),
            "top-k": (1, 4.0), "norms, RoPE, elementwise": (2, 2.0)})  # the two embeddings

    def test_runs_of_unequal_steps_are_refused(self):
        out = self.summary([self.PREFILL_A, self.DECODE, self.DECODE], "prefill", "--runs", "2")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("3 steps are not 2 runs", out.stderr)

    def test_one_step_by_index_as_before(self):
        out = self.summary([self.PREFILL_A, self.DECODE], "-1")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("step at launch 3 by kernel", out.stdout)
        self.assertNotIn("group ", out.stdout)


class EnginePrefillTableTest(unittest.TestCase):
    """An engine_bench.sh folder of a prefill call: exact and fast at 4 and 8 layers, B = 8,
    each time to first token exactly intercept + slope · layers; ncu of fast at 8 layers."""

    SLOPE, INTERCEPT, PROMPT = {"exact": 60.0, "fast": 20.0}, 100.0, 2048
    RATES = {"bf16": 780.0, "fp8": 1300.0, "f32": 51.0}

    def write_folder(self, folder, with_rates=True):
        with open(os.path.join(folder, "engine.txt"), "w", encoding="utf-8") as f:
            for layers in (4, 8):
                for name in ("exact", "fast"):
                    ms = self.INTERCEPT + self.SLOPE[name] * layers
                    f.write(f"== {name}, layers {layers}, batch 8\n"
                            f"time to first token: {ms:.3f} ms [1, 2]  prefill 1.0 tokens/s\n"
                            "decode step:         9.000 ms [1, 2]  9.0 tokens/s\n")
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(step_bytes.load_config(FLASH), f)
        for layers in (4, 8):
            with open(os.path.join(folder, f"linears_l{layers}.txt"), "w") as f:
                f.write("fp8\n")
        if with_rates:
            with open(os.path.join(folder, "gemm_rates.txt"), "w") as f:
                f.write("device NVIDIA H200, 132 SMs\n" + "".join(
                    f"rate {k}: {v:.1f} TFLOP/s (how)\n" for k, v in self.RATES.items()))
        with open(os.path.join(folder, "variants.txt"), "w") as f:
            f.write("exact\tdsv4\t--numerics exact\nfast\tdsv4\t--cuda-graph off\n")
        with open(os.path.join(folder, "ncu_fast_l8_b8_prefill.txt"), "w") as f:
            f.write("group routed experts: 100 launches, 80000.0 us\n"
                    "group top-k: 10 launches, 800.0 us\n")

    def run_table(self, folder):
        script = os.path.join(ROOT, "scripts/device/engine_table.py")
        return subprocess.run([sys.executable, script, folder, "--prompt-tokens", str(self.PROMPT)],
                              capture_output=True, text=True)

    def table(self, folder):
        ran = self.run_table(folder)
        self.assertEqual(ran.returncode, 0, ran.stderr)
        return ran.stdout

    @staticmethod
    def rows(out, heading):
        """{first cell: cells} of the table under the line starting with `heading`."""
        block = out[out.index(heading):].split("\n\n")[1]
        return {cells[0]: cells for cells in
                ([c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[2:])}

    def test_fit_floor_ratio_and_speed_up(self):
        c = step_bytes.load_config(FLASH)
        with tempfile.TemporaryDirectory() as folder:
            self.write_folder(folder)
            out = self.table(folder)
        rows = self.rows(out, "prefill: B prompts")
        tokens = 8 * self.PROMPT
        rate = {}
        for name, profile in (("exact", "exact"), ("fast", "fast")):  # fast: no flag, auto
            cells = rows[name]
            slope = self.SLOPE[name]
            # binary, numerics, B, 4 l., 8 l., ms a layer, intercept, 43 l., tokens/s, vs first,
            # floor ms a layer, ratio
            self.assertEqual(cells[1], profile)
            self.assertEqual(float(cells[5]), slope)
            self.assertEqual(float(cells[6]), self.INTERCEPT)
            whole = self.INTERCEPT + 43 * slope
            rate[name] = tokens / whole * 1e3
            self.assertAlmostEqual(float(cells[8]), rate[name], delta=0.5)
            # The floor of the four layers the 8-layer checkpoint adds (CSA, HCA, CSA, HCA).
            floor = sum(
                step_flops.floor_us(op, flops, profile, "fp8", self.RATES)
                for kind in step_bytes.layer_kinds(c)[4:8]
                for op, flops in step_flops.layer_ops(c, kind, 8, self.PROMPT).items()) / 4e3
            self.assertAlmostEqual(float(cells[10]), floor, delta=0.005)
            self.assertAlmostEqual(float(cells[11]), slope / floor, delta=0.01)
        self.assertEqual(rows["exact"][9], "1.00× exact")
        self.assertEqual(rows["fast"][9], f"{rate['fast'] / rate['exact']:.2f}× exact")

        ops = self.rows(out, "prefill floor per op")
        self.assertEqual(ops["attn wq_b"][3:7], ["bf16 x3", f"{1099.5e9 * 3 / 780e12 * 1e6:.0f}",
                                                 "fp8", f"{1099.5e9 / 1300e12 * 1e6:.0f}"])
        # Two CSA layers of the four: 8 · 2 · 64 · 128 flops an entry, Σ_{j ≤ 2048} ⌊j / 4⌋ =
        # 4 · (1 + … + 511) + 512 = 523776 entries a sequence; 68.65 GFLOP a CSA layer.
        self.assertEqual(float(ops["indexer scores"][2]), 34.3)

        groups = self.rows(out, "prefill under ncu")
        # From one depth: its 80 ms over its 8 layers, against the 8 layers' mean floor.
        routed = sum(step_flops.layer_ops(c, kind, 8, self.PROMPT)["routed experts"]
                     for kind in step_bytes.layer_kinds(c, 8)) / 8 / 780e12 * 1e6
        self.assertEqual(groups["routed experts"][1:],
                         [f"{routed:.0f}", "10000", f"{10000 / routed:.2f}"])
        self.assertEqual(groups["top-k"][1:], ["-", "100", "-"])
        self.assertEqual(groups["sparse attention"][2:], ["-", "-"])

    def test_without_the_rates_the_floor_is_left_out_and_said(self):
        with tempfile.TemporaryDirectory() as folder:
            self.write_folder(folder)
            os.remove(os.path.join(folder, "gemm_rates.txt"))
            self.assertNotIn("prefill", self.table(folder))  # a decode-only call
            with open(os.path.join(folder, "gemm_rates.txt"), "w") as f:
                f.write("rate bf16: 780.0 TFLOP/s\n")
            out = self.table(folder)
        self.assertEqual(self.rows(out, "prefill: B prompts")["fast"][10:], ["-", "-"])
        self.assertIn("no prefill floor: missing gemm_rates.txt's rate fp8, f32", out)

    def test_an_odd_rate_and_an_unlisted_binary_leave_the_floor_out_and_say_why(self):
        """A hand-made folder: the bf16 rate "7.8.0" (named, skipped) and no variants.txt line
        for fast. The times and fits stay; the floors are left out, with both reasons."""
        with tempfile.TemporaryDirectory() as folder:
            self.write_folder(folder)
            with open(os.path.join(folder, "gemm_rates.txt"), "w") as f:
                f.write("rate bf16: 7.8.0 TFLOP/s\nrate fp8: 1300 TFLOP/s\nrate f32: 51 TFLOP/s\n")
            with open(os.path.join(folder, "variants.txt"), "w") as f:
                f.write("exact\tdsv4\t--numerics exact\n")
            ran = self.run_table(folder)
        self.assertEqual(ran.returncode, 0, ran.stderr)
        self.assertRegex(ran.stderr, r"gemm_rates\.txt:1: .*'7\.8\.0'; line skipped")
        self.assertIn("no prefill floor: missing gemm_rates.txt's rate bf16; variants.txt's line "
                      "for fast", ran.stdout)
        rows = self.rows(ran.stdout, "prefill: B prompts")
        self.assertEqual(float(rows["fast"][5]), self.SLOPE["fast"])
        self.assertEqual(rows["fast"][1], "-")
        self.assertEqual(rows["exact"][10:], ["-", "-"])

if __name__ == "__main__":
    unittest.main()
