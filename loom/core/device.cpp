#include "loom/core/device.h"

#include "loom/core/error.h"

namespace loom {

DeviceDescriptor DeviceDescriptor::gpu_device(int id) {
  throw ArgumentError("Specified GPU device id (" + std::to_string(id) +
                      ") is invalid: this build of Loom computes on the CPU only; use the CPU "
                      "device (cntk.device.cpu(), DeviceDescriptor::cpu_device())");
}

void DeviceDescriptor::set_excluded_devices(const std::vector<DeviceDescriptor>& excluded) {
  for (const DeviceDescriptor& d : excluded)
    LOOM_CHECK(d.kind() != DeviceKind::CPU, ArgumentError,
               "set_excluded_devices: the CPU is the only device this build of Loom computes "
               "on; it cannot be excluded");
}

}  // namespace loom
