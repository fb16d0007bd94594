package com.microsoft.CNTK;

import java.lang.reflect.Array;

/**
 * The storage of CNTK's vectors of numbers (FloatVector, DoubleVector, SizeTVector): a
 * growable primitive array, so that data go to the native library without boxing. The methods
 * are those of CNTK's Java vectors (std::vector wrapped by SWIG).
 */
abstract class PrimitiveVector {
  protected Object items;
  private int size;

  PrimitiveVector(Class<?> type, long n) {
    if (n < 0) throw new IllegalArgumentException("a vector of " + n + " elements");
    items = Array.newInstance(type, Math.max(16, (int) n));
    size = (int) n;
  }

  /** A vector over an array of its own (not copied): its first n elements. */
  PrimitiveVector(int n, Object array) {
    items = array;
    size = n;
  }

  public long size() {
    return size;
  }

  public long capacity() {
    return Array.getLength(items);
  }

  public void reserve(long n) {
    if (n > capacity()) resize((int) n);
  }

  public boolean isEmpty() {
    return size == 0;
  }

  public void clear() {
    size = 0;
  }

  /** The index a new element goes to (growing the storage when full). */
  protected int append() {
    if (size == capacity()) resize(Math.max(16, 2 * size));
    return size++;
  }

  protected int index(int i) {
    if (i < 0 || i >= size)
      throw new IndexOutOfBoundsException(
          "index " + i + " of a " + getClass().getSimpleName() + " of " + size + " elements");
    return i;
  }

  /** The storage: the elements are its first size() entries (for a native call to read). */
  Object storage() {
    return items;
  }

  /** The elements, as a primitive array of their own. */
  protected Object copy() {
    Object out = Array.newInstance(items.getClass().getComponentType(), size);
    System.arraycopy(items, 0, out, 0, size);
    return out;
  }

  private void resize(int capacity) {
    Object bigger = Array.newInstance(items.getClass().getComponentType(), capacity);
    System.arraycopy(items, 0, bigger, 0, size);
    items = bigger;
  }
}
