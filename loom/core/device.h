// Where tensors live and kernels run. Only the CPU exists now; the type leaves room for GPUs.
#pragma once

#include <string>

namespace loom {

enum class DeviceKind { CPU, GPU };

class DeviceDescriptor {
 public:
  static DeviceDescriptor cpu_device() { return DeviceDescriptor(DeviceKind::CPU, 0); }
  static DeviceDescriptor gpu_device(int id) { return DeviceDescriptor(DeviceKind::GPU, id); }
  // The device new values and computations use unless told otherwise.
  static DeviceDescriptor use_default_device() { return cpu_device(); }

  DeviceKind kind() const { return kind_; }
  int id() const { return id_; }
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
