"""Devices (CNTK's cntk.device). Loom computes on the CPU: asking for a GPU is an error, as in
CNTK on a machine without one."""
from loom._loom.device import DeviceDescriptor, DeviceKind  # noqa: F401


def all_devices():
    """Every device Loom can compute on: the CPU."""
    return DeviceDescriptor.all_devices()


def cpu():
    return DeviceDescriptor.cpu_device()


def gpu(device_id):
    return DeviceDescriptor.gpu_device(device_id)


def use_default_device():
    return DeviceDescriptor.use_default_device()


def try_set_default_device(new_default_device, acquire_device_lock=False):
    """True for the CPU, the only device Loom computes on."""
    return new_default_device == cpu()


def set_excluded_devices(excluded_devices):
    """Devices never chosen automatically; the CPU, the only one, cannot be excluded."""
    DeviceDescriptor.set_excluded_devices(excluded_devices)
