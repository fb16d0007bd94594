// CNTK's C# evaluation examples (CNTKLibraryCSEvalExamples: a batch, sequences, one-hot
// sequences, clones evaluated in parallel) on model files CNTK wrote, written as a CNTK user
// would. Each result is checked bitwise against `loom eval` (Loom's C++ ModelRunner) on the
// same inputs, and bad inputs must give an exception with a message.
//
//   mono EvalTest.exe LOOM_COMMAND MODELS_DIR WORK_DIR   (OMP_NUM_THREADS=1: bitwise results)
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Threading.Tasks;
using CNTK;

static class EvalTest
{
    static string loom, models, work;
    static int failures;
    static readonly DeviceDescriptor device = DeviceDescriptor.CPUDevice;

    static int Main(string[] args)
    {
        if (args.Length != 3)
        {
            Console.WriteLine("usage: EvalTest.exe LOOM_COMMAND MODELS_DIR WORK_DIR");
            return 2;
        }
        loom = args[0];
        models = args[1];
        work = args[2];
        if (!Directory.Exists(models))
        {
            Console.WriteLine("SKIPPED: no CNTK model files in " + models);
            return 77;
        }
        Directory.CreateDirectory(work);
        EvaluateBatchAndSequences();
        EvaluateMnistInParallel();
        EvaluateAtisOneHotSequences();
        BadInputs();
        Console.WriteLine(failures == 0 ? "PASSED" : "FAILED: " + failures + " check(s)");
        return failures == 0 ? 0 : 1;
    }

    // A tiny CNTK v2 model (|x|) on a batch, one sequence and a batch of sequences.
    static void EvaluateBatchAndSequences()
    {
        Console.WriteLine("===== v2_load_and_eval.dnn: batch and sequences =====");
        string path = Path.Combine(models, "v2_load_and_eval.dnn");
        using (Function modelFunc = Function.Load(path, device))
        {
            Variable inputVar = modelFunc.Arguments.Single();
            Variable outputVar = modelFunc.Output;
            Console.WriteLine("input " + inputVar + ", output " + outputVar);
            int sampleSize = inputVar.Shape.TotalSize;
            float[] data = Samples(5 * sampleSize, -1);

            var batch = Value.CreateBatch(inputVar.Shape, data, device);
            Expect(batch.Shape.Equals(inputVar.Shape.AppendShape(new[] { 1, 5 })), "the batch's shape is " + batch.Shape);
            List<float> expected = LoomEval(path, outputVar, "abs", Idx(inputVar, data));
            SameBits("batch of 5", Evaluate(modelFunc, inputVar, batch, outputVar), expected);

            // |x| works step by step: sequences of the same steps give the same values.
            var sequence = Value.CreateSequence(inputVar.Shape, data, device);
            SameBits("one sequence of 5", Evaluate(modelFunc, inputVar, sequence, outputVar), expected);
            var sequences = new List<List<float>> { data.Take(3 * sampleSize).ToList(), data.Skip(3 * sampleSize).ToList() };
            var batchOfSequences = Value.CreateBatchOfSequences<float>(inputVar.Shape, sequences, device);
            IList<IList<float>> got = Evaluate(modelFunc, inputVar, batchOfSequences, outputVar);
            Expect(got.Count == 2 && got[0].Count == 3 * sampleSize && got[1].Count == 2 * sampleSize,
                   "sequences of 3 and 2 steps come back as 2 sequences of " + string.Join(" and ", got.Select(q => q.Count)) + " values");
            SameBits("sequences of 3 and 2", got, expected);
        }
    }

