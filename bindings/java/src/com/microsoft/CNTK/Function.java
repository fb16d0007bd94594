package com.microsoft.CNTK;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * CNTK's Function, for evaluation: a loaded model (one loom_model handle) with its arguments
 * and outputs. close() (or CNTK's delete()) frees the handle; a Function never closed is freed
 * once unreachable.
 */
public final class Function implements AutoCloseable {
  private final NativeHandle model;
  private final List<Variable> arguments, outputs;
  private List<Variable> nodes; // the outputs of every function of the graph, read when needed
  // The outputs this Function stands for: all of the model's, or the one findByName chose.
  private final List<Variable> ownOutputs;

  private Function(long address, List<Variable> outputSubset) {
    model = new NativeHandle(this, address, true);
    arguments = readVariables(address, Native.KIND_ARGUMENT);
    outputs = readVariables(address, Native.KIND_OUTPUT);
    ownOutputs = outputSubset != null ? outputSubset : outputs;
  }

  public static Function load(String filepath, DeviceDescriptor computeDevice) {
    return new Function(Native.loadModel(Native.utf8(filepath)), null);
  }

  public static Function load(byte[] modelBuffer, DeviceDescriptor computeDevice) {
    java.util.Objects.requireNonNull(modelBuffer, "Function.load: modelBuffer");
    return new Function(Native.loadModelFromBytes(modelBuffer), null);
  }

  /** The inputs the model takes, in the model's order. */
  public List<Variable> getArguments() {
    return arguments;
  }

  /**
   * CNTK's getInputs() also lists parameters and constants; a loaded model here exposes only
   * the inputs the caller feeds.
   */
  public List<Variable> getInputs() {
    return arguments;
  }

  public List<Variable> getOutputs() {
    return ownOutputs;
  }

  public Variable getOutput() {
    if (ownOutputs.size() != 1)
      throw new IllegalStateException("Function.getOutput: the function has " + ownOutputs.size()
          + " outputs (" + ownOutputs + "); use getOutputs()");
    return ownOutputs.get(0);
  }

  /**
   * Another Function over the same model for another thread: the clone shares the parameters
   * (see ParameterCloningMethod), its variables equal this one's.
   */
  public Function clone(ParameterCloningMethod parameterCloneMethod) {
    return new Function(Native.cloneModel(model.get()), ownOutputs);
  }

  @Override
  public Function clone() {
    return clone(ParameterCloningMethod.Share);
  }

  /**
   * The function of that name in the model's graph (a model output, else an inner function's
   * output, CNTK's intermediate layer) as a Function whose output it is, or null when no
   * function has it.
   */
  public Function findByName(String name) {
    List<Variable> found = named(outputs, name);
    if (found.isEmpty()) found = named(nodes(), name);
    if (found.isEmpty()) return null;
    if (found.size() > 1)
      throw new IllegalArgumentException("Function.findByName('" + name + "'): " + found.size()
          + " functions have that name; use their uid");
    return new Function(Native.cloneModel(model.get()), Collections.unmodifiableList(found));
  }

  /**
   * Computes the outputs that `outputs` names from the arguments' values in `inputs`. An output
   * whose value is null gets a new Value; one that has a Value gets the result in place of its
   * data (its shape must match).
   */
  public void evaluate(UnorderedMapVariableValuePtr inputs, UnorderedMapVariableValuePtr outputs,
      DeviceDescriptor computeDevice) {
    long self = model.get();
    long[] inputIndices = new long[(int) inputs.size()], inputValues = new long[inputIndices.length];
    int n = 0;
    for (Map.Entry<Variable, Value> entry : inputs.entries()) {
      Variable argument = find(arguments, entry.getKey(), "argument");
      Value value = entry.getValue();
      if (value == null)
        throw new IllegalArgumentException("Function.evaluate: the input value of " + entry.getKey() + " is null");
      inputIndices[n] = argument.index;
      inputValues[n++] = value.address();
    }
    // The model's outputs by index; with an inner function's output among them, all by node
    // index.
    boolean byNode = false;
    for (Variable v : outputs.keySet()) byNode |= v != null && v.node && !this.outputs.contains(v);
    long[] outputIndices = new long[(int) outputs.size()];
    n = 0;
    for (Variable v : outputs.keySet())
      outputIndices[n++] = find(byNode ? nodes() : this.outputs, v, "output").index;
    long[] results = Native.evaluate(self, inputIndices, inputValues, outputIndices, byNode);
    Value[] made = new Value[results.length];
    for (int i = 0; i < results.length; ++i) made[i] = new Value(results[i]);
    n = 0;
    for (Map.Entry<Variable, Value> entry : outputs.entries()) {
      Value given = entry.getValue();
      if (given == null) entry.setValue(made[n++]);
      else given.takeDataOf(made[n++], entry.getKey());
    }
  }

  @Override
  public void close() {
    model.close();
  }

  /** CNTK's name for close(). */
  public void delete() {
    close();
  }

  /** The loom_model handle (for the bench, which calls the C API beside this Function). */
  long address() {
    return model.get();
  }

  private List<Variable> nodes() {
    if (nodes == null) nodes = readVariables(model.get(), Native.KIND_NODE);
    return nodes;
  }

  private static List<Variable> named(List<Variable> list, String name) {
    List<Variable> found = new ArrayList<>();
    for (Variable v : list)
      if (v.getName().equals(name)) found.add(v);
    return found;
  }

  private static Variable find(List<Variable> list, Variable v, String what) {
    if (v == null) throw new IllegalArgumentException("Function.evaluate: a null " + what);
    if (v.index < list.size() && list.get(v.index).equals(v)) return list.get(v.index);
    for (Variable same : list) // e.g. a node that is a model output
      if (same.equals(v)) return same;
    throw new IllegalArgumentException("Function.evaluate: " + v + " is not an " + what
        + " of this model; its " + what + "s: " + list);
  }

  private static List<Variable> readVariables(long model, int kind) {
    Variable[] list = new Variable[Native.variableCount(model, kind)];
    for (int i = 0; i < list.length; ++i)
      list[i] = new Variable(kind != Native.KIND_ARGUMENT, i, kind == Native.KIND_NODE,
          Native.string(Native.variableName(model, kind, i)),
          Native.string(Native.variableUid(model, kind, i)),
          NDShape.fromLoom(Native.variableShape(model, kind, i)),
          DataType.of(Native.variableDataType(model, kind, i)), Native.variableFlags(model, kind, i));
    return Collections.unmodifiableList(Arrays.asList(list));
  }
}
