package com.microsoft.CNTK;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The JNI functions of libloom_java (jni/loom_java.cpp), each one call of Loom's C API
 * (loom_c.h). A failed call throws the exception that matches its status, with the C API's
 * message. Strings cross as UTF-8 bytes: JNI's own string functions use a modified UTF-8.
 */
final class Native {
  static final int FLAG_SPARSE = 1, FLAG_BATCH_AXIS = 2, FLAG_SEQUENCE_AXIS = 4;
  static final int KIND_ARGUMENT = 0, KIND_OUTPUT = 1, KIND_NODE = 2;
  private static final int API_VERSION = 1;

  static {
    System.loadLibrary("loom_java");
    int version = apiVersion();
    if (version != API_VERSION)
      throw new UnsatisfiedLinkError(
          "libloom_c implements C API version " + version + "; this cntk.jar was built for version "
              + API_VERSION + ": use the libloom_c.so built with it");
  }

  private Native() {}

  static byte[] utf8(String text) {
    byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
    return Arrays.copyOf(bytes, bytes.length + 1); // NUL-terminated
  }

  static String string(byte[] utf8) {
    return new String(utf8, StandardCharsets.UTF_8);
  }

  static native int apiVersion();

  static native long loadModel(byte[] utf8Path);

  static native long loadModelFromBytes(byte[] bytes);

  static native long cloneModel(long model);

  static native void freeModel(long model);

  static native int variableCount(long model, int kind);

  static native byte[] variableName(long model, int kind, int index);

  static native byte[] variableUid(long model, int kind, int index);

  static native int variableDataType(long model, int kind, int index);

  static native int variableFlags(long model, int kind, int index);

  static native long[] variableShape(long model, int kind, int index);

  /** Output handles for outputIndices, from the argument values at inputIndices. */
  static native long[] evaluate(long model, long[] inputIndices, long[] inputs, long[] outputIndices,
      boolean nodes);

  /**
   * numSamples dense samples (lengths null) or sequences of a sample shape in Loom's order, from
   * the first count elements of data (a vector's storage, often longer than the vector).
   */
  static native long createDenseFloat(long[] shape, long numSamples, long[] lengths, float[] data,
      int count);

  static native long createDenseDouble(long[] shape, long numSamples, long[] lengths, double[] data,
      int count);

  /** One-hot samples (lengths null) or sequences. */
  static native long createOneHot(int dataType, long dimension, long[] lengths, long[] indices);

  static native int valueDataType(long value);

  static native int valueFlags(long value);

  /**
   * A value's layout in one call: {rank, the sample shape's rank dimensions in Loom's order, the
   * number of sequences n, the n sequence lengths}; see Value.Layout.
   */
  static native long[] valueLayout(long value);

  static native float[] valueFloats(long value);

  static native double[] valueDoubles(long value);

  static native void freeValue(long value);
}
