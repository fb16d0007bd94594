// P/Invoke declarations of Loom's C API (bindings/c/loom_c.h) and the two things every call
// needs: turning a failed status into an exception, and UTF-8 strings both ways (Mono's "Ansi"
// marshaling is the C locale's encoding, not necessarily UTF-8).
using System;
using System.IO;
using System.Runtime.InteropServices;
using System.Security;
using System.Text;

namespace CNTK
{
    // No security stack walk per call (.NET Framework's; Mono ignores it).
    [SuppressUnmanagedCodeSecurity]
    internal static class Native
    {
        private const string Lib = "loom_c";

        // loom_c.h's status codes, flags and kinds.
        internal const int Ok = 0, ArgumentError = 1, ShapeError = 2, DataError = 3, IOError = 4,
                           InvalidHandle = 5, OutOfMemory = 6, InternalError = 7, StateError = 8;
        internal const int FlagSparse = 1, FlagBatchAxis = 2, FlagSequenceAxis = 4;
        internal const int KindArgument = 0, KindOutput = 1, KindNode = 2;
        internal const int ApiVersion = 1;

        [DllImport(Lib)] internal static extern IntPtr loom_last_error_message();
        [DllImport(Lib)] internal static extern int loom_c_api_version();

        [DllImport(Lib)] internal static extern int loom_model_load(byte[] path, out IntPtr model);
        [DllImport(Lib)] internal static extern int loom_model_load_from_bytes(byte[] bytes, long size, out IntPtr model);
        [DllImport(Lib)] internal static extern int loom_model_clone(ModelHandle model, out IntPtr clone);
        [DllImport(Lib)] internal static extern int loom_model_free(IntPtr model);
        [DllImport(Lib)] internal static extern int loom_model_variable_count(ModelHandle model, int kind, out long count);
        [DllImport(Lib)] internal static extern int loom_model_variable_name(ModelHandle model, int kind, long index, out IntPtr name);
        [DllImport(Lib)] internal static extern int loom_model_variable_uid(ModelHandle model, int kind, long index, out IntPtr uid);
        [DllImport(Lib)] internal static extern int loom_model_variable_dtype(ModelHandle model, int kind, long index, out int dtype);
        [DllImport(Lib)] internal static extern int loom_model_variable_flags(ModelHandle model, int kind, long index, out int flags);
        [DllImport(Lib)] internal static extern int loom_model_variable_rank(ModelHandle model, int kind, long index, out long rank);
        [DllImport(Lib)] internal static extern int loom_model_variable_shape(ModelHandle model, int kind, long index, long[] dims, long capacity);
        // The calls of an evaluation (making its input, evaluating, reading the output) take
        // raw handles and pointers: the caller keeps each SafeHandle alive across the calls
        // (DangerousAddRef) once for all of them, which the marshaller would do for each call
        // and each handle, and pins its arrays with `fixed`, where Mono's marshaller spends
        // about 0.15 us per array argument.
        [DllImport(Lib)] internal static extern unsafe int loom_model_evaluate_by_index(IntPtr model, long numInputs, long* inputIndices, IntPtr* inputs, long numOutputs, long* outputIndices, IntPtr* outputs);
        [DllImport(Lib)] internal static extern unsafe int loom_model_evaluate_nodes(IntPtr model, long numInputs, long* inputIndices, IntPtr* inputs, long numOutputs, long* nodeIndices, IntPtr* outputs);

        [DllImport(Lib)] internal static extern int loom_value_create_dense(int dtype, long[] sampleShape, long sampleRank, long numSamples, float[] data, long dataCount, out IntPtr value);
        [DllImport(Lib)] internal static extern int loom_value_create_dense(int dtype, long[] sampleShape, long sampleRank, long numSamples, double[] data, long dataCount, out IntPtr value);
        [DllImport(Lib)] internal static extern unsafe int loom_value_create_dense(int dtype, long* sampleShape, long sampleRank, long numSamples, void* data, long dataCount, out IntPtr value);
        [DllImport(Lib)] internal static extern int loom_value_create_dense_sequences(int dtype, long[] sampleShape, long sampleRank, long numSequences, long[] lengths, float[] data, long dataCount, out IntPtr value);
        [DllImport(Lib)] internal static extern int loom_value_create_dense_sequences(int dtype, long[] sampleShape, long sampleRank, long numSequences, long[] lengths, double[] data, long dataCount, out IntPtr value);
        [DllImport(Lib)] internal static extern int loom_value_create_one_hot(int dtype, long dim, long numSamples, long[] indices, out IntPtr value);
        [DllImport(Lib)] internal static extern int loom_value_create_one_hot_sequences(int dtype, long dim, long numSequences, long[] lengths, long[] indices, out IntPtr value);
        [DllImport(Lib)] internal static extern int loom_value_create_csr_sequences(int dtype, long[] sampleShape, long sampleRank, long numSequences, long[] lengths, int[] rowOffsets, long numOffsets, int[] colIndices, float[] values, long nnz, out IntPtr value);
        [DllImport(Lib)] internal static extern int loom_value_create_csr_sequences(int dtype, long[] sampleShape, long sampleRank, long numSequences, long[] lengths, int[] rowOffsets, long numOffsets, int[] colIndices, double[] values, long nnz, out IntPtr value);

