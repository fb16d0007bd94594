// CNTK's Value: data going into or coming out of an evaluation (one loom_value handle). The C
// API copies the caller's data when a Value is made, so the managed buffers may be reused at
// once. Dispose frees the handle; a Value not disposed is freed by the finalizer.
using System;
using System.Collections.Generic;
using System.Linq;

namespace CNTK
{
    public sealed class Value : IDisposable
    {
        // A batch (CreateBatch) given to an argument with a sequence axis is read as sequences
        // of one step each, as CNTK's batch meant there (Loom's ModelRunner does that).
        private ValueHandle handle;
        private readonly object gate = new object();

        internal Value(ValueHandle handle) { this.handle = handle; }

        // ---- Dense data --------------------------------------------------------------------

        // A batch of samples: batch holds the samples one after another, each sampleShape's
        // TotalSize values in CNTK's order (its first dimension fastest).
        public static Value CreateBatch<T>(NDShape sampleShape, IEnumerable<T> batch, DeviceDescriptor device,
                                           bool readOnly = false)
        {
            // An array goes to the C API as it is (the C API copies it); other sequences are
            // gathered into one first.
            T[] data = batch as T[] ?? Materialize(batch, "batch");
            return DenseBatch(sampleShape, data, 0, data.Length);
        }

        public static Value CreateBatch<T>(NDShape sampleShape, T[] dataBuffer, int dataStart, int dataSize,
                                           DeviceDescriptor device, bool readOnly = false)
        {
            if (dataBuffer == null) throw new ArgumentNullException("dataBuffer");
            if (dataStart < 0 || dataSize < 0 || dataStart > dataBuffer.Length - dataSize)
                throw new ArgumentException(string.Format(
                    "Value.CreateBatch: [{0}, {0} + {1}) is not inside the buffer of {2} values", dataStart, dataSize, dataBuffer.Length));
            // The C API copies the part of the buffer: the caller may change it at once.
            return DenseBatch(sampleShape, dataBuffer, dataStart, dataSize);
        }

        // One sequence: its steps one after another.
        public static Value CreateSequence<T>(NDShape sampleShape, IEnumerable<T> sequence, DeviceDescriptor device,
                                              bool readOnly = false)
        {
            return CreateSequence(sampleShape, sequence, true, device, readOnly);
        }

        public static Value CreateSequence<T>(NDShape sampleShape, IEnumerable<T> sequence, bool sequenceStartFlag,
                                              DeviceDescriptor device, bool readOnly = false)
        {
            return Create(sampleShape, new[] { sequence }, new[] { sequenceStartFlag }, device, readOnly);
        }

        // Sequences of different lengths, each its steps one after another.
        public static Value CreateBatchOfSequences<T>(NDShape sampleShape, IEnumerable<IEnumerable<T>> batchOfSequences,
                                                      DeviceDescriptor device, bool readOnly = false)
        {
            return Create(sampleShape, batchOfSequences, new bool[0], device, readOnly);
        }

        public static Value CreateBatchOfSequences<T>(NDShape sampleShape, IEnumerable<IEnumerable<T>> batchOfSequences,
                                                      IEnumerable<bool> sequenceStartFlags, DeviceDescriptor device,
                                                      bool readOnly = false)
        {
            return Create(sampleShape, batchOfSequences, sequenceStartFlags, device, readOnly);
        }

        public static Value Create<T>(NDShape sampleShape, IEnumerable<IEnumerable<T>> sequences,
                                      IEnumerable<bool> sequenceStartFlags, DeviceDescriptor device, bool readOnly = false)
        {
            T[][] each = Materialize(sequences, "sequences").Select(s => Materialize(s, "sequence")).ToArray();
            CheckStartFlags(sequenceStartFlags, each.Length);
            int sampleSize = SampleSize(sampleShape, "Value.Create");
            var lengths = new long[each.Length];
            for (int i = 0; i < each.Length; ++i)
            {
                if (each[i].Length % sampleSize != 0 || each[i].Length == 0)
                    throw new ArgumentException(string.Format(
                        "Value.Create: sequence {0} has {1} values, not a whole number (at least 1) of samples of shape {2} ({3} values each)",
                        i, each[i].Length, sampleShape, sampleSize));
                lengths[i] = each[i].Length / sampleSize;
            }
            return new Value(new ValueHandle(Create(Dense(sampleShape, each.SelectMany(s => s).ToArray(), lengths))));
        }

