package com.microsoft.CNTK;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * CNTK's map from variables to values (std::unordered_map<Variable, ValuePtr>), with its
 * methods: evaluate reads the inputs from one and fills the null values of another.
 */
public class UnorderedMapVariableValuePtr {
  private final LinkedHashMap<Variable, Value> map = new LinkedHashMap<>();

  public long size() {
    return map.size();
  }

  public boolean empty() {
    return map.isEmpty();
  }

  public void clear() {
    map.clear();
  }

  /** The value of a variable the map holds; an exception for one it does not. */
  public Value getitem(Variable key) {
    if (!map.containsKey(key)) throw new IndexOutOfBoundsException("key not found: " + key);
    return map.get(key);
  }

  public void setitem(Variable key, Value value) {
    map.put(key, value);
  }

  public boolean containsKey(Variable key) {
    return map.containsKey(key);
  }

  /** Adds a variable the map does not hold yet (null: evaluate makes its value). */
  public void add(Variable key, Value value) {
    if (map.containsKey(key)) throw new IndexOutOfBoundsException("key already exists: " + key);
    map.put(key, value);
  }

  public boolean remove(Variable key) {
    boolean had = map.containsKey(key);
    map.remove(key);
    return had;
  }

  /** The entries, in the order they were added (for evaluate: one look-up less each). */
  Set<Map.Entry<Variable, Value>> entries() {
    return map.entrySet();
  }

  /** The variables, in the order they were added. */
  public Set<Variable> keySet() {
    return map.keySet();
  }
}
