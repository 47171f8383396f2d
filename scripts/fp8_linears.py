#!/usr/bin/env python3
"""Writes a copy of a checkpoint with its dense linears in FP8, as DeepSeek-V4's release stores
them: the linears the release keeps in FP8 (attention wq_a, wq_b, wkv, wo_a, wo_b; the indexer's
wq_b; the shared experts' w1, w2, w3; MTP e_proj and h_proj) rounded to e4m3 with one power-of-two
scale per 128 x 128 block, 2^ceil(log2(amax / 448)) (DeepSeek's weight rule), written as
`X.weight` F8_E4M3 and `X.weight_scale_inv` F32 (the transformers FP8 sibling; the loader decodes
e4m3 * scale). Every other tensor and file is copied unchanged. Used for docs/quality.md's FP8
rows: the trained default model with the release's FP8 linears, in both numerics profiles.

Usage: scripts/fp8_linears.py IN_DIR OUT_DIR   (one model.safetensors; pure Python, no numpy)
"""
import json
import math
import os
import re
import shutil
import struct
import sys

FP8_LINEAR = re.compile(
    r"(attn\.(wq_a|wq_b|wkv|wo_a|wo_b)|attn\.indexer\.wq_b|shared_experts\.w[123]|e_proj|h_proj)"
    r"\.weight$")
BLOCK = 128


def e4m3_values():
    """The 127 non-negative finite e4m3 magnitudes, by code."""
    values = []
    for code in range(0x7f):
        exp, man = code >> 3, code & 7
        values.append(man * 2.0 ** -9 if exp == 0 else (1 + man / 8) * 2.0 ** (exp - 7))
    return values


E4M3 = e4m3_values()


def to_e4m3(x):
    """Round to nearest e4m3 code, ties to the even code, saturating at 448 (base/float_convert.h)."""
    sign = 0x80 if x < 0 or (x == 0 and math.copysign(1, x) < 0) else 0
    a = abs(x)
    if a >= 448.0:
        return sign | 0x7e
    lo, hi = 0, 0x7e
    while hi - lo > 1:  # E4M3 is increasing in the code: largest code with value <= a
        mid = (lo + hi) // 2
        if E4M3[mid] <= a:
            lo = mid
        else:
            hi = mid
    below, above = E4M3[lo], E4M3[hi]
    if a - below < above - a or (a - below == above - a and lo % 2 == 0) or a == below:
        return sign | lo
    return sign | hi


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def values_of(info, data):
    begin, end = info["data_offsets"]
    raw = data[begin:end]
    if info["dtype"] == "BF16":
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    if info["dtype"] == "F32":
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    raise ValueError("%s: not bf16 or f32" % info["dtype"])


def quantize(values, n, k):
    rows_b, cols_b = -(-n // BLOCK), -(-k // BLOCK)
    scales = [1.0] * (rows_b * cols_b)
    codes = bytearray(n * k)
    for br in range(rows_b):
        for bc in range(cols_b):
            rows = range(br * BLOCK, min(n, (br + 1) * BLOCK))
            cols = range(bc * BLOCK, min(k, (bc + 1) * BLOCK))
            amax = max(abs(values[r * k + c]) for r in rows for c in cols)
            scale = 2.0 ** math.ceil(math.log2(amax / 448.0)) if amax > 0 else 1.0
            scales[br * cols_b + bc] = scale
            for r in rows:
                for c in cols:
                    codes[r * k + c] = to_e4m3(values[r * k + c] / scale)
    return bytes(codes), struct.pack("<%df" % len(scales), *scales), [rows_b, cols_b]


def main(in_dir, out_dir):
    os.makedirs(out_dir, exist_ok=False)
    header, data = read(os.path.join(in_dir, "model.safetensors"))
    metadata = header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        if FP8_LINEAR.search(name) and len(info["shape"]) == 2:
            n, k = info["shape"]
            codes, scales, scale_shape = quantize(values_of(info, data), n, k)
            out[name] = ("F8_E4M3", [n, k], codes)
            out[name[:-len(".weight")] + ".weight_scale_inv"] = ("F32", scale_shape, scales)
        else:
            begin, end = info["data_offsets"]
            out[name] = (info["dtype"], info["shape"], data[begin:end])
    new_header, blobs, offset = {}, [], 0
    for name in sorted(out):
        dtype, shape, blob = out[name]
        new_header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata is not None:
        new_header["__metadata__"] = metadata
    text = json.dumps(new_header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(out_dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)
    for entry in os.listdir(in_dir):
        if entry != "model.safetensors":
            shutil.copy(os.path.join(in_dir, entry), out_dir)
    print("%s: %d linears in FP8" % (out_dir, sum(1 for n in out if n.endswith("weight_scale_inv"))))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
