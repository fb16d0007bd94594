// CNTK's Variable: an argument or output of a loaded model. Its description is read once from
// the C API when the Function is loaded; a Variable holds no native handle.
using System;

namespace CNTK
{
    public sealed class Variable : IEquatable<Variable>
    {
        internal readonly int Index;  // in the model's argument, output or node output list
        internal readonly bool IsNode;  // from the node outputs (FindByName of an inner function)

        internal Variable(VariableKind kind, int index, bool isNode, string name, string uid,
                          NDShape shape, DataType dataType, int flags)
        {
            Kind = kind;
            Index = index;
            IsNode = isNode;
            Name = name;
            Uid = uid;
            Shape = shape;
            DataType = dataType;
            IsSparse = (flags & Native.FlagSparse) != 0;
            HasSequenceAxis = (flags & Native.FlagSequenceAxis) != 0;
            HasBatchAxis = (flags & Native.FlagBatchAxis) != 0;
            hash = uid.GetHashCode() ^ (int)kind;  // once: a Variable is a dictionary key in every Evaluate
        }

        private readonly int hash;

        public string Name { get; private set; }
        public string Uid { get; private set; }
        // The sample shape (without the sequence and batch axes), in CNTK's order.
        public NDShape Shape { get; private set; }
        public DataType DataType { get; private set; }
        public VariableKind Kind { get; private set; }
        public bool IsSparse { get; private set; }
        public bool IsInput { get { return Kind == VariableKind.Input; } }
        public bool IsOutput { get { return Kind == VariableKind.Output; } }
        public bool IsParameter { get { return false; } }
        public bool IsConstant { get { return false; } }
        public bool IsPlaceholder { get { return false; } }
        // CNTK lists these as DynamicAxes; loom_c.h reports which of the two there are.
        public bool HasSequenceAxis { get; private set; }
        public bool HasBatchAxis { get; private set; }

        // A model's variables, and a clone's, are the same when their uids are: a Variable
        // taken from one handle of a model may be used with any clone of it.
        public bool Equals(Variable other)
        {
            return ReferenceEquals(this, other) || (!ReferenceEquals(other, null) && Kind == other.Kind && Uid == other.Uid);
        }
        public override bool Equals(object obj) { return Equals(obj as Variable); }
        public override int GetHashCode() { return hash; }
        public static bool operator ==(Variable a, Variable b) { return ReferenceEquals(a, b) || (!ReferenceEquals(a, null) && a.Equals(b)); }
        public static bool operator !=(Variable a, Variable b) { return !(a == b); }

        public override string ToString()
        {
            return string.Format("{0}('{1}', {2}, {3}{4})", Kind, Name, Uid, Shape,
                                 HasSequenceAxis ? ", sequence" : "");
        }
        public string AsString() { return ToString(); }
    }
}
