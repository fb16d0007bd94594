package com.microsoft.CNTK;

import java.util.ArrayList;

/** The vectors of vectors of CNTK's Java API (FloatVectorVector and the like). */
abstract class ObjectVector<T> {
  private final ArrayList<T> items = new ArrayList<>();

  public long size() {
    return items.size();
  }

  public boolean isEmpty() {
    return items.isEmpty();
  }

  public void clear() {
    items.clear();
  }

  public void add(T x) {
    items.add(x);
  }

  public T get(int i) {
    return items.get(i);
  }

  public void set(int i, T value) {
    items.set(i, value);
  }
}
