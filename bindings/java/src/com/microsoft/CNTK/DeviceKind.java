package com.microsoft.CNTK;

public enum DeviceKind {
  CPU,
  GPU
}
