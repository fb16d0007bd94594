package com.microsoft.CNTK;

import java.util.Arrays;

/**
 * CNTK's Value: data going into or coming out of an evaluation (one loom_value handle). The C
 * API copies the caller's data when a Value is made, so the vectors may be reused at once.
 * close() (or CNTK's delete()) frees the handle; a Value never closed is freed once unreachable.
 */
public final class Value implements AutoCloseable {
  // A batch (createBatch*) given to an argument with a sequence axis is read as sequences of
  // one step each, as CNTK's batch meant there (Loom's ModelRunner does that).
  private NativeHandle handle;

  Value(long address) {
    handle = new NativeHandle(this, address, false);
  }

  // ---- Dense data ------------------------------------------------------------------------

  /** Sequences of samples of sampleShape, each its steps one after another in CNTK's order. */
  public static Value createDenseFloat(NDShape sampleShape, FloatVectorVector sequences,
      DeviceDescriptor device) {
    float[][] each = new float[(int) sequences.size()][];
    for (int i = 0; i < each.length; ++i) each[i] = sequences.get(i).toArray();
    return denseSequences(sampleShape, each, concatenate(each), "Value.createDenseFloat");
  }

  public static Value createDenseDouble(NDShape sampleShape, DoubleVectorVector sequences,
      DeviceDescriptor device) {
    double[][] each = new double[(int) sequences.size()][];
    for (int i = 0; i < each.length; ++i) each[i] = sequences.get(i).toArray();
    return denseSequences(sampleShape, each, concatenate(each), "Value.createDenseDouble");
  }

  /** A batch of samples, one after another. */
  public static Value createBatchFloat(NDShape sampleShape, FloatVector batch, DeviceDescriptor device) {
    // The vector's own storage: the C API copies the elements.
    int count = (int) batch.size();
    int n = samples(sampleShape, count, "Value.createBatchFloat");
    return new Value(Native.createDenseFloat(sampleShape.toLoom(), n, null, batch.storageFloats(), count));
  }

  public static Value createBatchDouble(NDShape sampleShape, DoubleVector batch, DeviceDescriptor device) {
    int count = (int) batch.size();
    int n = samples(sampleShape, count, "Value.createBatchDouble");
    return new Value(Native.createDenseDouble(sampleShape.toLoom(), n, null, batch.storageDoubles(), count));
  }

  public static Value createSequenceFloat(NDShape sampleShape, FloatVector sequence, DeviceDescriptor device) {
    return createSequenceFloat(sampleShape, sequence, true, device);
  }

  public static Value createSequenceFloat(NDShape sampleShape, FloatVector sequence,
      boolean sequenceStartFlag, DeviceDescriptor device) {
    startFlag(sequenceStartFlag);
    float[] data = sequence.toArray();
    return denseSequences(sampleShape, new float[][] {data}, data, "Value.createSequenceFloat");
  }

  public static Value createSequenceDouble(NDShape sampleShape, DoubleVector sequence, DeviceDescriptor device) {
    return createSequenceDouble(sampleShape, sequence, true, device);
  }

  public static Value createSequenceDouble(NDShape sampleShape, DoubleVector sequence,
      boolean sequenceStartFlag, DeviceDescriptor device) {
    startFlag(sequenceStartFlag);
    double[] data = sequence.toArray();
    return denseSequences(sampleShape, new double[][] {data}, data, "Value.createSequenceDouble");
  }

  // ---- One-hot data: each sample is the index of its 1 in a vector of `dimension` ----------

  public static Value createOneHotFloat(long dimension, SizeTVectorVector sequences, DeviceDescriptor device) {
    return oneHotSequences(DataType.Float, dimension, sequences);
  }

  public static Value createOneHotDouble(long dimension, SizeTVectorVector sequences, DeviceDescriptor device) {
    return oneHotSequences(DataType.Double, dimension, sequences);
  }

  public static Value createOneHotFloat(NDShape sampleShape, SizeTVectorVector sequences,
      DeviceDescriptor device) {
    return oneHotSequences(DataType.Float, vectorSize(sampleShape), sequences);
  }

  public static Value createOneHotDouble(NDShape sampleShape, SizeTVectorVector sequences,
      DeviceDescriptor device) {
    return oneHotSequences(DataType.Double, vectorSize(sampleShape), sequences);
  }

  public static Value createBatchFloat(long dimension, SizeTVector batch, DeviceDescriptor device) {
    return oneHotBatch(DataType.Float, dimension, batch);
  }

