package com.microsoft.CNTK;

/** Element types; the values are CNTK's (and loom_c.h's LOOM_FLOAT32, LOOM_FLOAT64). */
public enum DataType {
  Unknown(0),
  Float(1),
  Double(2);

  final int code;

  DataType(int code) {
    this.code = code;
  }

  static DataType of(int code) {
    for (DataType t : values())
      if (t.code == code) return t;
    return Unknown;
  }
}
