// python_json: what Python's json.dumps(ensure_ascii=False) writes (values checked with
// Python 3.11), where nlohmann's own dump differs.
#include "chat/python_json.h"

#include <gtest/gtest.h>

namespace dsv4::chat {
namespace {

std::string dumps(const std::string& json_text) {
  return python_json(format::parse_ordered_json(json_text, "test").value());
}

TEST(PythonJsonTest, WritesFloatsAsPythonsRepr) {
  EXPECT_EQ(dumps("[1e15, 1e16, 123456789012345.6, 0.0001, 0.00001, 1.0, -0.0, 2.5e20, 1e-7]"),
            "[1000000000000000.0, 1e+16, 123456789012345.6, 0.0001, 1e-05, 1.0, -0.0, 2.5e+20, "
            "1e-07]");
  EXPECT_EQ(dumps("[0.1, 100, -3, 1.5e300, 5e-324]"), "[0.1, 100, -3, 1.5e+300, 5e-324]");
}

TEST(PythonJsonTest, KeepsKeyOrderAndWritesSpacesAndEscapes) {
  EXPECT_EQ(dumps(R"({"b": [true, false, null], "a": {}, "c": [], "é": "tab\t\u0001\"\\ 😀"})"),
            R"({"b": [true, false, null], "a": {}, "c": [], "é": "tab\t\u0001\"\\ 😀"})");
  EXPECT_EQ(python_json_string("bad \xff byte"), "\"bad \xEF\xBF\xBD byte\"");
}

}  // namespace
}  // namespace dsv4::chat
