// CNTK's Function, for evaluation: a loaded model (one loom_model handle) with its arguments and
// outputs. Dispose frees the handle; a Function not disposed is freed by the finalizer.
using System;
using System.Collections.Generic;
using System.Linq;

namespace CNTK
{
    public sealed class Function : IDisposable
    {
        private readonly ModelHandle model;
        private readonly Variable[] arguments, outputs;
        private Variable[] nodes;  // the outputs of every function of the graph, read when needed
        // The outputs this Function stands for: all of the model's, or the one FindByName chose.
        private readonly Variable[] ownOutputs;

        private Function(IntPtr handle, Variable[] outputSubset)
        {
            model = new ModelHandle(handle);
            arguments = ReadVariables(Native.KindArgument);
            outputs = ReadVariables(Native.KindOutput);
            ownOutputs = outputSubset ?? outputs;
        }

        public static Function Load(string filepath, DeviceDescriptor computeDevice,
                                    ModelFormat format = ModelFormat.CNTKv2)
        {
            Native.CheckVersion();
            IntPtr handle;
            Native.Check(Native.loom_model_load(Native.ToUtf8(filepath), out handle));
            return new Function(handle, null);
        }

        public static Function Load(byte[] modelBuffer, DeviceDescriptor computeDevice,
                                    ModelFormat format = ModelFormat.CNTKv2)
        {
            if (modelBuffer == null) throw new ArgumentNullException("modelBuffer");
            Native.CheckVersion();
            IntPtr handle;
            Native.Check(Native.loom_model_load_from_bytes(modelBuffer, modelBuffer.LongLength, out handle));
            return new Function(handle, null);
        }

        // The inputs the model takes, in the model's order.
        public IList<Variable> Arguments { get { return Array.AsReadOnly(arguments); } }
        // CNTK's Inputs also list parameters and constants; a loaded model here exposes only
        // the inputs the caller feeds.
        public IList<Variable> Inputs { get { return Arguments; } }
        public IList<Variable> Outputs { get { return Array.AsReadOnly(ownOutputs); } }

        public Variable Output
        {
            get
            {
                if (ownOutputs.Length != 1)
                    throw new InvalidOperationException(string.Format(
                        "Function.Output: the function has {0} outputs ({1}); use Outputs",
                        ownOutputs.Length, string.Join(", ", ownOutputs.Select(o => o.Name))));
                return ownOutputs[0];
            }
        }

        // Another Function over the same model for another thread: the clone shares the
        // parameters (see ParameterCloningMethod), its variables equal this one's.
        public Function Clone(ParameterCloningMethod parameterCloneMethod = ParameterCloningMethod.Share)
        {
            IntPtr handle;
            Native.Check(Native.loom_model_clone(Handle, out handle));
            return new Function(handle, ownOutputs);
        }

        // The function of that name in the model's graph (a model output, else an inner
        // function's output, CNTK's intermediate layer) as a Function whose Output it is, or
        // null when no function has it.
        public Function FindByName(string name, bool nestedSearchInsideBlockFunction = false)
        {
            Variable[] found = outputs.Where(o => o.Name == name).ToArray();
            if (found.Length == 0) found = Nodes.Where(o => o.Name == name).ToArray();
            if (found.Length == 0) return null;
            if (found.Length > 1)
                throw new ArgumentException(string.Format(
                    "Function.FindByName('{0}'): {1} functions have that name; use their Uid", name, found.Length));
            IntPtr handle;
            Native.Check(Native.loom_model_clone(Handle, out handle));
            return new Function(handle, found);
        }

