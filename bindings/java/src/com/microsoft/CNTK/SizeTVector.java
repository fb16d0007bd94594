package com.microsoft.CNTK;

/** CNTK's SizeTVector (std::vector<size_t>). */
public class SizeTVector extends PrimitiveVector {
  public SizeTVector() {
    super(long.class, 0);
  }

  public SizeTVector(long n) {
    super(long.class, n);
  }

  public void add(long x) {
    int i = append(); // first: it may replace the array
    ((long[]) items)[i] = x;
  }

  public long get(int i) {
    return ((long[]) items)[index(i)];
  }

  public void set(int i, long value) {
    ((long[]) items)[index(i)] = value;
  }

  long[] toArray() {
    return (long[]) copy();
  }
}
