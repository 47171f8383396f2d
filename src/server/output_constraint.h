// A request's output format (server/output_format.h) compiled into its sampling's constraint,
// against the server's vocabulary: the one server-side step of structured outputs.
#pragma once

#include <optional>
#include <string>

#include "dsv4/engine.h"
#include "dsv4/structured_output.h"
#include "dsv4/tokenizer.h"
#include "server/http_server.h"

namespace dsv4::server {

enum class Api;

// The tokens' bytes for `engine`'s vocabulary, built once (null tokenizer: none, and formats
// are refused).
std::optional<ConstraintVocabulary> output_vocabulary(const Engine& engine,
                                                      const Tokenizer* tokenizer);

// Sets sampling.constraint to `format` compiled (nothing without a format). False, with the 400
// sent (param `field`: what asked for the format), when the server has no tokenizer or the
// compiler refuses the format, naming what it does not support (`JSON Schema keyword "minimum"
// at #/properties/age is not supported`).
bool constrain_output(const std::optional<ConstraintVocabulary>& vocabulary,
                      const std::optional<OutputFormat>& format, SamplingParams& sampling,
                      const std::string& field, HttpResponse& res, Api api);

}  // namespace dsv4::server