    // CNTK's v1 MNIST classifier: a batch of images through the output "ol.z", from three
    // clones at once (CNTK's EvaluateMultipleImagesInParallel), and into a Value the caller made.
    static void EvaluateMnistInParallel()
    {
        Console.WriteLine("===== v1_01_OneHidden.dnn: batch, clones in parallel =====");
        string path = Path.Combine(models, "v1_01_OneHidden.dnn");
        using (Function modelFunc = Function.Load(path, device))
        {
            Variable features = modelFunc.Arguments.Single(a => a.Name == "features");
            Variable labels = modelFunc.Arguments.Single(a => a.Name == "labels");
            Function scores = modelFunc.FindByName("ol.z");
            Variable outputVar = scores.Output;
            Expect(outputVar.Shape.TotalSize == 10, "ol.z has " + outputVar.Shape + " values");
            const int images = 4;
            float[] pixels = Samples(images * features.Shape.TotalSize, 0);
            float[] oneHot = new float[images * 10];
            for (int i = 0; i < images; ++i) oneHot[i * 10 + i] = 1;  // loom eval reads every argument
            List<float> expected = LoomEval(path, outputVar, "mnist", Idx(features, pixels), Idx(labels, oneHot));
            var inputVal = Value.CreateBatch(features.Shape, pixels, device);
            SameBits("batch of 4 images", Evaluate(scores, features, inputVal, outputVar), expected);
            // A part of a larger buffer (CreateBatch's start and size), and a list (not an array).
            int sampleSize = features.Shape.TotalSize;
            float[] padded = new float[pixels.Length + 3 * sampleSize + 5];
            Array.Copy(pixels, 0, padded, 3 * sampleSize, pixels.Length);
            SameBits("batch from a part of a buffer",
                     Evaluate(scores, features, Value.CreateBatch(features.Shape, padded, 3 * sampleSize, pixels.Length, device), outputVar),
                     expected);
            SameBits("batch from a list",
                     Evaluate(scores, features, Value.CreateBatch(features.Shape, pixels.ToList(), device), outputVar), expected);
            // The scores read as doubles (the C API converts).
            var asDoubleMap = new Dictionary<Variable, Value> { { outputVar, null } };
            scores.Evaluate(new Dictionary<Variable, Value> { { features, inputVal } }, asDoubleMap, device);
            IList<IList<double>> asDoubles = asDoubleMap[outputVar].GetDenseData<double>(outputVar);
            Expect(asDoubles.Count == images && asDoubles.SelectMany(v => v).SequenceEqual(expected.Select(x => (double)x)),
                   "the scores read as doubles: " + images + " images of 10, equal to the floats");

            var clones = new List<Function> { scores, scores.Clone(ParameterCloningMethod.Share), scores.Clone(ParameterCloningMethod.Share) };
            Task<IList<IList<float>>>[] tasks = clones.Select(clone => Task.Factory.StartNew(() => {
                var inputs = new Dictionary<Variable, Value> { { clone.Arguments.Single(a => a.Name == "features"), Value.CreateBatch(features.Shape, pixels, device) } };
                var outputs = new Dictionary<Variable, Value> { { clone.Output, null } };
                clone.Evaluate(inputs, outputs, device);
                return outputs[clone.Output].GetDenseData<float>(clone.Output);
            })).ToArray();
            Task.WaitAll(tasks);
            for (int i = 0; i < tasks.Length; ++i) SameBits("clone " + i + " in parallel", tasks[i].Result, expected);

            // CNTK's alternative to null: a Value the caller made, which receives the output.
            var given = Value.CreateBatch(outputVar.Shape, new float[images * 10], device);
            var outputMap = new Dictionary<Variable, Value> { { outputVar, given } };
            scores.Evaluate(new Dictionary<Variable, Value> { { features, inputVal } }, outputMap, device);
            Expect(ReferenceEquals(outputMap[outputVar], given), "Evaluate kept the caller's output Value");
            SameBits("into the caller's Value", given.GetDenseData<float>(outputVar), expected);
            foreach (Function clone in clones) clone.Dispose();

            // An intermediate layer (CNTK's EvaluateIntermediateLayer): the hidden layer's
            // function found by name, evaluated with the scores in one call.
            Function hiddenFunc = modelFunc.FindByName("h1.z");
            Variable hidden = hiddenFunc.Output;
            Expect(hidden.Shape.TotalSize == 200, "h1.z has " + hidden.Shape + " values");
            var both = new Dictionary<Variable, Value> { { hidden, null }, { outputVar, null } };
            modelFunc.Evaluate(new Dictionary<Variable, Value> { { features, inputVal } }, both, device);
            SameBits("ol.z beside h1.z", both[outputVar].GetDenseData<float>(outputVar), expected);
            IList<IList<float>> h1 = both[hidden].GetDenseData<float>(hidden);
            Expect(h1.Count == images && h1.All(v => v.Count == 200 && v.All(x => !float.IsNaN(x))),
                   "h1.z: " + images + " images of 200 values");
            var alone = new Dictionary<Variable, Value> { { hiddenFunc.Output, null } };
            hiddenFunc.Evaluate(new Dictionary<Variable, Value> { { features, inputVal } }, alone, device);
            SameBits("h1.z alone", alone[hiddenFunc.Output].GetDenseData<float>(hiddenFunc.Output),
                     h1.SelectMany(v => v).ToList());
            Expect(modelFunc.FindByName("no such layer") == null, "FindByName of an unknown name is null");
            hiddenFunc.Dispose();
        }
    }

