#!/usr/bin/env python3
"""Writes tests/chat/golden/python_json_cases.json: random JSON texts and what Python's json
module makes of them, json.dumps(json.loads(text), ensure_ascii=False), or the error json.loads
raises, for tests/chat/python_json_test.cpp (dsv4's chat/python_json.h must give the same).

The texts are drawn from a fixed seed: numbers of every form (integers past 64 bits, decimals
with long fractions and exponents past the double range, NaN and Infinity), strings with every
escape and non-ASCII text, nesting, repeated keys, white space, and texts json.loads refuses.
Strings that Python would read into a lone surrogate are left out (dsv4 refuses them on purpose).

Usage: scripts/make_python_json_golden.py   (from the repository root; Python 3.11)"""
import json
import random
import sys

rng = random.Random(20261206)


def number():
    kind = rng.randrange(7)
    if kind == 0:
        return str(rng.randrange(-10**rng.randrange(1, 40), 10**rng.randrange(1, 40)))
    if kind == 1:
        return repr(rng.uniform(-1e6, 1e6))
    if kind == 2:  # a random double, any exponent
        import struct
        v = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        return "0" if v != v or v in (float("inf"), float("-inf")) else repr(v).replace("inf", "0")
    if kind == 3:  # decimal digits with an exponent, perhaps past the double range
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 25)))
        digits = digits.lstrip("0") or "0"
        frac = "." + "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 20)))
        return (rng.choice(["", "-"]) + digits + rng.choice(["", frac]) + rng.choice("eE") +
                rng.choice(["", "+", "-"]) + str(rng.randrange(0, 420)))
    if kind == 4:
        return rng.choice(["NaN", "Infinity", "-Infinity", "-0", "0.0", "-0.0", "1e16", "1e15"])
    if kind == 5:
        return "0." + "0" * rng.randrange(0, 8) + str(rng.randrange(1, 10**6))
    return str(rng.randrange(10**15, 10**17)) + ".0"


def string():
    out = []
    for _ in range(rng.randrange(0, 12)):
        r = rng.random()
        if r < 0.4:
            out.append(rng.choice("abcXYZ 09_-"))
        elif r < 0.6:
            out.append(rng.choice(['\\"', "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"]))
        elif r < 0.7:
            out.append("\\u%04x" % rng.choice([0x1, 0x1f, 0x7f, 0xe9, 0x2028, 0xfeff, 0x4e2d]))
        elif r < 0.75:
            out.append("\\ud83d\\ude00")
        else:
            out.append(rng.choice(["é", "中文", "😀", "\u2028", "\x7f", "𝔘"]))
    return '"' + "".join(out) + '"'


def space():
    return rng.choice(["", "", " ", "\n", "\t ", "\r\n"])


def value(depth):
    r = rng.random()
    if depth > 3 or r < 0.35:
        return number()
    if r < 0.6:
        return string()
    if r < 0.68:
        return rng.choice(["true", "false", "null"])
    if r < 0.84:
        items = [space() + value(depth + 1) + space() for _ in range(rng.randrange(0, 5))]
        return "[" + ",".join(items) + "]"
    keys = [string() for _ in range(rng.randrange(0, 5))]
    if keys and rng.random() < 0.3:
        keys.append(rng.choice(keys))  # a repeated key
    return "{" + ",".join(space() + k + space() + ":" + space() + value(depth + 1) + space()
                          for k in keys) + "}"


def broken(text):
    """A text made invalid in one of the ways json.loads names."""
    cut = rng.randrange(len(text) + 1)
    return rng.choice([
        text[:cut],
        text[:cut] + rng.choice([",", "]", "}", ":", "x", "\x01", "\\q", "01", "- 1", "1."]) +
        text[cut:],
        text + rng.choice([" x", ",", "]"]),
        "\ufeff" + text,
    ])


def main():
    cases = []
    while len(cases) < 600:
        text = space() + value(0) + space()
        if len(cases) % 4 == 3:
            text = broken(text)
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError) as e:
            cases.append({"text": text, "error": type(e).__name__})
            continue
        out = json.dumps(parsed, ensure_ascii=False)
        try:
            out.encode("utf-8")
        except UnicodeEncodeError:
            continue  # a lone surrogate
        cases.append({"text": text, "dumps": out})
    with open("tests/chat/golden/python_json_cases.json", "w", encoding="utf-8") as f:
        json.dump({"python": sys.version.split()[0], "cases": cases}, f, ensure_ascii=False,
                  indent=0)
        f.write("\n")
    print(len(cases), "cases,", sum("error" in c for c in cases), "refused")


if __name__ == "__main__":
    main()
