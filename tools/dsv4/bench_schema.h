// dsv4 bench --json-schema FILE: every sequence held to a JSON Schema, as the server holds a
// request to its response_format json_schema (or structured_outputs json): the schema compiled
// once against the checkpoint's tokenizer into each sequence's SamplingParams::constraint, so the
// engine makes a step's masks on its helper thread while the forward runs (runtime/batch.cpp),
// and the decode step with the schema can be held against the step without it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dsv4/engine.h"
#include "dsv4/status.h"
#include "dsv4/structured_output.h"
#include "dsv4/tokenizer.h"

namespace dsv4::tools {

struct BenchSchema {
  std::string path;     // the file, as given
  std::string text;     // its JSON Schema
  Tokenizer tokenizer;  // the checkpoint's: the bytes each token writes, which the masks match
};

// The file's schema and MODEL/tokenizer.json, read before the engine loads; each error names the
// file it is about.
Result<BenchSchema> read_bench_schema(const std::string& path, const std::string& model_dir);

// The schema compiled against the open engine's vocabulary; a schema the compiler refuses
// (malformed, or a keyword it does not support) is named with the file.
Result<std::shared_ptr<const TokenConstraint>> compile_bench_schema(const BenchSchema& schema,
                                                                    const Engine& engine);

// What the constrained sequences of a run wrote, in a line: how many closed their document
// (drew eos, after which only eos may come) within the tokens asked for, and the first one's
// text with its control characters escaped, so a reader sees the schema at work.
std::string describe_documents(const std::vector<Generation>& out, const Tokenizer& tokenizer,
                               int64_t eos_token_id);

}  // namespace dsv4::tools
