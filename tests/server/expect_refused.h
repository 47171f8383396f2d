// The request parsers' tests: a body refused with the field named and the message saying why.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "server/request_fields.h"

namespace dsv4::server {

// `parsed` is an error whose param is `param` and whose message contains `message`.
template <typename Request>
void expect_refused(const std::variant<Request, RequestError>& parsed, const std::string& param,
                    const std::string& message) {
  const auto* bad = std::get_if<RequestError>(&parsed);
  ASSERT_NE(bad, nullptr) << "accepted";
  EXPECT_EQ(bad->param, param);
  EXPECT_NE(bad->message.find(message), std::string::npos) << bad->message;
}

}  // namespace dsv4::server
