#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, CPU only) and runs each for
# DSV4_FUZZ_SECONDS (default 30) from the committed seeds: tests/fuzz/corpus for the
# safetensors parsers, the tokenizer, its Split patterns' matcher, the chat encoder's JSON, the
# server's request bodies (the chat one also encodes what it accepts and parses replies) and the
# structured-output compilers (JSON Schema and regex) and config.json (with the golden and V4
# fixture configs).
# New inputs go to <build-dir>/corpus, so the committed corpus stays as it is; the full log of
# each run is <build-dir>/<target>.log, a crashing input <build-dir>/crash-*.
# Usage: scripts/fuzz.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
seconds=${DSV4_FUZZ_SECONDS:-30}
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DDSV4_CUDA=OFF -DDSV4_FUZZ=ON
cmake --build "$build" -j "$(nproc)" --target safetensors_fuzz shard_index_fuzz config_fuzz \
      tokenizer_fuzz regex_fuzz python_json_fuzz completion_request_fuzz chat_request_fuzz \
      json_schema_fuzz
# target, its dictionary, its seed folders
runs=("safetensors safetensors tests/fuzz/corpus/safetensors"
      "shard_index safetensors tests/fuzz/corpus/shard_index"
      "config config tests/fuzz/corpus/config tests/golden/configs tests/checkpoint/fixtures"
      "tokenizer tokenizer tests/fuzz/corpus/tokenizer"
      "regex regex tests/fuzz/corpus/regex"
      "python_json python_json tests/fuzz/corpus/python_json"
      "completion_request completion_request tests/fuzz/corpus/completion_request"
      "chat_request chat_request tests/fuzz/corpus/chat_request"
      "json_schema json_schema tests/fuzz/corpus/json_schema")
export DSV4_SOURCE_DIR=$PWD  # tokenizer_fuzz reads its test tokenizer from the tree
for run in "${runs[@]}"; do
  read -r target dict seeds <<<"$run"
  mkdir -p "$build/corpus/$target"
  echo "fuzzing $target for ${seconds} s"
  # shellcheck disable=SC2086  # seeds: one or more folders
  "$build/tests/fuzz/${target}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -dict="tests/fuzz/$dict.dict" -print_final_stats=1 -artifact_prefix="$build/" \
      "$build/corpus/$target" $seeds >"$build/$target.log" 2>&1 ||
    { tail -n 60 "$build/$target.log"; echo "fuzz: $target failed; input saved in $build/"; exit 1; }
  grep '^stat::' "$build/$target.log"
done
