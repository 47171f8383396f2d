#!/usr/bin/env python3
"""Writes the float32 checkpoint an NVFP4 (ModelOpt layout) checkpoint stands for under W4A16.

Every NVFP4 matrix (`X.weight` u8 [N, K/2] with `X.weight_scale` UE4M3 [N, K/16] and
`X.weight_scale_2` f32) becomes `X.weight` f32 [N, K] = e2m1 · ue4m3 · weight_scale_2
(docs/nvfp4.md); `X.input_scale` is dropped (W4A16 does not stage activations); every other
tensor is copied byte for byte; config.json loses its quantization_config. transformers then
computes, in float32, what `dsv4 ... --experts w4a16` computes from the NVFP4 file (up to where
the global scale is applied: before the sum here, after it in dsv4's GEMM; a few ulp), so the
oracle's references for this checkpoint are references for the NVFP4 one.
Plain Python (no numpy, no torch): runs where the checkpoint was quantized.
Usage: scripts/dequantize_nvfp4.py NVFP4_DIR OUT_DIR"""
import array
import json
import os
import shutil
import struct
import sys

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def ue4m3(bits):
    """A block scale's value; NaN for the codes a scale never takes (0x7F, a sign bit)."""
    e, m = bits >> 3, bits & 7
    if bits >= 0x7F:
        return float("nan")
    return m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", None)
    return header, meta, memoryview(blob)[8 + n:]


def dequantize(packed, scales, global_scale, n, k):
    nibble = [E2M1[c & 7] * (-1.0 if c & 8 else 1.0) for c in range(16)]
    block = [ue4m3(b) * global_scale for b in range(256)]
    out = array.array("f", bytes(4 * n * k))
    for r in range(n):
        row, srow = r * k // 2, r * k // 16
        for b in range(k // 16):
            s = block[scales[srow + b]]
            base = r * k + 16 * b
            for j in range(8):
                byte = packed[row + 8 * b + j]
                out[base + 2 * j] = nibble[byte & 15] * s
                out[base + 2 * j + 1] = nibble[byte >> 4] * s
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name.endswith(".safetensors"):
            header, meta, data = read(os.path.join(src, name))
            tensors = {}
            for key, info in header.items():
                lo, hi = info["data_offsets"]
                raw = data[lo:hi]
                if key.endswith(".weight_scale") or key.endswith(".weight_scale_2") or \
                        key.endswith(".input_scale"):
                    continue
                scale = header.get(key + "_scale")
                if key.endswith(".weight") and info["dtype"] == "U8" and scale is not None:
                    n, half = info["shape"]
                    g_lo, g_hi = header[key + "_scale_2"]["data_offsets"]
                    g = struct.unpack("<f", data[g_lo:g_hi])[0]
                    s_lo, s_hi = scale["data_offsets"]
                    values = dequantize(raw, data[s_lo:s_hi], g, n, 2 * half)
                    tensors[key] = ("F32", [n, 2 * half], values.tobytes())
                else:
                    tensors[key] = (info["dtype"], info["shape"], bytes(raw))
            out, offset = {}, 0
            if meta:
                out["__metadata__"] = meta
            for key in sorted(tensors):
                dtype, shape, raw = tensors[key]
                out[key] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
                offset += len(raw)
            head = json.dumps(out, separators=(",", ":")).encode()
            head += b" " * (-len(head) % 8)
            with open(os.path.join(dst, name), "wb") as f:
                f.write(struct.pack("<Q", len(head)) + head)
                for key in sorted(tensors):
                    f.write(tensors[key][2])
        elif name == "config.json":
            config = json.load(open(os.path.join(src, name)))
            config.pop("quantization_config", None)
            json.dump(config, open(os.path.join(dst, name), "w"), indent=2)
        elif os.path.isfile(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), os.path.join(dst, name))


if __name__ == "__main__":
    main()
