package com.microsoft.CNTK;

/** CNTK's DoubleVector (std::vector<double>). */
public class DoubleVector extends PrimitiveVector {
  public DoubleVector() {
    super(double.class, 0);
  }

  public DoubleVector(long n) {
    super(double.class, n);
  }

  /** A vector over data (not copied). */
  DoubleVector(double[] data, int n) {
    super(n, data);
  }

  public void add(double x) {
    int i = append(); // first: it may replace the array
    ((double[]) items)[i] = x;
  }

  public double get(int i) {
    return ((double[]) items)[index(i)];
  }

  public void set(int i, double value) {
    ((double[]) items)[index(i)] = value;
  }

  double[] storageDoubles() {
    return (double[]) storage();
  }

  double[] toArray() {
    return (double[]) copy();
  }
}
