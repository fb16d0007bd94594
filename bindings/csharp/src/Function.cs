// CNTK's Function, for evaluation: a loaded model (one loom_model handle) with its arguments and
// outputs. Dispose frees the handle; a Function not disposed is freed by the finalizer.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Runtime.CompilerServices;

[assembly: InternalsVisibleTo("EvalBench")]

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
        public unsafe void Evaluate(IDictionary<Variable, Value> inputs, IDictionary<Variable, Value> outputs,
                                    DeviceDescriptor computeDevice)
        {
            if (inputs == null) throw new ArgumentNullException("inputs");
            if (outputs == null) throw new ArgumentNullException("outputs");
            // The indices and raw handles the C API takes: on the stack unless there are many.
            int count = inputs.Count + outputs.Count;
            if (count <= 256)
            {
                long* indices = stackalloc long[count];
                IntPtr* handles = stackalloc IntPtr[count];
                Evaluate(inputs, outputs, indices, handles);
            }
            else
            {
                fixed (long* indices = new long[count])
                fixed (IntPtr* handles = new IntPtr[count])
                    Evaluate(inputs, outputs, indices, handles);
            }
        }

        public void Dispose() { model.Dispose(); }

        // Evaluate with room for the arguments' and outputs' indices and handles: the inputs'
        // first, then the outputs'.
        private unsafe void Evaluate(IDictionary<Variable, Value> inputs, IDictionary<Variable, Value> outputs,
                                     long* indices, IntPtr* handles)
        {
            ModelHandle self = Handle;
            int numInputs = inputs.Count, numOutputs = outputs.Count;
            var inputHandles = new ValueHandle[numInputs];
            int n = 0;
            // A Dictionary's own enumerator is a struct; through the interface it is boxed.
            var dictionary = inputs as Dictionary<Variable, Value>;
            if (dictionary != null)
                foreach (KeyValuePair<Variable, Value> pair in dictionary) Input(pair, n++, indices, inputHandles);
            else
                foreach (KeyValuePair<Variable, Value> pair in inputs) Input(pair, n++, indices, inputHandles);
            var wanted = new Variable[numOutputs];
            outputs.Keys.CopyTo(wanted, 0);
            // The model's outputs by index; with an inner function's output among them, all by
            // node index.
            bool byNode = false;
            foreach (Variable v in wanted)
                byNode |= v != null && v.IsNode && Array.IndexOf(this.outputs, v) < 0;
            long* outputIndices = indices + numInputs;
            IntPtr* results = handles + numInputs;
            for (int i = 0; i < numOutputs; ++i)
                outputIndices[i] = byNode ? NodeIndex(wanted[i]) : Find(this.outputs, wanted[i], "output").Index;
            // The model and input handles stay alive (not freed by another thread's Dispose)
            // for the call: one reference each, taken here rather than by the marshaller.
            bool modelAdded = false;
            int added = 0;
            try
            {
                self.DangerousAddRef(ref modelAdded);
                for (; added < numInputs; ++added)
                {
                    bool success = false;
                    inputHandles[added].DangerousAddRef(ref success);
                    handles[added] = inputHandles[added].DangerousGetHandle();
                }
                IntPtr raw = self.DangerousGetHandle();
                Native.Check(byNode
                    ? Native.loom_model_evaluate_nodes(raw, numInputs, indices, handles, numOutputs, outputIndices, results)
                    : Native.loom_model_evaluate_by_index(raw, numInputs, indices, handles, numOutputs, outputIndices, results));
            }
            finally
            {
                while (added > 0) inputHandles[--added].DangerousRelease();
                if (modelAdded) self.DangerousRelease();
            }
            var made = new Value[numOutputs];
            for (int i = 0; i < numOutputs; ++i) made[i] = new Value(new ValueHandle(results[i]));
            for (int i = 0; i < numOutputs; ++i)
            {
                Value given = outputs[wanted[i]];
                if (given == null)
                    outputs[wanted[i]] = made[i];
                else
                    given.TakeDataOf(made[i], wanted[i]);
            }
        }

        private unsafe void Input(KeyValuePair<Variable, Value> pair, int n, long* indices, ValueHandle[] handles)
        {
            Variable argument = Find(arguments, pair.Key, "argument");
            if (pair.Value == null)
                throw new ArgumentException("Function.Evaluate: the input value of " + pair.Key + " is null");
            indices[n] = argument.Index;
            handles[n] = pair.Value.Handle;
        }

        // The loom_model handle, for the bench, which calls the C API on a clone of it beside
        // this Function (EvalBench.exe sees the internals: InternalsVisibleTo above).
        internal IntPtr Address { get { return Handle.DangerousGetHandle(); } }

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
