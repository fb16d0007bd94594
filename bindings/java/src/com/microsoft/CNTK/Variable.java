package com.microsoft.CNTK;

/**
 * CNTK's Variable: an argument or output of a loaded model. Its description is read once from
 * the C API when the Function is loaded; a Variable holds no native handle.
 */
public final class Variable {
  final int index; // in the model's argument, output or node output list
  final boolean node; // from the node outputs (findByName of an inner function)
  private final boolean output;
  private final String name, uid;
  private final NDShape shape;
  private final DataType dataType;
  private final int flags;

  Variable(boolean output, int index, boolean node, String name, String uid, NDShape shape,
      DataType dataType, int flags) {
    this.output = output;
    this.index = index;
    this.node = node;
    this.name = name;
    this.uid = uid;
    this.shape = shape;
    this.dataType = dataType;
    this.flags = flags;
  }

  public String getName() {
    return name;
  }

  public String getUid() {
    return uid;
  }

  /** The sample shape (without the sequence and batch axes), in CNTK's order. */
  public NDShape getShape() {
    return shape;
  }

  public DataType getDataType() {
    return dataType;
  }

  public boolean isInput() {
    return !output;
  }

  public boolean isOutput() {
    return output;
  }

  public boolean isParameter() {
    return false;
  }

  public boolean isConstant() {
    return false;
  }

  public boolean isSparse() {
    return (flags & Native.FLAG_SPARSE) != 0;
  }

  /** CNTK lists these as getDynamicAxes(); loom_c.h reports which of the two there are. */
  public boolean hasSequenceAxis() {
    return (flags & Native.FLAG_SEQUENCE_AXIS) != 0;
  }

  public boolean hasBatchAxis() {
    return (flags & Native.FLAG_BATCH_AXIS) != 0;
  }

  /**
   * A model's variables, and a clone's, are the same when their uids are: a Variable taken
   * from one handle of a model may be used with any clone of it.
   */
  @Override
  public boolean equals(Object o) {
    return o instanceof Variable && ((Variable) o).output == output && ((Variable) o).uid.equals(uid);
  }

  @Override
  public int hashCode() {
    return uid.hashCode() ^ (output ? 1 : 0);
  }

  @Override
  public String toString() {
    return (output ? "Output" : "Input") + "('" + name + "', " + uid + ", " + shape
        + (hasSequenceAxis() ? ", sequence" : "") + ")";
  }
}
