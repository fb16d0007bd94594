// CNTK's Java evaluation test (Tests/EndToEndTests/EvalClientTests/JavaEvalTest) and its C#
// examples' cases (a batch, sequences, one-hot sequences, clones evaluated in parallel) on model
// files CNTK wrote, written as a CNTK user would. Each result is checked bitwise against
// `loom eval` (Loom's C++ ModelRunner) on the same inputs, and bad inputs must give an
// exception with a message.
//
//   java -Djava.library.path=DIR -cp cntk.jar:cntk_java_test.jar Main LOOM MODELS WORK
//   (OMP_NUM_THREADS=1: bitwise results)

import com.microsoft.CNTK.*;
import java.io.DataOutputStream;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

public class Main {
  private static String loom, models, work;
  private static int failures;
  private static final DeviceDescriptor device = DeviceDescriptor.getCPUDevice();

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.out.println("usage: Main LOOM_COMMAND MODELS_DIR WORK_DIR");
      System.exit(2);
    }
    loom = args[0];
    models = args[1];
    work = args[2];
    if (!new File(models).isDirectory()) {
      System.out.println("SKIPPED: no CNTK model files in " + models);
      System.exit(77);
    }
    new File(work).mkdirs();
    evaluateBatchAndSequences();
    evaluateMnistInParallel();
    evaluateAtisOneHotSequences();
    badInputs();
    System.out.println(failures == 0 ? "PASSED" : "FAILED: " + failures + " check(s)");
    System.exit(failures == 0 ? 0 : 1);
  }

  /** A tiny CNTK v2 model (|x|) on a batch, one sequence and a batch of sequences. */
  static void evaluateBatchAndSequences() throws Exception {
    System.out.println("===== v2_load_and_eval.dnn: batch and sequences =====");
    String path = new File(models, "v2_load_and_eval.dnn").getAbsolutePath();
    try (Function modelFunc = Function.load(path, device)) {
      Variable inputVar = modelFunc.getArguments().get(0);
      Variable outputVar = modelFunc.getOutput();
      System.out.println("input " + inputVar + ", output " + outputVar);
      int sampleSize = (int) inputVar.getShape().getTotalSize();
      float[] data = samples(5 * sampleSize, -1);

      Value batch = Value.createBatchFloat(inputVar.getShape(), vector(data, 0, data.length), device);
      expect(Arrays.equals(batch.getShape().getDimensions(), new long[] {2, 1, 1, 5}),
          "the batch's shape is " + batch.getShape());
      float[] expected = loomEval(path, outputVar, "abs", idx(inputVar, data));
      sameBits("batch of 5", evaluate(modelFunc, inputVar, batch, outputVar), expected);

      // |x| works step by step: sequences of the same steps give the same values.
      Value sequence = Value.createSequenceFloat(inputVar.getShape(), vector(data, 0, data.length), device);
      sameBits("one sequence of 5", evaluate(modelFunc, inputVar, sequence, outputVar), expected);
      FloatVectorVector sequences = new FloatVectorVector();
      sequences.add(vector(data, 0, 3 * sampleSize));
      sequences.add(vector(data, 3 * sampleSize, data.length));
      Value batchOfSequences = Value.createDenseFloat(inputVar.getShape(), sequences, device);
      FloatVectorVector got = evaluate(modelFunc, inputVar, batchOfSequences, outputVar);
      expect(got.size() == 2 && got.get(0).size() == 3 * sampleSize && got.get(1).size() == 2 * sampleSize,
          "sequences of 3 and 2 steps come back as " + got.size() + " sequences");
      sameBits("sequences of 3 and 2", got, expected);
    }
  }

  /**
   * CNTK's v1 MNIST classifier: a batch of images through the output "ol.z", from three clones
   * at once (CNTK's EvaluateMultipleImagesInParallel), and into a Value the caller made.
   */
  static void evaluateMnistInParallel() throws Exception {
    System.out.println("===== v1_01_OneHidden.dnn: batch, clones in parallel =====");
    String path = new File(models, "v1_01_OneHidden.dnn").getAbsolutePath();
    try (Function modelFunc = Function.load(path, device)) {
      Variable features = argument(modelFunc, "features"), labels = argument(modelFunc, "labels");
      Function scores = modelFunc.findByName("ol.z");
      Variable outputVar = scores.getOutput();
      expect(outputVar.getShape().getTotalSize() == 10, "ol.z has " + outputVar.getShape() + " values");
      final int images = 4;
      float[] pixels = samples(images * (int) features.getShape().getTotalSize(), 0);
      float[] oneHot = new float[images * 10];
      for (int i = 0; i < images; ++i) oneHot[i * 10 + i] = 1; // loom eval reads every argument
      float[] expected = loomEval(path, outputVar, "mnist", idx(features, pixels), idx(labels, oneHot));
      Value inputVal = Value.createBatchFloat(features.getShape(), vector(pixels, 0, pixels.length), device);
      sameBits("batch of 4 images", evaluate(scores, features, inputVal, outputVar), expected);
      // The scores read as doubles (the C API converts), and a vector read back grows as any.
      UnorderedMapVariableValuePtr in = new UnorderedMapVariableValuePtr(), out = new UnorderedMapVariableValuePtr();
      in.add(features, inputVal);
      out.add(outputVar, null);
      scores.evaluate(in, out, device);
      DoubleVectorVector asDoubles = new DoubleVectorVector();
      out.getitem(outputVar).copyVariableValueToDouble(outputVar, asDoubles);
      boolean same = asDoubles.size() == images;
      for (int i = 0; same && i < images; ++i) {
        same = asDoubles.get(i).size() == 10;
        for (int j = 0; same && j < 10; ++j) same = asDoubles.get(i).get(j) == (double) expected[i * 10 + j];
      }
      expect(same, "the scores read as doubles: " + images + " images of 10, equal to the floats");
      DoubleVector first = asDoubles.get(0);
      first.add(7.0);
      expect(first.size() == 11 && first.get(10) == 7.0 && first.get(0) == (double) expected[0],
          "a vector read back takes another element");
      // Doubles in: a batch of double samples reads back as it was made.
      DoubleVector doubles = new DoubleVector();
      for (float p : pixels) doubles.add(p);
      try (Value batch64 = Value.createBatchDouble(features.getShape(), doubles, device)) {
        DoubleVectorVector back = new DoubleVectorVector();
        batch64.copyVariableValueToDouble(features, back);
        boolean equal = batch64.getDataType() == DataType.Double && back.size() == images;
        for (int i = 0; equal && i < pixels.length; ++i)
          equal = back.get(i / 784).get(i % 784) == (double) pixels[i];
        expect(equal, "a batch of doubles reads back as it was made");
      }

      List<Function> clones = Arrays.asList(scores, scores.clone(ParameterCloningMethod.Share),
          scores.clone(ParameterCloningMethod.Share));
      ExecutorService pool = Executors.newFixedThreadPool(clones.size());
      List<Future<FloatVectorVector>> results = new ArrayList<>();
      for (Function clone : clones)
        results.add(pool.submit(() -> {
          Value input = Value.createBatchFloat(features.getShape(), vector(pixels, 0, pixels.length), device);
          return evaluate(clone, argument(clone, "features"), input, clone.getOutput());
        }));
      for (int i = 0; i < results.size(); ++i)
        sameBits("clone " + i + " in parallel", results.get(i).get(), expected);
      pool.shutdown();

      // CNTK's alternative to null: a Value the caller made, which receives the output.
      Value given = Value.createBatchFloat(outputVar.getShape(), new FloatVector(images * 10), device);
      UnorderedMapVariableValuePtr inputs = new UnorderedMapVariableValuePtr(),
                                   outputs = new UnorderedMapVariableValuePtr();
      inputs.add(features, inputVal);
      outputs.add(outputVar, given);
      scores.evaluate(inputs, outputs, device);
      expect(outputs.getitem(outputVar) == given, "evaluate kept the caller's output Value");
      FloatVectorVector into = new FloatVectorVector();
      given.copyVariableValueToFloat(outputVar, into);
      sameBits("into the caller's Value", into, expected);
      for (Function clone : clones) clone.close();

      // An intermediate layer (CNTK's EvaluateIntermediateLayer): the hidden layer's function
      // found by name, evaluated with the scores in one call.
      Function hiddenFunc = modelFunc.findByName("h1.z");
      Variable hidden = hiddenFunc.getOutput();
      expect(hidden.getShape().getTotalSize() == 200, "h1.z has " + hidden.getShape() + " values");
      UnorderedMapVariableValuePtr both = new UnorderedMapVariableValuePtr();
      both.add(hidden, null);
      both.add(outputVar, null);
      modelFunc.evaluate(inputs, both, device);
      FloatVectorVector scoresBeside = new FloatVectorVector(), h1 = new FloatVectorVector();
      both.getitem(outputVar).copyVariableValueToFloat(outputVar, scoresBeside);
      sameBits("ol.z beside h1.z", scoresBeside, expected);
      both.getitem(hidden).copyVariableValueToFloat(hidden, h1);
      expect(h1.size() == images && h1.get(0).size() == 200, "h1.z: " + images + " images of 200 values");
      float[] hiddenValues = new float[images * 200];
      for (int i = 0; i < images; ++i)
        for (int k = 0; k < 200; ++k) hiddenValues[i * 200 + k] = h1.get(i).get(k);
      sameBits("h1.z alone", evaluate(hiddenFunc, features, inputVal, hidden), hiddenValues);
      expect(modelFunc.findByName("no such layer") == null, "findByName of an unknown name is null");
      hiddenFunc.close();
    }
  }

  /**
   * CNTK's ATIS slot tagger: sequences of word indices as one-hot vectors
   * (EvaluationBatchOfSequencesUsingOneHot), printed as slot labels.
   */
  static void evaluateAtisOneHotSequences() throws Exception {
    System.out.println("===== v2_atis_slot_tagger.cmf: one-hot sequences =====");
    String path = new File(models, "v2_atis_slot_tagger.cmf").getAbsolutePath();
    List<String> vocabulary = Files.readAllLines(Paths.get(models, "atis_query.wl"));
    List<String> slots = Files.readAllLines(Paths.get(models, "atis_slots.wl"));
    String[][] queries = {
        "BOS i would like to find a flight from charlotte to las vegas that makes a stop in st. louis EOS".split(" "),
        "BOS flights from boston to denver EOS".split(" "),
    };
    try (Function modelFunc = Function.load(path, device)) {
      Variable inputVar = modelFunc.getArguments().get(0);
      Variable outputVar = modelFunc.getOutput();
      long vocabSize = inputVar.getShape().getTotalSize();
      expect(inputVar.isSparse() && vocabSize == vocabulary.size(),
          "input " + inputVar + " for " + vocabulary.size() + " words");
      SizeTVectorVector words = new SizeTVectorVector();
      List<String> lines = new ArrayList<>();
      for (int s = 0; s < queries.length; ++s) {
        SizeTVector sequence = new SizeTVector();
        for (String word : queries[s]) {
          sequence.add(vocabulary.indexOf(word));
          lines.add(s + " |" + inputVar.getName() + " " + vocabulary.indexOf(word) + ":1");
        }
        words.add(sequence);
      }
      Value inputValue = Value.createOneHotFloat(vocabSize, words, device);
      String ctf = new File(work, "atis.ctf").getPath();
      Files.write(Paths.get(ctf), lines);
      FloatVectorVector outputData = evaluate(modelFunc, inputVar, inputValue, outputVar);
      sameBits("two queries", outputData, loomEval(path, outputVar, "atis", new String[] {"--data", ctf}));
      int labels = (int) outputVar.getShape().getTotalSize();
      for (int s = 0; s < outputData.size(); ++s) {
        StringBuilder tagged = new StringBuilder(" ");
        for (int t = 0; t < queries[s].length; ++t) {
          int best = 0;
          for (int k = 1; k < labels; ++k)
            if (outputData.get(s).get(t * labels + k) > outputData.get(s).get(t * labels + best)) best = k;
          tagged.append(" ").append(queries[s][t]).append("/").append(slots.get(best));
        }
        System.out.println(tagged);
      }
    }
  }

  static void badInputs() throws Exception {
    System.out.println("===== bad inputs =====");
    String missing = new File(work, "no_such_model.dnn").getPath();
    expectThrows(UncheckedIOException.class, "missing file", () -> Function.load(missing, device),
        "no_such_model.dnn");
    File damaged = new File(work, "damaged.dnn");
    byte[] garbage = new byte[64];
    for (int i = 0; i < garbage.length; ++i) garbage[i] = (byte) (i * 37);
    Files.write(damaged.toPath(), garbage);
    expectThrows(RuntimeException.class, "damaged file", () -> Function.load(damaged.getPath(), device),
        "damaged.dnn");

    Function modelFunc = Function.load(new File(models, "v1_01_OneHidden.dnn").getPath(), device);
    Variable features = argument(modelFunc, "features");
    Variable scores = modelFunc.findByName("ol.z").getOutput();
    expectThrows(IllegalArgumentException.class, "values not a whole number of samples",
        () -> Value.createBatchFloat(features.getShape(), new FloatVector(100), device), "784");
    Value wrongShape = Value.createBatchFloat(new NDShape(1, 10), new FloatVector(20), device);
    expectThrows(IllegalArgumentException.class, "wrong input size",
        () -> evaluate(modelFunc, features, wrongShape, scores), "784");
    try (Function other = Function.load(new File(models, "v2_load_and_eval.dnn").getPath(), device)) {
      expectThrows(IllegalArgumentException.class, "another model's variable",
          () -> evaluate(modelFunc, other.getArguments().get(0), wrongShape, scores), "features");
    }
    expectThrows(UnsupportedOperationException.class, "a continued sequence",
        () -> Value.createSequenceFloat(features.getShape(), new FloatVector(784), false, device), "whole");

    Value input = Value.createBatchFloat(features.getShape(), new FloatVector(784), device);
    input.close();
    expectThrows(IllegalStateException.class, "deleted Value in evaluate",
        () -> evaluate(modelFunc, features, input, scores), "deleted");
    expectThrows(IllegalStateException.class, "deleted Value read",
        () -> input.copyVariableValueToFloat(features, new FloatVectorVector()), "deleted");
    modelFunc.close();
    modelFunc.delete(); // a second close does nothing
    expectThrows(IllegalStateException.class, "deleted Function",
        () -> evaluate(modelFunc, features, wrongShape, scores), "deleted");
    expectThrows(IllegalStateException.class, "deleted Function cloned", () -> modelFunc.clone(), "deleted");
  }

  // ---- Helpers ---------------------------------------------------------------------------

  static FloatVectorVector evaluate(Function f, Variable input, Value value, Variable output) {
    UnorderedMapVariableValuePtr inputs = new UnorderedMapVariableValuePtr(),
                                 outputs = new UnorderedMapVariableValuePtr();
    inputs.add(input, value);
    outputs.add(output, null);
    f.evaluate(inputs, outputs, device);
    FloatVectorVector result = new FloatVectorVector();
    outputs.getitem(output).copyVariableValueToFloat(output, result);
    return result;
  }

  static Variable argument(Function f, String name) {
    for (Variable a : f.getArguments())
      if (a.getName().equals(name)) return a;
    throw new IllegalArgumentException("no argument " + name);
  }

  /** Deterministic inputs in [offset, offset + 2), different from sample to sample. */
  static float[] samples(int count, int offset) {
    float[] x = new float[count];
    for (int i = 0; i < count; ++i) x[i] = (float) ((i * 7919 % 1000) / 500.0 + offset);
    return x;
  }

  static FloatVector vector(float[] data, int begin, int end) {
    FloatVector v = new FloatVector();
    for (int i = begin; i < end; ++i) v.add(data[i]);
    return v;
  }

  /**
   * A batch for an argument as an IDX file (float32, big-endian, the shape in Loom's order
   * after the sample count) and the `loom eval` options that read it.
   */
  static String[] idx(Variable argument, float[] data) throws IOException {
    File file = new File(work, argument.getName() + ".idx");
    long[] dims = argument.getShape().getDimensions();
    try (DataOutputStream out = new DataOutputStream(new FileOutputStream(file))) {
      out.write(new byte[] {0, 0, 0x0D, (byte) (dims.length + 1)});
      out.writeInt(data.length / (int) argument.getShape().getTotalSize());
      for (int i = dims.length - 1; i >= 0; --i) out.writeInt((int) dims[i]);
      for (float x : data) out.writeFloat(x);
    }
    return new String[] {"--data", argument.getName() + "=" + file.getPath()};
  }

  /** `loom eval` (in one minibatch) on the data the options give: the output's values. */
  static float[] loomEval(String model, Variable output, String name, String[]... data) throws Exception {
    File result = new File(work, name + "_out.ctf");
    List<String> command = new ArrayList<>(Arrays.asList(loom, "eval", model, "--output",
        result.getPath(), "--minibatch-size", "100000"));
    for (String[] d : data) command.addAll(Arrays.asList(d));
    Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
    String printed = new String(p.getInputStream().readAllBytes());
    if (p.waitFor() != 0) throw new RuntimeException("loom eval failed: " + printed);
    String label = output.getName().isEmpty() ? output.getUid() : output.getName();
    List<Float> values = new ArrayList<>();
    for (String line : Files.readAllLines(result.toPath())) {
      String[] fields = line.split("\\|");
      for (int f = 1; f < fields.length; ++f) {
        String[] tokens = fields[f].trim().split(" +");
        if (tokens[0].equals(label))
          for (int t = 1; t < tokens.length; ++t) values.add(Float.parseFloat(tokens[t]));
      }
    }
    float[] out = new float[values.size()];
    for (int i = 0; i < out.length; ++i) out[i] = values.get(i);
    return out;
  }

  static void sameBits(String what, FloatVectorVector got, float[] expected) {
    List<Float> flat = new ArrayList<>();
    for (int s = 0; s < got.size(); ++s)
      for (int i = 0; i < got.get(s).size(); ++i) flat.add(got.get(s).get(i));
    int bad = -1;
    for (int i = 0; i < Math.min(flat.size(), expected.length) && bad < 0; ++i)
      if (Float.floatToRawIntBits(flat.get(i)) != Float.floatToRawIntBits(expected[i])) bad = i;
    boolean same = flat.size() == expected.length && expected.length > 0 && bad < 0;
    expect(same, what + ": " + flat.size() + " values"
        + (same ? ", bitwise equal to loom eval's"
           : bad >= 0 ? ": value " + bad + " is " + flat.get(bad) + ", loom eval gives " + expected[bad]
                      : ", loom eval gives " + expected.length));
  }

  interface Action {
    void run() throws Exception;
  }

  static void expectThrows(Class<? extends Exception> type, String what, Action action, String inMessage) {
    try {
      action.run();
      expect(false, what + ": no exception");
    } catch (Exception e) {
      String message = String.valueOf(e.getMessage());
      expect(type.isInstance(e) && message.contains(inMessage),
          what + ": " + e.getClass().getSimpleName() + ": " + message
              + (type.isInstance(e) ? "" : " (expected " + type.getSimpleName() + ")")
              + (message.contains(inMessage) ? "" : " (the message should name '" + inMessage + "')"));
    }
  }

  static void expect(boolean condition, String message) {
    System.out.println((condition ? "  ok: " : "  FAILED: ") + message);
    if (!condition) ++failures;
  }
}