    // CNTK's ATIS slot tagger: sequences of word indices as one-hot vectors
    // (EvaluationBatchOfSequencesUsingOneHot), printed as slot labels.
    static void EvaluateAtisOneHotSequences()
    {
        Console.WriteLine("===== v2_atis_slot_tagger.cmf: one-hot sequences =====");
        string path = Path.Combine(models, "v2_atis_slot_tagger.cmf");
        string[] vocabulary = File.ReadAllLines(Path.Combine(models, "atis_query.wl"));
        string[] slots = File.ReadAllLines(Path.Combine(models, "atis_slots.wl"));
        string[][] queries = {
            "BOS i would like to find a flight from charlotte to las vegas that makes a stop in st. louis EOS".Split(' '),
            "BOS flights from boston to denver EOS".Split(' '),
        };
        int[][] words = queries.Select(q => q.Select(w => Array.IndexOf(vocabulary, w)).ToArray()).ToArray();
        using (Function modelFunc = Function.Load(path, device))
        {
            Variable inputVar = modelFunc.Arguments.Single();
            Variable outputVar = modelFunc.Output;
            int vocabSize = inputVar.Shape.TotalSize;
            Expect(inputVar.IsSparse && vocabSize == vocabulary.Length, "input " + inputVar + " for " + vocabulary.Length + " words");
            var inputValue = Value.CreateBatchOfSequences<float>(vocabSize, words, device);
            var lines = new List<string>();
            for (int s = 0; s < words.Length; ++s)
                foreach (int w in words[s]) lines.Add(s + " |" + inputVar.Name + " " + w + ":1");
            string ctf = Path.Combine(work, "atis.ctf");
            File.WriteAllLines(ctf, lines);
            IList<IList<float>> outputData = Evaluate(modelFunc, inputVar, inputValue, outputVar);
            SameBits("two queries", outputData, LoomEval(path, outputVar, "atis", "--data", ctf));
            int labels = outputVar.Shape.TotalSize;
            for (int s = 0; s < outputData.Count; ++s)
            {
                var tagged = new List<string>();
                for (int t = 0; t < queries[s].Length; ++t)
                {
                    var step = outputData[s].Skip(t * labels).Take(labels).ToList();
                    tagged.Add(queries[s][t] + "/" + slots[step.IndexOf(step.Max())]);
                }
                Console.WriteLine("  " + string.Join(" ", tagged));
            }
        }
    }

    static void BadInputs()
    {
        Console.WriteLine("===== bad inputs =====");
        string missing = Path.Combine(work, "no_such_model.dnn");
        ExpectThrows<IOException>("missing file", () => Function.Load(missing, device), "no_such_model.dnn");
        string damaged = Path.Combine(work, "damaged.dnn");
        File.WriteAllBytes(damaged, Enumerable.Range(0, 64).Select(i => (byte)(i * 37)).ToArray());
        ExpectThrows<InvalidDataException>("damaged file", () => Function.Load(damaged, device), "damaged.dnn");

        Function modelFunc = Function.Load(Path.Combine(models, "v1_01_OneHidden.dnn"), device);
        Variable features = modelFunc.Arguments.Single(a => a.Name == "features");
        Variable scores = modelFunc.Outputs.Single(o => o.Name == "ol.z");
        ExpectThrows<ArgumentException>("values not a whole number of samples",
                                        () => Value.CreateBatch(features.Shape, new float[100], device), "784");
        Value wrongShape = Value.CreateBatch(new NDShape(1, 10), new float[20], device);
        ExpectThrows<ArgumentException>("wrong input size", () => Evaluate(modelFunc, features, wrongShape, scores), "784");
        using (Function other = Function.Load(Path.Combine(models, "v2_load_and_eval.dnn"), device))
            ExpectThrows<ArgumentException>("another model's variable",
                                            () => Evaluate(modelFunc, other.Arguments[0], wrongShape, scores), "features");
        ExpectThrows<NotSupportedException>("a continued sequence",
                                            () => Value.CreateSequence(features.Shape, new float[784], false, device), "whole");
        ExpectThrows<ArgumentException>("a data type Loom has no",
                                        () => Value.CreateBatch(features.Shape, new int[784], device), "float or double");

        Value input = Value.CreateBatch(features.Shape, new float[784], device);
        input.Dispose();
        ExpectThrows<ObjectDisposedException>("disposed Value in Evaluate", () => Evaluate(modelFunc, features, input, scores), "disposed");
        ExpectThrows<ObjectDisposedException>("disposed Value read", () => input.GetDenseData<float>(features), "disposed");
        modelFunc.Dispose();
        modelFunc.Dispose();  // IDisposable: a second Dispose does nothing
        ExpectThrows<ObjectDisposedException>("disposed Function", () => Evaluate(modelFunc, features, wrongShape, scores), "disposed");
        ExpectThrows<ObjectDisposedException>("disposed Function cloned", () => modelFunc.Clone(), "disposed");
    }

    // ---- Helpers -----------------------------------------------------------------------

