// Where tensors live and kernels run. Loom computes on the CPU; the type keeps CNTK's GPU kind
// so that asking for a GPU is a clear error rather than a missing name.
#pragma once

#include <string>
#include <vector>

namespace loom {

enum class DeviceKind { CPU, GPU };

class DeviceDescriptor {
 public:
  static DeviceDescriptor cpu_device() { return DeviceDescriptor(DeviceKind::CPU, 0); }
  // CNTK's GPUDevice: an ArgumentError, as CNTK's is for a GPU it cannot find (this build has
  // none).
  static DeviceDescriptor gpu_device(int id);
  // The device new values and computations use unless told otherwise.
  static DeviceDescriptor use_default_device() { return cpu_device(); }
  // Every device this build can compute on: the CPU.
  static std::vector<DeviceDescriptor> all_devices() { return {cpu_device()}; }
  // CNTK's SetExcludedDevices: devices never chosen automatically. The CPU is the only device,
  // so excluding it is an ArgumentError; an empty list is accepted.
  static void set_excluded_devices(const std::vector<DeviceDescriptor>& excluded);

  DeviceKind kind() const { return kind_; }
  int id() const { return id_; }
  // Whether another process holds this device exclusively: never, for the CPU (as in CNTK).
  bool is_locked() const { return false; }
  std::string to_string() const {
    return kind_ == DeviceKind::CPU ? "CPU" : "GPU[" + std::to_string(id_) + "]";
  }
  bool operator==(const DeviceDescriptor&) const = default;

 private:
  DeviceDescriptor(DeviceKind k, int id) : kind_(k), id_(id) {}
  DeviceKind kind_;
  int id_;
};

}  // namespace loom
