// kernels::run_beside on the CPU (label unit): the side chain, then the main one; a failing
// side chain's status comes back and the main chain is skipped. The GPU's two streams are
// tested in run_beside_cuda_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "kernels/ops.h"

namespace dsv4::kernels {
namespace {

TEST(RunBeside, CpuRunsSideThenMain) {
  std::string order;
  const Status status = run_beside(
      Device::kCpu,
      [&] {
        order += "side ";
        return ok_status();
      },
      [&] {
        order += "main";
        return ok_status();
      });
  EXPECT_TRUE(status.ok()) << status.to_string();
  EXPECT_EQ(order, "side main");
}

TEST(RunBeside, CpuFailingSideSkipsMain) {
  bool main_ran = false;
  const Status status = run_beside(
      Device::kCpu, [] { return invalid_argument("side refused"); },
      [&] {
        main_ran = true;
        return ok_status();
      });
  EXPECT_EQ(status.message(), "side refused");
  EXPECT_FALSE(main_ran);
}

TEST(RunBeside, CpuFailingMainComesBack) {
  const Status status = run_beside(
      Device::kCpu, [] { return ok_status(); }, [] { return internal_error("main failed"); });
  EXPECT_EQ(status.message(), "main failed");
}

}  // namespace
}  // namespace dsv4::kernels
