// CNTK's NDShape: dimensions in CNTK's order, the fastest-changing (contiguous) one first. Loom
// and loom_c.h list them the other way round, so the binding reverses a shape whenever it
// crosses the C API; the elements' order in memory is the same either way.
using System;
using System.Collections.Generic;
using System.Linq;

namespace CNTK
{
    public sealed class NDShape : IEquatable<NDShape>
    {
        public static readonly int InferredDimension = -1;  // loom_c.h's LOOM_DIM_INFERRED
        public static readonly int FreeDimension = -3;      // LOOM_DIM_FREE

        private readonly int[] dims;
        // Computed once (an NDShape does not change): Loom's order, whether a dimension is
        // inferred or free, the number of elements.
        private readonly long[] loomDims;
        private readonly bool inferred, free;
        private readonly int totalSize;

        public NDShape() : this(new int[0]) { }
        public NDShape(int numAxes) : this(Enumerable.Repeat(InferredDimension, numAxes).ToArray()) { }
        public NDShape(int numAxes, int dimension) : this(Enumerable.Repeat(dimension, numAxes).ToArray()) { }

        private NDShape(int[] dimensions)
        {
            foreach (int d in dimensions)
                if (d < 0 && d != InferredDimension && d != FreeDimension)
                    throw new ArgumentException(string.Format(
                        "NDShape dimension {0}: a dimension is a size (>= 0), InferredDimension or FreeDimension", d));
            dims = dimensions;
            loomDims = new long[dims.Length];
            int size = 1;
            for (int i = 0; i < dims.Length; ++i)
            {
                loomDims[i] = dims[dims.Length - 1 - i];
                inferred |= dims[i] == InferredDimension;
                free |= dims[i] == FreeDimension;
                size = unchecked(size * dims[i]);
            }
            totalSize = size;
        }

        public static NDShape CreateNDShape(IEnumerable<int> dimensions) { return new NDShape(dimensions.ToArray()); }
        public static implicit operator NDShape(int[] dimensions) { return new NDShape((int[])dimensions.Clone()); }

        public int Rank { get { return dims.Length; } }
        public IList<int> Dimensions { get { return Array.AsReadOnly(dims); } }
        public int this[int axis] { get { return dims[axis]; } }
        public bool IsUnknown { get { return false; } }
        public bool HasInferredDimension { get { return inferred; } }
        public bool HasFreeDimension { get { return free; } }
        public bool HasUnboundDimension { get { return inferred || free; } }

        public int TotalSize
        {
            get
            {
                if (inferred || free)
                    throw new InvalidOperationException("NDShape " + this +
                        " has an inferred or free dimension: its total size is not known before data are given");
                return totalSize;
            }
        }

        public NDShape SubShape(int beginAxisId = 0) { return SubShape(beginAxisId, Rank); }
        public NDShape SubShape(int beginAxisId, int endAxisId)
        {
            if (beginAxisId < 0 || endAxisId > Rank || beginAxisId > endAxisId)
                throw new ArgumentException(string.Format(
                    "NDShape.SubShape({0}, {1}) of {2}: axes must satisfy 0 <= begin <= end <= rank", beginAxisId, endAxisId, this));
            return new NDShape(dims.Skip(beginAxisId).Take(endAxisId - beginAxisId).ToArray());
        }

        public NDShape AppendShape(NDShape shape) { return new NDShape(dims.Concat(shape.dims).ToArray()); }

        // Loom's order (loom_c.h's dims arrays) to CNTK's and back.
        internal static NDShape FromLoom(long[] loomDims)
        {
            return new NDShape(loomDims.Reverse().Select(d => checked((int)d)).ToArray());
        }
        // Loom's order: the shape's own array, which the caller only reads (the C API does).
        internal long[] ToLoom() { return loomDims; }

        public bool Equals(NDShape other) { return other != null && dims.SequenceEqual(other.dims); }
        public override bool Equals(object obj) { return Equals(obj as NDShape); }
        public override int GetHashCode() { return dims.Aggregate(17, (h, d) => h * 31 + d); }
        public static bool operator ==(NDShape a, NDShape b) { return ReferenceEquals(a, b) || (!ReferenceEquals(a, null) && a.Equals(b)); }
        public static bool operator !=(NDShape a, NDShape b) { return !(a == b); }
        // CNTK's AsString: "[2 x 1]".
        public override string ToString() { return "[" + string.Join(" x ", dims) + "]"; }
        public string AsString() { return ToString(); }
    }
}
