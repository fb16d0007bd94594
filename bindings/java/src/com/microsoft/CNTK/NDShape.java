package com.microsoft.CNTK;

import java.util.Arrays;

/**
 * CNTK's NDShape: dimensions in CNTK's order, the fastest-changing (contiguous) one first.
 * Loom and loom_c.h list them the other way round, so the binding reverses a shape whenever it
 * crosses the C API; the elements' order in memory is the same either way.
 */
public final class NDShape {
  public static final long InferredDimension = -1; // loom_c.h's LOOM_DIM_INFERRED
  public static final long FreeDimension = -3; // LOOM_DIM_FREE

  private final long[] dims;
  // Computed once (an NDShape does not change): Loom's order, whether a dimension is inferred or
  // free, the number of elements.
  private final long[] loomDims;
  private final boolean inferred, free;
  private final long totalSize;

  public NDShape() {
    this(new long[0]);
  }

  public NDShape(long numAxes) {
    this(numAxes, InferredDimension);
  }

  public NDShape(long numAxes, long dimension) {
    this(filled(numAxes, dimension));
  }

  public NDShape(SizeTVector dimensions) {
    this(dimensions.toArray());
  }

  private NDShape(long[] dimensions) {
    for (long d : dimensions)
      if (d < 0 && d != InferredDimension && d != FreeDimension)
        throw new IllegalArgumentException(
            "NDShape dimension " + d
                + ": a dimension is a size (>= 0), InferredDimension or FreeDimension");
    dims = dimensions;
    loomDims = reversed(dimensions);
    boolean anyInferred = false, anyFree = false;
    long size = 1;
    for (long d : dimensions) {
      anyInferred |= d == InferredDimension;
      anyFree |= d == FreeDimension;
      size *= d;
    }
    inferred = anyInferred;
    free = anyFree;
    totalSize = size;
  }

  public long getRank() {
    return dims.length;
  }

  public long[] getDimensions() {
    return dims.clone();
  }

  public long getDimensionSize(long axis) {
    return dims[(int) axis];
  }

  public boolean isUnknown() {
    return false;
  }

  public boolean hasInferredDimension() {
    return inferred;
  }

  public boolean hasFreeDimension() {
    return free;
  }

  public boolean hasUnboundDimension() {
    return inferred || free;
  }

  public long getTotalSize() {
    if (inferred || free)
      throw new IllegalStateException(
          "NDShape " + this
              + " has an inferred or free dimension: its total size is not known before data"
              + " are given");
    return totalSize;
  }

  public NDShape appendShape(NDShape shape) {
    long[] all = Arrays.copyOf(dims, dims.length + shape.dims.length);
    System.arraycopy(shape.dims, 0, all, dims.length, shape.dims.length);
    return new NDShape(all);
  }

  /** Loom's order (loom_c.h's dims arrays) to CNTK's, and back. */
  static NDShape fromLoom(long[] loomDims) {
    return new NDShape(reversed(loomDims));
  }

  /** Loom's order: the shape's own array, which the caller only reads (the JNI calls do). */
  long[] toLoom() {
    return loomDims;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof NDShape && Arrays.equals(dims, ((NDShape) o).dims);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(dims);
  }

  /** CNTK's AsString: "[2 x 1]". */
  @Override
  public String toString() {
    StringBuilder s = new StringBuilder("[");
    for (int i = 0; i < dims.length; ++i) s.append(i == 0 ? "" : " x ").append(dims[i]);
    return s.append("]").toString();
  }

  private static long[] filled(long numAxes, long dimension) {
    long[] d = new long[(int) numAxes];
    Arrays.fill(d, dimension);
    return d;
  }

  private static long[] reversed(long[] d) {
    long[] r = new long[d.length];
    for (int i = 0; i < d.length; ++i) r[i] = d[d.length - 1 - i];
    return r;
  }
}