  public static Value createBatchDouble(long dimension, SizeTVector batch, DeviceDescriptor device) {
    return oneHotBatch(DataType.Double, dimension, batch);
  }

  public static Value createSequenceFloat(long dimension, SizeTVector sequence,
      boolean sequenceStartFlag, DeviceDescriptor device) {
    startFlag(sequenceStartFlag);
    long[] indices = sequence.toArray();
    return new Value(Native.createOneHot(DataType.Float.code, dimension, new long[] {indices.length}, indices));
  }

  public static Value createSequenceDouble(long dimension, SizeTVector sequence,
      boolean sequenceStartFlag, DeviceDescriptor device) {
    startFlag(sequenceStartFlag);
    long[] indices = sequence.toArray();
    return new Value(Native.createOneHot(DataType.Double.code, dimension, new long[] {indices.length}, indices));
  }

  // ---- Reading ---------------------------------------------------------------------------

  public DataType getDataType() {
    return DataType.of(Native.valueDataType(address()));
  }

  public boolean isSparse() {
    return (Native.valueFlags(address()) & Native.FLAG_SPARSE) != 0;
  }

  public boolean isValid() {
    return handle.isLive();
  }

  public boolean isReadOnly() {
    return false;
  }

  public DeviceDescriptor getDevice() {
    return DeviceDescriptor.getCPUDevice();
  }

  /**
   * CNTK's shape of a Value: the sample shape, then the longest sequence's length, then the
   * number of sequences (samples of a batch are sequences of length 1).
   */
  public NDShape getShape() {
    Layout layout = layout();
    long longest = 0;
    for (int i = 0; i < layout.sequences(); ++i) longest = Math.max(longest, layout.length(i));
    SizeTVector axes = new SizeTVector();
    axes.add(longest);
    axes.add(layout.sequences());
    return layout.sampleShape().appendShape(new NDShape(axes));
  }

  /** The data of each sequence (or sample) into `sequences`, its steps in CNTK's order. */
  public void copyVariableValueToFloat(Variable outputVariable, FloatVectorVector sequences) {
    long self = address();
    Layout layout = checkedLayout(outputVariable, self);
    float[] data = Native.valueFloats(self);
    sequences.clear();
    // One sequence takes the array as it is; more take their part each.
    if (layout.sequences() == 1) {
      sequences.add(new FloatVector(data, data.length));
      return;
    }
    int start = 0;
    for (int i = 0; i < layout.sequences(); ++i) {
      int size = layout.elements(i);
      sequences.add(new FloatVector(Arrays.copyOfRange(data, start, start + size), size));
      start += size;
    }
  }

  public void copyVariableValueToDouble(Variable outputVariable, DoubleVectorVector sequences) {
    long self = address();
    Layout layout = checkedLayout(outputVariable, self);
    double[] data = Native.valueDoubles(self);
    sequences.clear();
    if (layout.sequences() == 1) {
      sequences.add(new DoubleVector(data, data.length));
      return;
    }
    int start = 0;
    for (int i = 0; i < layout.sequences(); ++i) {
      int size = layout.elements(i);
      sequences.add(new DoubleVector(Arrays.copyOfRange(data, start, start + size), size));
      start += size;
    }
  }

  @Override
  public void close() {
    handle.close();
  }

  /** CNTK's name for close(). */
  public void delete() {
    close();
  }

  // ---- Internals -------------------------------------------------------------------------

  long address() {
    return handle.get();
  }

  /** Evaluate's result into an output Value the caller gave: CNTK writes into it. */
  synchronized void takeDataOf(Value result, Variable output) {
    Layout mine = layout(), theirs = result.layout();
    if (!theirs.sameAs(mine)) {
      String message = "Function.evaluate: the Value given for output " + output + " has shape "
          + getShape() + "; the output has " + result.getShape() + ": give null to get a new Value";
      result.close();
      throw new IllegalArgumentException(message);
    }
    handle.close();
    handle = result.handle;
  }

  /**
   * A value's sample shape and sequence lengths, read in one native call: {rank, the rank
   * dimensions in Loom's order, the number of sequences n, the n lengths}.
   */
  private static final class Layout {
    private final long[] v;
    private final int rank;
    private final long sampleSize;

    Layout(long[] v) {
      this.v = v;
      rank = (int) v[0];
      long size = 1;
      for (int i = 1; i <= rank; ++i) size *= v[i];
      sampleSize = size;
    }

