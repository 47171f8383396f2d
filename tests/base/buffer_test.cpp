// Buffer and Tensor on the host: what free_device_bytes reports for the host, and the errors of
// an impossible allocation (model sizes come from user configs, so they must not abort).
#include "base/buffer.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace dsv4 {
namespace {

// The host's available memory (MemAvailable: free pages and the page cache it can reclaim) is
// positive and no more than its physical memory.
TEST(FreeDeviceBytesTest, HostAvailableMemoryIsWithinPhysicalMemory) {
  const Result<int64_t> available = free_device_bytes(Device::kCpu);
  ASSERT_TRUE(available.ok()) << available.status().to_string();
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  EXPECT_GT(*available, 0);
  EXPECT_LE(*available, physical);
}

TEST(TensorTest, ImpossibleShapesAreErrorsNotAborts) {
  EXPECT_EQ(Tensor::empty(DType::kF32, {2, -1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::empty_mapped_host(DType::kF32, {-3}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::empty(DType::kU8, {int64_t{1} << 60}).status().code(),
            StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace dsv4
