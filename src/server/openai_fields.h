// The body fields that both of the OpenAI endpoints, /v1/chat/completions (chat_request.cpp) and
// /v1/completions (completion_request.cpp), take, in one list, so that a sampling field the
// server learns reaches both: each endpoint refuses any other field that is not its own
// (refuse_unknown with this list and its own). Anthropic's /v1/messages names its fields its own
// way (messages_request.cpp).
#pragma once

#include <array>
#include <string_view>

namespace dsv4::server {

inline constexpr std::array<std::string_view, 17> kOpenAiSharedFields = {
    // Checked, then ignored: one model per server (check_model_and_user).
    "model",
    "user",
    // How each token is drawn, and how many (read_sampling; chat also spells the limit
    // max_completion_tokens, its own field).
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    // How many replies, where each ends, how they are sent (read_choices, read_stop,
    // read_stream) and with which logprobs (each endpoint reads its own form).
    "n",
    "stop",
    "stream",
    "stream_options",
    "logprobs",
    // Structured outputs (output_format.h).
    "response_format",
    "structured_outputs",
};

}  // namespace dsv4::server
