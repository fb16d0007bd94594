package com.microsoft.CNTK;

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
    float[] data = batch.toArray();
    int n = samples(sampleShape, data.length, "Value.createBatchFloat");
    return new Value(Native.createDenseFloat(sampleShape.toLoom(), n, null, data));
  }

  public static Value createBatchDouble(NDShape sampleShape, DoubleVector batch, DeviceDescriptor device) {
    double[] data = batch.toArray();
    int n = samples(sampleShape, data.length, "Value.createBatchDouble");
    return new Value(Native.createDenseDouble(sampleShape.toLoom(), n, null, data));
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
    long[] lengths = Native.valueSequenceLengths(address());
    long longest = 0;
    for (long l : lengths) longest = Math.max(longest, l);
    SizeTVector axes = new SizeTVector();
    axes.add(longest);
    axes.add(lengths.length);
    return sampleShape().appendShape(new NDShape(axes));
  }

  /** The data of each sequence (or sample) into `sequences`, its steps in CNTK's order. */
  public void copyVariableValueToFloat(Variable outputVariable, FloatVectorVector sequences) {
    long[] lengths = checkedLengths(outputVariable);
    float[] data = Native.valueFloats(address());
    sequences.clear();
    int start = 0, size = (int) sampleShape().getTotalSize();
    for (long length : lengths) {
      FloatVector sequence = new FloatVector();
      sequence.reserve(length * size);
      for (int i = 0; i < length * size; ++i) sequence.add(data[start++]);
      sequences.add(sequence);
    }
  }

  public void copyVariableValueToDouble(Variable outputVariable, DoubleVectorVector sequences) {
    long[] lengths = checkedLengths(outputVariable);
    double[] data = Native.valueDoubles(address());
    sequences.clear();
    int start = 0, size = (int) sampleShape().getTotalSize();
    for (long length : lengths) {
      DoubleVector sequence = new DoubleVector();
      sequence.reserve(length * size);
      for (int i = 0; i < length * size; ++i) sequence.add(data[start++]);
      sequences.add(sequence);
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
    if (!result.sampleShape().equals(sampleShape())
        || !java.util.Arrays.equals(Native.valueSequenceLengths(result.address()),
            Native.valueSequenceLengths(address()))) {
      String message = "Function.evaluate: the Value given for output " + output + " has shape "
          + getShape() + "; the output has " + result.getShape() + ": give null to get a new Value";
      result.close();
      throw new IllegalArgumentException(message);
    }
    handle.close();
    handle = result.handle;
  }

  private NDShape sampleShape() {
    return NDShape.fromLoom(Native.valueSampleShape(address()));
  }

  private long[] checkedLengths(Variable outputVariable) {
    NDShape sample = sampleShape(), expected = outputVariable.getShape();
    if (!expected.hasUnboundDimension() && expected.getTotalSize() != sample.getTotalSize())
      throw new IllegalArgumentException("Value.copyVariableValueTo: the value's samples have shape "
          + sample + ", the variable " + outputVariable + " has " + expected);
    return Native.valueSequenceLengths(address());
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
    return new Value(data instanceof float[] ? Native.createDenseFloat(shape, 0, lengths, (float[]) data)
                                             : Native.createDenseDouble(shape, 0, lengths, (double[]) data));
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
