package com.microsoft.CNTK;

import java.util.Collections;
import java.util.List;

/** The device to compute on: Loom computes on the CPU, which is the only one. */
public final class DeviceDescriptor {
  private static final DeviceDescriptor CPU = new DeviceDescriptor();

  private DeviceDescriptor() {}

  public static DeviceDescriptor getCPUDevice() {
    return CPU;
  }

  public static DeviceDescriptor useDefaultDevice() {
    return CPU;
  }

  public static DeviceDescriptor getGPUDevice(long deviceId) {
    throw new UnsupportedOperationException(
        "GPU device " + deviceId + ": Loom evaluates on the CPU only; use getCPUDevice()");
  }

  public List<DeviceDescriptor> getAllDevices() {
    return Collections.singletonList(CPU);
  }

  public long getId() {
    return 0;
  }

  public DeviceKind getType() {
    return DeviceKind.CPU;
  }

  @Override
  public String toString() {
    return "CPU";
  }
}