        // ---- One-hot data: each sample is the index of its 1 in a vector of `dimension` ---------

        public static Value CreateBatch<T>(int dimension, IEnumerable<int> batch, DeviceDescriptor device,
                                           bool readOnly = false)
        {
            long[] indices = Materialize(batch, "batch").Select(i => (long)i).ToArray();
            int dtype = (int)DataTypes.Of<T>();
            return new Value(new ValueHandle(Create(delegate (out IntPtr v) {
                return Native.loom_value_create_one_hot(dtype, dimension, indices.Length, indices, out v);
            })));
        }

        public static Value CreateSequence<T>(int dimension, IEnumerable<int> sequence, DeviceDescriptor device,
                                              bool readOnly = false)
        {
            return CreateSequence<T>(dimension, sequence, true, device, readOnly);
        }

        public static Value CreateSequence<T>(int dimension, IEnumerable<int> sequence, bool sequenceStartFlag,
                                              DeviceDescriptor device, bool readOnly = false)
        {
            return Create<T>(dimension, new[] { sequence }, new[] { sequenceStartFlag }, device, readOnly);
        }

        public static Value CreateBatchOfSequences<T>(int dimension, IEnumerable<IEnumerable<int>> batchOfSequences,
                                                      DeviceDescriptor device, bool readOnly = false)
        {
            return Create<T>(dimension, batchOfSequences, new bool[0], device, readOnly);
        }

        public static Value CreateBatchOfSequences<T>(int dimension, IEnumerable<IEnumerable<int>> batchOfSequences,
                                                      IEnumerable<bool> sequenceStartFlags, DeviceDescriptor device,
                                                      bool readOnly = false)
        {
            return Create<T>(dimension, batchOfSequences, sequenceStartFlags, device, readOnly);
        }

        public static Value Create<T>(int dimension, IEnumerable<IEnumerable<int>> sequences,
                                      IEnumerable<bool> sequenceStartFlags, DeviceDescriptor device, bool readOnly = false)
        {
            int[][] each = Materialize(sequences, "sequences").Select(s => Materialize(s, "sequence")).ToArray();
            CheckStartFlags(sequenceStartFlags, each.Length);
            long[] lengths = each.Select(s => (long)s.Length).ToArray();
            long[] indices = each.SelectMany(s => s).Select(i => (long)i).ToArray();
            int dtype = (int)DataTypes.Of<T>();
            return new Value(new ValueHandle(Create(delegate (out IntPtr v) {
                return Native.loom_value_create_one_hot_sequences(dtype, dimension, lengths.Length, lengths, indices, out v);
            })));
        }

        // ---- Sparse data: one sequence in CNTK's CSC form (a column per step) ------------------

        public static Value CreateSequence<T>(int dimension, int sequenceLength, int[] colStarts, int[] rowIndices,
                                              T[] nonZeroValues, DeviceDescriptor device, bool readOnly = false)
        {
            return CreateSequence(new NDShape(1, dimension), sequenceLength, colStarts, rowIndices, nonZeroValues,
                                  true, device, readOnly);
        }

        public static Value CreateSequence<T>(NDShape sampleShape, int sequenceLength, int[] colStarts, int[] rowIndices,
                                              T[] nonZeroValues, bool sequenceStartFlag, DeviceDescriptor device,
                                              bool readOnly = false)
        {
            // CNTK's column per step is Loom's CSR row per step when a sample is a vector.
            if (sampleShape == null || sampleShape.Rank != 1)
                throw new ArgumentException("Value.CreateSequence (sparse): the sample shape must be a vector [dimension], not " + sampleShape);
            if (colStarts == null || rowIndices == null || nonZeroValues == null)
                throw new ArgumentNullException("colStarts, rowIndices and nonZeroValues");
            CheckStartFlags(new[] { sequenceStartFlag }, 1);
            long[] shape = sampleShape.ToLoom();
            long[] lengths = { sequenceLength };
            object values = nonZeroValues;
            return new Value(new ValueHandle(Create(delegate (out IntPtr v) {
                return values is float[]
                    ? Native.loom_value_create_csr_sequences((int)DataType.Float, shape, shape.Length, 1, lengths, colStarts,
                                                             colStarts.Length, rowIndices, (float[])values, nonZeroValues.Length, out v)
                    : Native.loom_value_create_csr_sequences((int)DataTypes.Of<T>(), shape, shape.Length, 1, lengths, colStarts,
                                                             colStarts.Length, rowIndices, (double[])values, nonZeroValues.Length, out v);
            })));
        }

