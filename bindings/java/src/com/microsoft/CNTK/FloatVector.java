package com.microsoft.CNTK;

/** CNTK's FloatVector (std::vector<float>). */
public class FloatVector extends PrimitiveVector {
  public FloatVector() {
    super(float.class, 0);
  }

  public FloatVector(long n) {
    super(float.class, n);
  }

  /** A vector over data (not copied). */
  FloatVector(float[] data, int n) {
    super(n, data);
  }

  public void add(float x) {
    int i = append(); // first: it may replace the array
    ((float[]) items)[i] = x;
  }

  public float get(int i) {
    return ((float[]) items)[index(i)];
  }

  public void set(int i, float value) {
    ((float[]) items)[index(i)] = value;
  }

  float[] storageFloats() {
    return (float[]) storage();
  }

  float[] toArray() {
    return (float[]) copy();
  }
}
