#include "server/output_constraint.h"

#include "server/server_state.h"

namespace dsv4::server {

std::optional<ConstraintVocabulary> output_vocabulary(const Engine& engine,
                                                      const Tokenizer* tokenizer) {
  if (tokenizer == nullptr) return std::nullopt;
  return ConstraintVocabulary::build(*tokenizer, engine.vocab_size(), engine.eos_token_id());
}

bool constrain_output(const std::optional<ConstraintVocabulary>& vocabulary,
                      const std::optional<OutputFormat>& format, SamplingParams& sampling,
                      const std::string& field, HttpResponse& res, Api api) {
  if (!format) return true;
  if (!vocabulary) {
    send_error(res, 400, "this server has no tokenizer.json, which a response format needs", field,
               api);
    return false;
  }
  Result<std::shared_ptr<const TokenConstraint>> constraint = vocabulary->compile(*format);
  if (!constraint.ok()) {
    send_error(res, 400, constraint.status().message(), field, api);
    return false;
  }
  sampling.constraint = *std::move(constraint);
  return true;
}

}  // namespace dsv4::server