        // ---- Reading -----------------------------------------------------------------------

        public DataType DataType
        {
            get { int dtype; Native.Check(Native.loom_value_dtype(Handle, out dtype)); return (DataType)dtype; }
        }

        public bool IsSparse { get { return (Flags & Native.FlagSparse) != 0; } }
        public bool IsValid { get { return !handle.IsClosed; } }
        public bool IsReadOnly { get { return false; } }
        public DeviceDescriptor Device { get { return DeviceDescriptor.CPUDevice; } }

        // CNTK's shape of a Value: the sample shape, then the longest sequence's length, then
        // the number of sequences (samples of a batch are sequences of length 1).
        public NDShape Shape
        {
            get
            {
                long[] lengths = SequenceLengths();
                return SampleShape().AppendShape(new[] { lengths.Length == 0 ? 0 : (int)lengths.Max(), lengths.Length });
            }
        }

        // The data of each sequence (or sample), its steps one after another in CNTK's order.
        public unsafe IList<IList<T>> GetDenseData<T>(Variable outputVariable)
        {
            if (outputVariable == null) throw new ArgumentNullException("outputVariable");
            int dtype = (int)DataTypes.Of<T>();
            // One reference to the handle for all the calls (the marshaller would take one per
            // call).
            ValueHandle self = Handle;
            bool added = false;
            try
            {
                self.DangerousAddRef(ref added);
                IntPtr raw = self.DangerousGetHandle();
                long rank, n;
                Native.Check(Native.loom_value_sample_rank(raw, out rank));
                var dims = new long[rank];
                fixed (long* d = dims) Native.Check(Native.loom_value_sample_shape(raw, d, rank));
                long sampleSize = 1;
                foreach (long d in dims) sampleSize *= d;
                NDShape expected = outputVariable.Shape;
                if (!expected.HasUnboundDimension && expected.TotalSize != sampleSize)
                    throw new ArgumentException(string.Format(
                        "Value.GetDenseData: the value's samples have shape {0}, the variable {1} has {2}",
                        NDShape.FromLoom(dims), outputVariable, expected));
                Native.Check(Native.loom_value_num_sequences(raw, out n));
                var lengths = new long[n];
                long count = 0;
                fixed (long* l = lengths) Native.Check(Native.loom_value_sequence_lengths(raw, l, n));
                foreach (long length in lengths) count += length * sampleSize;
                T[] data = new T[count];
                object buffer = data;
                float[] floats = buffer as float[];
                if (floats != null)
                {
                    fixed (float* f = floats) Native.Check(Native.loom_value_copy_data(raw, dtype, f, count));
                }
                else
                {
                    fixed (double* f = (double[])buffer) Native.Check(Native.loom_value_copy_data(raw, dtype, f, count));
                }
                var result = new List<IList<T>>((int)n);
                // One sequence (a batch of one sample) takes the array as it is; more take their
                // part each.
                if (n == 1)
                {
                    result.Add(data);
                    return result;
                }
                int start = 0;
                foreach (long length in lengths)
                {
                    int size = checked((int)(length * sampleSize));
                    var sequence = new T[size];
                    Array.Copy(data, start, sequence, 0, size);
                    result.Add(sequence);
                    start += size;
                }
                return result;
            }
            finally
            {
                if (added) self.DangerousRelease();
            }
        }

        public void Dispose() { handle.Dispose(); }

        // ---- Internals ---------------------------------------------------------------------

        internal ValueHandle Handle
        {
            get
            {
                if (handle.IsClosed)
                    throw new ObjectDisposedException("Value", "This Value was disposed; create it again");
                return handle;
            }
        }

        // Evaluate's result into an output Value the caller gave: CNTK writes into it.
        internal void TakeDataOf(Value result, Variable output)
        {
            if (!result.SampleShape().Equals(SampleShape()) || !result.SequenceLengths().SequenceEqual(SequenceLengths()))
            {
                NDShape expected = result.Shape, given = Shape;
                result.Dispose();
                throw new ArgumentException(string.Format(
                    "Function.Evaluate: the Value given for output {0} has shape {1}; the output has {2}: give null to get a new Value",
                    output, given, expected));
            }
            lock (gate)
            {
                handle.Dispose();
                handle = result.handle;
            }
        }

        private int Flags
        {
            get { int flags; Native.Check(Native.loom_value_flags(Handle, out flags)); return flags; }
        }