    static IList<IList<float>> Evaluate(Function f, Variable input, Value value, Variable output)
    {
        var outputs = new Dictionary<Variable, Value> { { output, null } };
        f.Evaluate(new Dictionary<Variable, Value> { { input, value } }, outputs, device);
        return outputs[output].GetDenseData<float>(output);
    }

    // Deterministic inputs in [offset, offset + 2), different from sample to sample.
    static float[] Samples(int count, int offset)
    {
        return Enumerable.Range(0, count).Select(i => (float)((i * 7919 % 1000) / 500.0 + offset)).ToArray();
    }

    // A batch for an argument as an IDX file (float32, big-endian, the shape in Loom's order
    // after the sample count) and the `loom eval` options that read it.
    static string[] Idx(Variable argument, float[] data)
    {
        string path = Path.Combine(work, argument.Name + ".idx");
        int[] dims = argument.Shape.Dimensions.Reverse().ToArray();
        using (var file = new BinaryWriter(File.Create(path)))
        {
            file.Write(new byte[] { 0, 0, 0x0D, (byte)(dims.Length + 1) });
            foreach (int d in new[] { data.Length / argument.Shape.TotalSize }.Concat(dims))
                file.Write(BigEndian(BitConverter.GetBytes(d)));
            foreach (float x in data) file.Write(BigEndian(BitConverter.GetBytes(x)));
        }
        return new[] { "--data", argument.Name + "=" + path };
    }

    static byte[] BigEndian(byte[] bytes)
    {
        if (BitConverter.IsLittleEndian) Array.Reverse(bytes);
        return bytes;
    }

    // `loom eval` (in one minibatch) on the data the options give: the output's values.
    static List<float> LoomEval(string model, Variable output, string name, params object[] data)
    {
        string result = Path.Combine(work, name + "_out.ctf");
        var arguments = new List<string> { "eval", model, "--output", result, "--minibatch-size", "100000" };
        foreach (object d in data)
            if (d is string[]) arguments.AddRange((string[])d); else arguments.Add((string)d);
        var start = new ProcessStartInfo(loom, string.Join(" ", arguments.Select(a => "\"" + a + "\""))) {
            UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true
        };
        using (Process p = Process.Start(start))
        {
            string stdout = p.StandardOutput.ReadToEnd(), stderr = p.StandardError.ReadToEnd();
            p.WaitForExit();
            if (p.ExitCode != 0) throw new Exception("loom eval failed: " + stdout + stderr);
        }
        string label = output.Name != "" ? output.Name : output.Uid;
        var values = new List<float>();
        foreach (string line in File.ReadAllLines(result))
            foreach (string field in line.Split('|').Skip(1))
            {
                string[] tokens = field.Split(new[] { ' ' }, StringSplitOptions.RemoveEmptyEntries);
                if (tokens[0] == label)
                    values.AddRange(tokens.Skip(1).Select(t => float.Parse(t, CultureInfo.InvariantCulture)));
            }
        return values;
    }

    static void SameBits(string what, IList<IList<float>> got, List<float> expected)
    {
        float[] flat = got.SelectMany(s => s).ToArray();
        int bad = Enumerable.Range(0, Math.Min(flat.Length, expected.Count))
                      .FirstOrDefault(i => BitConverter.ToInt32(BitConverter.GetBytes(flat[i]), 0) !=
                                           BitConverter.ToInt32(BitConverter.GetBytes(expected[i]), 0), -1);
        bool same = flat.Length == expected.Count && expected.Count > 0 && bad < 0;
        Expect(same, string.Format("{0}: {1} values{2}", what, flat.Length,
                                   same ? ", bitwise equal to loom eval's"
                                        : bad >= 0 ? string.Format(": value {0} is {1:R}, loom eval gives {2:R}", bad, flat[bad], expected[bad])
                                                   : string.Format(", loom eval gives {0}", expected.Count)));
    }

    static int FirstOrDefault(this IEnumerable<int> items, Func<int, bool> predicate, int otherwise)
    {
        foreach (int i in items)
            if (predicate(i)) return i;
        return otherwise;
    }

    static void ExpectThrows<E>(string what, Action action, string inMessage) where E : Exception
    {
        try
        {
            action();
            Expect(false, what + ": no exception");
        }
        catch (Exception e)
        {
            Expect(e is E && e.Message.Contains(inMessage),
                   string.Format("{0}: {1}: {2}", what, e.GetType().Name, e.Message) +
                   (e is E ? "" : " (expected " + typeof(E).Name + ")") +
                   (e.Message.Contains(inMessage) ? "" : " (the message should name '" + inMessage + "')"));
        }
    }

    static void Expect(bool condition, string message)
    {
        Console.WriteLine((condition ? "  ok: " : "  FAILED: ") + message);
        if (!condition) ++failures;
    }
}
