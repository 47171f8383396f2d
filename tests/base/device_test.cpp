// What the device queries answer on the host: the memory free_device_bytes reports for it.
#include "base/device.h"

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

}  // namespace
}  // namespace dsv4