        // Computes the outputs that `outputs` names from the arguments' values in `inputs`. An
        // output whose Value is null gets a new Value; one that has a Value gets the result in
        // place of its data (its shape must match).
        public void Evaluate(IDictionary<Variable, Value> inputs, IDictionary<Variable, Value> outputs,
                             DeviceDescriptor computeDevice)
        {
            if (inputs == null) throw new ArgumentNullException("inputs");
            if (outputs == null) throw new ArgumentNullException("outputs");
            ModelHandle self = Handle;
            var inputIndices = new long[inputs.Count];
            var inputHandles = new ValueHandle[inputs.Count];
            int n = 0;
            foreach (KeyValuePair<Variable, Value> pair in inputs)
            {
                Variable argument = Find(arguments, pair.Key, "argument");
                if (pair.Value == null)
                    throw new ArgumentException("Function.Evaluate: the input value of " + pair.Key + " is null");
                inputIndices[n] = argument.Index;
                inputHandles[n++] = pair.Value.Handle;
            }
            Variable[] wanted = outputs.Keys.ToArray();
            // The model's outputs by index; with an inner function's output among them, all by
            // node index.
            bool byNode = wanted.Any(v => v != null && v.IsNode && !this.outputs.Contains(v));
            long[] outputIndices = wanted.Select(v => (long)(byNode ? NodeIndex(v) : Find(this.outputs, v, "output").Index)).ToArray();
            var results = new IntPtr[wanted.Length];
            var rawInputs = new IntPtr[inputHandles.Length];
            var added = new bool[inputHandles.Length];
            try
            {
                // The input handles stay alive (not freed by another thread's Dispose) for the call.
                for (int i = 0; i < inputHandles.Length; ++i)
                {
                    inputHandles[i].DangerousAddRef(ref added[i]);
                    rawInputs[i] = inputHandles[i].DangerousGetHandle();
                }
                if (byNode)
                    Native.Check(Native.loom_model_evaluate_nodes(self, inputIndices.Length, inputIndices, rawInputs,
                                                                  outputIndices.Length, outputIndices, results));
                else
                    Native.Check(Native.loom_model_evaluate_by_index(self, inputIndices.Length, inputIndices, rawInputs,
                                                                     outputIndices.Length, outputIndices, results));
            }
            finally
            {
                for (int i = 0; i < inputHandles.Length; ++i)
                    if (added[i]) inputHandles[i].DangerousRelease();
            }
            var made = results.Select(r => new Value(new ValueHandle(r))).ToArray();
            for (int i = 0; i < wanted.Length; ++i)
            {
                Value given = outputs[wanted[i]];
                if (given == null)
                    outputs[wanted[i]] = made[i];
                else
                    given.TakeDataOf(made[i], wanted[i]);
            }
        }

        public void Dispose() { model.Dispose(); }

        private ModelHandle Handle
        {
            get
            {
                if (model.IsClosed)
                    throw new ObjectDisposedException("Function", "This Function was disposed; load the model again or use another clone");
                return model;
            }
        }

        private static Variable Find(Variable[] list, Variable v, string what)
        {
            if (v == null) throw new ArgumentNullException(what);
            if (v.Index < list.Length && list[v.Index].Equals(v)) return list[v.Index];
            Variable same = list.FirstOrDefault(x => x.Equals(v));  // e.g. a node that is an output
            if (same != null) return same;
            throw new ArgumentException(string.Format("Function.Evaluate: {0} is not an {1} of this model; its {1}s: {2}",
                                                      v, what, string.Join(", ", list.Select(x => x.ToString()))));
        }

        private Variable[] Nodes
        {
            get
            {
                if (nodes == null) nodes = ReadVariables(Native.KindNode);
                return nodes;
            }
        }

        // A model output or node output's index among the node outputs (by uid).
        private int NodeIndex(Variable v)
        {
            if (v == null) throw new ArgumentNullException("output");
            Variable[] all = Nodes;
            for (int i = 0; i < all.Length; ++i)
                if (all[i].Equals(v)) return i;
            throw new ArgumentException(string.Format(
                "Function.Evaluate: {0} is not an output of a function of this model", v));
        }

        private Variable[] ReadVariables(int k)
        {
            VariableKind kind = k == Native.KindArgument ? VariableKind.Input : VariableKind.Output;
            long count;
            Native.Check(Native.loom_model_variable_count(model, k, out count));
            var list = new Variable[count];
            for (int i = 0; i < count; ++i)
            {
                IntPtr name, uid;
                int dtype, flags;
                long rank;
                Native.Check(Native.loom_model_variable_name(model, k, i, out name));
                Native.Check(Native.loom_model_variable_uid(model, k, i, out uid));
                Native.Check(Native.loom_model_variable_dtype(model, k, i, out dtype));
                Native.Check(Native.loom_model_variable_flags(model, k, i, out flags));
                Native.Check(Native.loom_model_variable_rank(model, k, i, out rank));
                var dims = new long[rank];
                Native.Check(Native.loom_model_variable_shape(model, k, i, dims, rank));
                list[i] = new Variable(kind, i, k == Native.KindNode, Native.FromUtf8(name),
                                       Native.FromUtf8(uid), NDShape.FromLoom(dims), (DataType)dtype, flags);
            }
            return list;
        }
    }
}
