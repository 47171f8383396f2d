#!/usr/bin/env python3
"""Writes tests/tokenizer/fixtures/small_tokenizer.json: a byte-level BPE tokenizer.json with
DeepSeek's structure (digit and word Splits, then ByteLevel; two added special tokens) and ten
merges, small enough that tests/tokenizer/tokenizer_test.cpp works its expected ids out by hand.
Byte b is id b (its byte-level character, GPT-2's bytes_to_unicode); merges get ids 256.. in
rank order; the added tokens follow the vocabulary (266, 267), where tokenizers puts them.
Usage: scripts/make_small_tokenizer.py (from the repository root)."""
import json


def bytes_to_unicode():
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) +
                 list(range(0xAE, 0x100)))
    table, shifted = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table


def main():
    chars = bytes_to_unicode()
    vocab = {chars[b]: b for b in range(256)}
    space = chars[ord(" ")]
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (space, "w"), ("o", "r"),
              (space + "w", "or"), ("1", "2"), ("b", "c"), ("a", "b")]
    for i, (left, right) in enumerate(merges):
        vocab[left + right] = 256 + i
    first_added = len(vocab)
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": first_added, "content": "<｜begin▁of▁sentence｜>", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True},
            {"id": first_added + 1, "content": "<｜User｜>", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True},
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated",
             "invert": False},
            {"type": "Split",
             "pattern": {"Regex": " ?\\p{L}+| ?[^\\s\\p{L}\\p{N}]+|\\s+"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False},
        ]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": [f"{left} {right}" for left, right in merges]},
    }
    with open("tests/tokenizer/fixtures/small_tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