        private NDShape SampleShape()
        {
            long rank;
            Native.Check(Native.loom_value_sample_rank(Handle, out rank));
            var dims = new long[rank];
            Native.Check(Native.loom_value_sample_shape(Handle, dims, rank));
            return NDShape.FromLoom(dims);
        }

        private long[] SequenceLengths()
        {
            long n;
            Native.Check(Native.loom_value_num_sequences(Handle, out n));
            var lengths = new long[n];
            Native.Check(Native.loom_value_sequence_lengths(Handle, lengths, n));
            return lengths;
        }

        private delegate int Creator(out IntPtr value);

        private static IntPtr Create(Creator create)
        {
            Native.CheckVersion();
            IntPtr value;
            Native.Check(create(out value));
            return value;
        }

        // Dense samples from data[start .. start + count), straight to the C API (which copies
        // them) from the pinned array.
        private static unsafe Value DenseBatch<T>(NDShape sampleShape, T[] data, int start, int count)
        {
            int dtype = (int)DataTypes.Of<T>();
            int sampleSize = SampleSize(sampleShape, "Value.CreateBatch");
            if (count % sampleSize != 0 || count == 0)
                throw new ArgumentException(string.Format(
                    "Value.CreateBatch: {0} values are not a whole number (at least 1) of samples of shape {1} ({2} values each)",
                    count, sampleShape, sampleSize));
            Native.CheckVersion();
            long[] shape = sampleShape.ToLoom();
            long samples = count / sampleSize;
            IntPtr value;
            int status;
            object buffer = data;
            float[] floats = buffer as float[];
            fixed (long* dims = shape)
            {
                if (floats != null)
                {
                    fixed (float* d = floats)
                        status = Native.loom_value_create_dense(dtype, dims, shape.Length, samples, d + start, count, out value);
                }
                else
                {
                    fixed (double* d = (double[])buffer)
                        status = Native.loom_value_create_dense(dtype, dims, shape.Length, samples, d + start, count, out value);
                }
            }
            Native.Check(status);
            return new Value(new ValueHandle(value));
        }

        // Makes dense samples (lengths null) or sequences of sampleShape from data in CNTK's
        // order, which is Loom's order of the reversed shape.
        private static Creator Dense<T>(NDShape sampleShape, T[] data, long[] lengths)
        {
            long[] shape = sampleShape.ToLoom();
            int dtype = (int)DataTypes.Of<T>();
            long samples = data.Length / SampleSize(sampleShape, "Value.Create");
            object buffer = data;
            return delegate (out IntPtr v) {
                if (lengths == null)
                    return buffer is float[]
                        ? Native.loom_value_create_dense(dtype, shape, shape.Length, samples, (float[])buffer, data.Length, out v)
                        : Native.loom_value_create_dense(dtype, shape, shape.Length, samples, (double[])buffer, data.Length, out v);
                return buffer is float[]
                    ? Native.loom_value_create_dense_sequences(dtype, shape, shape.Length, lengths.Length, lengths, (float[])buffer, data.Length, out v)
                    : Native.loom_value_create_dense_sequences(dtype, shape, shape.Length, lengths.Length, lengths, (double[])buffer, data.Length, out v);
            };
        }

        private static int SampleSize(NDShape sampleShape, string what)
        {
            if (sampleShape == null) throw new ArgumentNullException("sampleShape");
            int size = sampleShape.TotalSize;
            if (size == 0) throw new ArgumentException(what + ": the sample shape " + sampleShape + " has no elements");
            return size;
        }

        private static T[] Materialize<T>(IEnumerable<T> items, string what)
        {
            if (items == null) throw new ArgumentNullException(what);
            return items.ToArray();
        }

        // Loom evaluates whole sequences: a sequence continued from an earlier call cannot be.
        private static void CheckStartFlags(IEnumerable<bool> flags, int sequences)
        {
            bool[] each = Materialize(flags, "sequenceStartFlags");
            if (each.Length != 0 && each.Length != sequences)
                throw new ArgumentException(string.Format(
                    "{0} sequence start flags for {1} sequences: give one per sequence, or none", each.Length, sequences));
            if (each.Contains(false))
                throw new NotSupportedException(
                    "A sequence start flag is false: Loom evaluates whole sequences and cannot continue one from an " +
                    "earlier Evaluate; give each sequence whole, with its flag true");
        }
    }
}
