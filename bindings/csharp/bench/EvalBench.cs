// What the C# client adds to an evaluation: a model's single argument fed a batch of 1 and of
// 64 random samples, each call either what a CNTK C# program does (Value.CreateBatch from its
// own data, Evaluate, GetDenseData, Dispose) or the same through the bare C API (P/Invoke of
// loom_c.h, as bench_c_api_eval calls it from C: its cost over Loom's C++ ModelRunner is that
// bench's figure). The two alternate in rounds, so the machine's drift falls on both alike;
// prints the median microseconds per call and the ratio. --cpu-time measures the process's CPU
// time (clock_gettime's CLOCK_PROCESS_CPUTIME_ID, to the nanosecond; as bench_c_api_eval
// --cpu-time does: fair on a loaded machine with OMP_NUM_THREADS=1).
//
//   mono EvalBench.exe MODEL [--calls N] [--rounds N] [--cpu-time]
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Runtime.InteropServices;
using CNTK;

static unsafe class EvalBench
{
    static int Main(string[] args)
    {
        int calls = 0, rounds = 9;
        bool usage = args.Length == 0;
        for (int i = 1; i < args.Length && !usage; ++i)
        {
            if (args[i] == "--cpu-time") cpuTime = true;
            else if (args[i] == "--calls" && i + 1 < args.Length) calls = int.Parse(args[++i]);
            else if (args[i] == "--rounds" && i + 1 < args.Length) rounds = int.Parse(args[++i]);
            else usage = true;
        }
        if (usage)
        {
            Console.Error.WriteLine("usage: EvalBench.exe MODEL [--calls N] [--rounds N] [--cpu-time]");
            return 2;
        }
        DeviceDescriptor device = DeviceDescriptor.CPUDevice;
        using (Function model = Function.Load(args[0], device))
        {
            Variable input = model.Arguments.Single(), output = model.Outputs[0];
            // A clone of the client's handle: the same runner and executors, so that the two
            // paths differ by their calls only (two loaded copies of a model place their buffers
            // and oneDNN kernels apart, which moves the times by more than the calls cost).
            Check(loom_model_clone(model.Address, out bareModel));
            Console.WriteLine("C#: {0}, {1} rounds, median {2} us per call", args[0], rounds, cpuTime ? "CPU" : "wall");
            if (input.HasSequenceAxis) throw new ArgumentException("the bench feeds a batch of samples: " + input + " takes sequences");
            foreach (int batch in new[] { 1, 64 })
            {
                var random = new Random(7);
                float[] data = Enumerable.Range(0, batch * input.Shape.TotalSize).Select(i => (float)random.NextDouble()).ToArray();
                Action client = () => {
                    using (Value value = Value.CreateBatch(input.Shape, data, device))
                    {
                        var outputs = new Dictionary<Variable, Value> { { output, null } };
                        model.Evaluate(new Dictionary<Variable, Value> { { input, value } }, outputs, device);
                        outputs[output].GetDenseData<float>(output);
                        outputs[output].Dispose();
                    }
                };
                long[] shape = input.Shape.Dimensions.Reverse().Select(d => (long)d).ToArray();
                var scores = new float[batch * output.Shape.TotalSize];
                // Pointers, as the client passes them (Mono marshals an array argument at some
                // 0.15 us).
                Action bare = () => {
                    long first = 0;
                    IntPtr value, result;
                    fixed (long* dims = shape)
                    fixed (float* pixels = data)
                        Check(loom_value_create_dense(1, dims, shape.Length, batch, pixels, data.Length, out value));
                    Check(loom_model_evaluate_by_index(bareModel, 1, &first, &value, 1, &first, &result));
                    fixed (float* z = scores) Check(loom_value_copy_data(result, 1, z, scores.Length));
                    Check(loom_value_free(result));
                    Check(loom_value_free(value));
                };
                // Both paths run a while before the rounds are timed (the first calls of a path
                // plan and allocate; Mono compiles each method at its first call).
                foreach (Action path in new[] { client, bare })
                {
                    var watch = Stopwatch.StartNew();
                    for (int i = 0; i < 100 || watch.ElapsedMilliseconds < 1000; ++i) path();
                }
                // About 0.2 s of calls a round unless --calls says.
                int n = calls > 0 ? calls : Math.Max(1, (int)(2e5 / MicrosPerCall(5, client)));
                var clientUs = new List<double>();
                var bareUs = new List<double>();
                for (int r = 0; r < rounds; ++r)
                {
                    clientUs.Add(MicrosPerCall(n, client));
                    bareUs.Add(MicrosPerCall(n, bare));
                }
                double a = Median(clientUs), b = Median(bareUs);
                Console.WriteLine("batch {0,3}: C# client {1,9:F1} us  C API {2,9:F1} us  ratio client/C API {3:F3}", batch, a, b, a / b);
            }
        }
        Check(loom_model_free(bareModel));
        return 0;
    }

    static IntPtr bareModel;

    [DllImport("loom_c")] static extern int loom_model_clone(IntPtr model, out IntPtr clone);
    [DllImport("loom_c")] static extern int loom_model_free(IntPtr model);
    [DllImport("loom_c")] static extern int loom_value_create_dense(int dtype, long* shape, long rank, long samples, float* data, long count, out IntPtr value);
    [DllImport("loom_c")] static extern int loom_model_evaluate_by_index(IntPtr model, long numInputs, long* inputIndices, IntPtr* inputs, long numOutputs, long* outputIndices, IntPtr* outputs);
    [DllImport("loom_c")] static extern int loom_value_copy_data(IntPtr value, int dtype, float* buffer, long capacity);
    [DllImport("loom_c")] static extern int loom_value_free(IntPtr value);

    static void Check(int status)
    {
        if (status != 0) throw new Exception("loom_c status " + status);
    }

    static double Median(List<double> values)
    {
        values.Sort();
        return values[values.Count / 2];
    }

    static bool cpuTime;

    struct Timespec { public long Seconds, Nanoseconds; }
    const int ClockProcessCpuTime = 2;  // CLOCK_PROCESS_CPUTIME_ID
    [DllImport("libc")] static extern int clock_gettime(int clock, out Timespec time);

    static double NowMicros()
    {
        if (!cpuTime) return Stopwatch.GetTimestamp() * 1e6 / Stopwatch.Frequency;
        // Process.TotalProcessorTime reads /proc in 10 ms ticks: the clock itself is exact.
        Timespec t;
        if (clock_gettime(ClockProcessCpuTime, out t) != 0) throw new Exception("clock_gettime failed");
        return t.Seconds * 1e6 + t.Nanoseconds * 1e-3;
    }

    static double MicrosPerCall(int calls, Action call)
    {
        double start = NowMicros();
        for (int i = 0; i < calls; ++i) call();
        return (NowMicros() - start) / calls;
    }
}