    int sequences() {
      return (int) v[rank + 1];
    }

    long length(int i) {
      return v[rank + 2 + i];
    }

    /** The elements of sequence i. */
    int elements(int i) {
      return (int) (length(i) * sampleSize);
    }

    long sampleSize() {
      return sampleSize;
    }

    NDShape sampleShape() {
      return NDShape.fromLoom(Arrays.copyOfRange(v, 1, rank + 1));
    }

    boolean sameAs(Layout other) {
      return Arrays.equals(v, other.v);
    }
  }

  private Layout layout() {
    return new Layout(Native.valueLayout(address()));
  }

  private static Layout checkedLayout(Variable outputVariable, long value) {
    Layout layout = new Layout(Native.valueLayout(value));
    NDShape expected = outputVariable.getShape();
    if (!expected.hasUnboundDimension() && expected.getTotalSize() != layout.sampleSize())
      throw new IllegalArgumentException("Value.copyVariableValueTo: the value's samples have shape "
          + layout.sampleShape() + ", the variable " + outputVariable + " has " + expected);
    return layout;
  }

  private static Value denseSequences(NDShape sampleShape, Object[] each, Object data, String what) {
    long size = sampleSize(sampleShape, what);
    long[] lengths = new long[each.length];
    for (int i = 0; i < each.length; ++i) {
      int n = java.lang.reflect.Array.getLength(each[i]);
      if (n == 0 || n % size != 0)
        throw new IllegalArgumentException(what + ": sequence " + i + " has " + n
            + " values, not a whole number (at least 1) of samples of shape " + sampleShape + " ("
            + size + " values each)");
      lengths[i] = n / size;
    }
    long[] shape = sampleShape.toLoom();
    int count = java.lang.reflect.Array.getLength(data);
    return new Value(data instanceof float[] ? Native.createDenseFloat(shape, 0, lengths, (float[]) data, count)
                                             : Native.createDenseDouble(shape, 0, lengths, (double[]) data, count));
  }

  private static Value oneHotSequences(DataType type, long dimension, SizeTVectorVector sequences) {
    long[][] each = new long[(int) sequences.size()][];
    long[] lengths = new long[each.length];
    for (int i = 0; i < each.length; ++i) {
      each[i] = sequences.get(i).toArray();
      lengths[i] = each[i].length;
    }
    return new Value(Native.createOneHot(type.code, dimension, lengths, concatenate(each)));
  }

  private static Value oneHotBatch(DataType type, long dimension, SizeTVector batch) {
    return new Value(Native.createOneHot(type.code, dimension, null, batch.toArray()));
  }

  private static long vectorSize(NDShape sampleShape) {
    if (sampleShape.getRank() != 1)
      throw new IllegalArgumentException(
          "Value.createOneHot: one-hot samples are vectors [dimension], not " + sampleShape);
    return sampleShape.getDimensions()[0];
  }

  private static long sampleSize(NDShape sampleShape, String what) {
    long size = sampleShape.getTotalSize();
    if (size == 0) throw new IllegalArgumentException(what + ": the sample shape " + sampleShape + " has no elements");
    return size;
  }

  private static int samples(NDShape sampleShape, int values, String what) {
    long size = sampleSize(sampleShape, what);
    if (values == 0 || values % size != 0)
      throw new IllegalArgumentException(what + ": " + values
          + " values are not a whole number (at least 1) of samples of shape " + sampleShape + " ("
          + size + " values each)");
    return (int) (values / size);
  }

  /** The arrays one after another, in one array of their element type. */
  private static <A> A concatenate(A[] arrays) {
    int total = 0;
    for (A a : arrays) total += java.lang.reflect.Array.getLength(a);
    @SuppressWarnings("unchecked")
    A all = (A) java.lang.reflect.Array.newInstance(arrays.getClass().getComponentType().getComponentType(), total);
    int at = 0;
    for (A a : arrays) {
      int n = java.lang.reflect.Array.getLength(a);
      System.arraycopy(a, 0, all, at, n);
      at += n;
    }
    return all;
  }

  /** Loom evaluates whole sequences: a sequence continued from an earlier call cannot be. */
  private static void startFlag(boolean sequenceStartFlag) {
    if (!sequenceStartFlag)
      throw new UnsupportedOperationException("A sequence start flag is false: Loom evaluates whole"
          + " sequences and cannot continue one from an earlier evaluate; give each sequence whole,"
          + " with its flag true");
  }
}
