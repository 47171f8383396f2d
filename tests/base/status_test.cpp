#include "dsv4/status.h"

#include <gtest/gtest.h>

namespace dsv4 {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("expected a positive number, got " + std::to_string(x));
  return x;
}

Status doubled_into(int x, int* out) {
  DSV4_ASSIGN_OR_RETURN(int value, parse_positive(x));
  *out = 2 * value;
  return ok_status();
}

TEST(StatusTest, ResultCarriesValueOrError) {
  Result<int> good = parse_positive(3);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  Result<int> bad = parse_positive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().to_string(), "invalid argument: expected a positive number, got -1");
}

TEST(StatusTest, AssignOrReturnPropagatesAndContextPrefixes) {
  int out = 0;
  EXPECT_TRUE(doubled_into(4, &out).ok());
  EXPECT_EQ(out, 8);
  Status status = doubled_into(0, &out).with_context("layer 3");
  EXPECT_EQ(status.message(), "layer 3: expected a positive number, got 0");
}

TEST(StatusTest, ResultFromOkStatusIsAnError) {
  Result<int> r = ok_status();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace dsv4
