// What the Java client adds to an evaluation: a model's single argument fed a batch of 1 and
// of 64 random samples, each call either what a CNTK Java program does (Value.createBatchFloat
// from a FloatVector, evaluate, copyVariableValueToFloat, close) or the same through the bare
// JNI methods (one C API call each, as bench_c_api_eval calls them from C: its cost over Loom's
// C++ ModelRunner is that bench's figure). The class sits in the client's package to reach
// those methods. The two alternate in rounds, so the machine's drift falls on both alike;
// prints the median microseconds per call and the ratio. --cpu-time measures the CPU time of
// the thread that calls (to the nanosecond; the process's is counted in 10 ms ticks, and would
// add the JIT compiler's threads), as bench_c_api_eval --cpu-time measures its one thread's:
// fair on a loaded machine with OMP_NUM_THREADS=1.
//
//   java -Djava.library.path=DIR -cp cntk.jar:cntk_java_bench.jar com.microsoft.CNTK.EvalBench
//        MODEL [--calls N] [--rounds N] [--cpu-time]
package com.microsoft.CNTK;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

public class EvalBench {
  public static void main(String[] args) {
    int calls = 0, rounds = 9;
    boolean usage = args.length == 0;
    for (int i = 1; i < args.length && !usage; ++i) {
      if (args[i].equals("--cpu-time")) cpuTime = true;
      else if (args[i].equals("--calls") && i + 1 < args.length) calls = Integer.parseInt(args[++i]);
      else if (args[i].equals("--rounds") && i + 1 < args.length) rounds = Integer.parseInt(args[++i]);
      else usage = true;
    }
    if (usage) {
      System.err.println("usage: EvalBench MODEL [--calls N] [--rounds N] [--cpu-time]");
      System.exit(2);
    }
    DeviceDescriptor device = DeviceDescriptor.getCPUDevice();
    try (Function model = Function.load(args[0], device)) {
      // A clone of the client's handle: the same runner and executors, so that the two paths
      // differ by their calls only (two loaded copies of a model place their buffers and oneDNN
      // kernels apart, which moves the times by more than the calls cost).
      long bareModel = Native.cloneModel(model.address());
      try {
        Variable input = model.getArguments().get(0), output = model.getOutputs().get(0);
        if (input.hasSequenceAxis())
          throw new IllegalArgumentException("the bench feeds a batch of samples: " + input + " takes sequences");
        System.out.printf("Java: %s, %d rounds, median %s us per call%n", args[0], rounds,
            cpuTime ? "CPU" : "wall");
        for (int batch : new int[] {1, 64}) {
          Random random = new Random(7);
          FloatVector data = new FloatVector();
          for (long i = 0; i < batch * input.getShape().getTotalSize(); ++i) data.add(random.nextFloat());
          Runnable client = () -> {
            try (Value value = Value.createBatchFloat(input.getShape(), data, device)) {
              UnorderedMapVariableValuePtr inputs = new UnorderedMapVariableValuePtr(),
                                           outputs = new UnorderedMapVariableValuePtr();
              inputs.add(input, value);
              outputs.add(output, null);
              model.evaluate(inputs, outputs, device);
              try (Value result = outputs.getitem(output)) {
                result.copyVariableValueToFloat(output, new FloatVectorVector());
              }
            }
          };
          float[] raw = data.toArray();
          long[] shape = input.getShape().toLoom(), first = {0};
          long[] values = new long[1];
          Runnable bare = () -> {
            values[0] = Native.createDenseFloat(shape, batch, null, raw, raw.length);
            long result = Native.evaluate(bareModel, first, values, first, false)[0];
            Native.valueFloats(result);
            Native.freeValue(result);
            Native.freeValue(values[0]);
          };
          // The JVM compiles a path fully after some 10,000 calls: both paths run 20,000 calls
          // (at least 2 s, at most 15 s: at batch 64 a call takes milliseconds) before the
          // rounds are timed.
          for (Runnable path : new Runnable[] {client, bare}) {
            long start = System.nanoTime();
            for (int i = 0; (i < 20000 && System.nanoTime() - start < 15_000_000_000L)
                            || System.nanoTime() - start < 2_000_000_000L;
                 ++i)
              path.run();
          }
          // About 0.2 s of calls a round unless --calls says.
          int n = calls > 0 ? calls : Math.max(1, (int) (2e5 / microsPerCall(5, client)));
          List<Double> clientUs = new ArrayList<>(), bareUs = new ArrayList<>();
          for (int r = 0; r < rounds; ++r) {
            clientUs.add(microsPerCall(n, client));
            bareUs.add(microsPerCall(n, bare));
          }
          double a = median(clientUs), b = median(bareUs);
          System.out.printf("batch %3d: Java client %9.1f us  C API %9.1f us  ratio client/C API %.3f%n",
              batch, a, b, a / b);
        }
      } finally {
        Native.freeModel(bareModel);
      }
    }
  }

  static double median(List<Double> values) {
    Collections.sort(values);
    return values.get(values.size() / 2);
  }

  static boolean cpuTime;

  static final java.lang.management.ThreadMXBean THREADS =
      java.lang.management.ManagementFactory.getThreadMXBean();

  static double nowMicros() {
    return (cpuTime ? THREADS.getCurrentThreadCpuTime() : System.nanoTime()) / 1e3;
  }

  static double microsPerCall(int calls, Runnable call) {
    double start = nowMicros();
    for (int i = 0; i < calls; ++i) call.run();
    return (nowMicros() - start) / calls;
  }
}
