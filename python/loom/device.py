"""Devices (CNTK's cntk.device). Loom computes on the CPU."""
from loom._loom import DeviceDescriptor


def cpu():
    return DeviceDescriptor.cpu_device()


def gpu(device_id):
    return DeviceDescriptor.gpu_device(device_id)


def use_default_device():
    return DeviceDescriptor.use_default_device()


def try_set_default_device(new_default_device, acquire_device_lock=False):
    """True for the CPU, the only device Loom computes on."""
    return new_default_device == cpu()