        [DllImport(Lib)] internal static extern int loom_value_dtype(ValueHandle value, out int dtype);
        [DllImport(Lib)] internal static extern int loom_value_flags(ValueHandle value, out int flags);
        [DllImport(Lib)] internal static extern int loom_value_sample_rank(ValueHandle value, out long rank);
        [DllImport(Lib)] internal static extern int loom_value_sample_shape(ValueHandle value, long[] dims, long capacity);
        [DllImport(Lib)] internal static extern int loom_value_num_sequences(ValueHandle value, out long numSequences);
        [DllImport(Lib)] internal static extern int loom_value_sequence_lengths(ValueHandle value, long[] lengths, long capacity);
        [DllImport(Lib)] internal static extern int loom_value_sample_rank(IntPtr value, out long rank);
        [DllImport(Lib)] internal static extern unsafe int loom_value_sample_shape(IntPtr value, long* dims, long capacity);
        [DllImport(Lib)] internal static extern int loom_value_num_sequences(IntPtr value, out long numSequences);
        [DllImport(Lib)] internal static extern unsafe int loom_value_sequence_lengths(IntPtr value, long* lengths, long capacity);
        [DllImport(Lib)] internal static extern unsafe int loom_value_copy_data(IntPtr value, int dtype, void* buffer, long capacity);
        [DllImport(Lib)] internal static extern int loom_value_free(IntPtr value);

        // Throws the exception that matches a failed status, with the C API's message.
        internal static void Check(int status)
        {
            if (status == Ok) return;
            string message = FromUtf8(loom_last_error_message());
            switch (status)
            {
                case ArgumentError:
                case ShapeError: throw new ArgumentException(message);
                case DataError: throw new InvalidDataException(message);
                case IOError: throw new IOException(message);
                case InvalidHandle:
                case StateError: throw new InvalidOperationException(message);
                case OutOfMemory: throw new OutOfMemoryException(message);
                default: throw new ApplicationException(message);
            }
        }

        internal static byte[] ToUtf8(string text)
        {
            if (text == null) throw new ArgumentNullException("text");
            byte[] bytes = new byte[Encoding.UTF8.GetByteCount(text) + 1];
            Encoding.UTF8.GetBytes(text, 0, text.Length, bytes, 0);
            return bytes;
        }

        internal static string FromUtf8(IntPtr text)
        {
            int length = 0;
            while (Marshal.ReadByte(text, length) != 0) ++length;
            byte[] bytes = new byte[length];
            Marshal.Copy(text, bytes, 0, length);
            return Encoding.UTF8.GetString(bytes);
        }

        private static volatile bool versionChecked;

        // Every entry point that makes a handle calls this first: a libloom_c of another ABI
        // version must be refused before its functions are called with this one's meaning.
        internal static void CheckVersion()
        {
            if (versionChecked) return;
            int version = loom_c_api_version();
            if (version != ApiVersion)
                throw new InvalidOperationException(string.Format(
                    "libloom_c implements C API version {0}; this Cntk.Core.Managed.dll was built " +
                    "for version {1}: use the libloom_c.so built with it", version, ApiVersion));
            versionChecked = true;
        }
    }

    // The native handles: a SafeHandle frees its object exactly once, from Dispose or from the
    // finalizer, and cannot be freed while a P/Invoke call is using it.
    internal sealed class ModelHandle : SafeHandle
    {
        internal ModelHandle(IntPtr handle) : base(IntPtr.Zero, true) { SetHandle(handle); }
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }
        protected override bool ReleaseHandle() { return Native.loom_model_free(handle) == Native.Ok; }
    }

    internal sealed class ValueHandle : SafeHandle
    {
        internal ValueHandle(IntPtr handle) : base(IntPtr.Zero, true) { SetHandle(handle); }
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }
        protected override bool ReleaseHandle() { return Native.loom_value_free(handle) == Native.Ok; }
    }
}
