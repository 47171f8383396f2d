#!/usr/bin/env python3
"""Reference encodings of a corpus by Hugging Face `tokenizers` (the Rust library dsv4's
tokenizer must match), for tests/tokenizer/deepseek_tokenizer_test.cpp.

Usage: scripts/tokenizer_reference.py TOKENIZER_JSON CORPUS_JSONL OUT_JSONL
  CORPUS_JSONL: one JSON string (a text) a line (tests/tokenizer/fixtures/corpus.jsonl).
  OUT_JSONL: a first line {"meta": {...}} (tokenizers' version, the tokenizer.json's sha256 and
  size), then one line a text, in corpus order:
    {"text": ..., "ids": encode(text, add_special_tokens=False).ids,
     "ids_special": encode(text, add_special_tokens=True).ids,
     "decoded": decode(ids, skip_special_tokens=False)}
The output for DeepSeek's tokenizer.json is committed as
tests/tokenizer/fixtures/deepseek_reference.jsonl (the run is described in its meta line)."""
import hashlib
import json
import sys

import tokenizers


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    tokenizer_path, corpus_path, out_path = sys.argv[1:]
    with open(tokenizer_path, "rb") as f:
        raw = f.read()
    tok = tokenizers.Tokenizer.from_str(raw.decode("utf-8"))
    with open(corpus_path, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    with open(out_path, "w", encoding="utf-8") as out:
        meta = {"tokenizers": tokenizers.__version__, "tokenizer_json_sha256":
                hashlib.sha256(raw).hexdigest(), "tokenizer_json_bytes": len(raw),
                "texts": len(texts)}
        out.write(json.dumps({"meta": meta}) + "\n")
        for text in texts:
            ids = tok.encode(text, add_special_tokens=False).ids
            record = {"text": text, "ids": ids,
                      "ids_special": tok.encode(text, add_special_tokens=True).ids,
                      "decoded": tok.decode(ids, skip_special_tokens=False)}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{len(texts)} texts, tokenizers {tokenizers.__version__}, sha256 {meta['tokenizer_json_sha256']}")


if __name__ == "__main__":
    main()
