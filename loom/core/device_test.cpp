#include "loom/core/device.h"

#include <gtest/gtest.h>

#include "loom/core/error.h"

namespace loom {
namespace {

TEST(Device, TheCpuIsTheOnlyDeviceAndAGpuIsAClearError) {
  EXPECT_EQ(DeviceDescriptor::all_devices(),
            std::vector<DeviceDescriptor>{DeviceDescriptor::cpu_device()});
  EXPECT_EQ(DeviceDescriptor::use_default_device(), DeviceDescriptor::cpu_device());
  EXPECT_FALSE(DeviceDescriptor::cpu_device().is_locked());
  try {
    DeviceDescriptor::gpu_device(0);
    FAIL() << "a GPU was given";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Specified GPU device id (0) is invalid"),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("CPU only"), std::string::npos);
  }
}

TEST(Device, TheCpuCannotBeExcluded) {
  DeviceDescriptor::set_excluded_devices({});
  EXPECT_THROW(DeviceDescriptor::set_excluded_devices({DeviceDescriptor::cpu_device()}),
               ArgumentError);
}

}  // namespace
}  // namespace loom
