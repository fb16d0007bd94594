// CNTK's cntk.device: the device descriptors (Loom computes on the CPU).
#include "python/src/binding.h"

namespace loom::python {

void add_device(py::module_ m) {
  py::enum_<DeviceKind>(m, "DeviceKind")
      .value("CPU", DeviceKind::CPU)
      .value("GPU", DeviceKind::GPU);
  py::class_<DeviceDescriptor>(m, "DeviceDescriptor")
      .def_static("cpu_device", &DeviceDescriptor::cpu_device)
      .def_static("gpu_device", &DeviceDescriptor::gpu_device, py::arg("device_id"))
      .def_static("use_default_device", &DeviceDescriptor::use_default_device)
      .def_static("all_devices", &DeviceDescriptor::all_devices)
      .def_static("set_excluded_devices", &DeviceDescriptor::set_excluded_devices,
                  py::arg("excluded_devices"))
      .def("type", &DeviceDescriptor::kind)
      .def("id", &DeviceDescriptor::id)
      .def("is_locked", &DeviceDescriptor::is_locked)
      .def("__eq__", &DeviceDescriptor::operator==)
      .def("__repr__", &DeviceDescriptor::to_string);
}

}  // namespace loom::python
