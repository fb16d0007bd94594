"""ONNX's backend node tests against Loom's importer: writes the node tests of Debian's
python3-onnx (which ships their generator, not their data) into a temporary folder (those of
ops whose earlier opsets give attributes where later ones take inputs also in that form, and
Resize's also at opset 11), then runs deploy_test's OnnxNodeTests (loom/deploy/onnx_node_tests_test.cpp) on them, which loads each
test of ops Loom imports, evaluates it and compares with ONNX's outputs. docs/onnx.md, "ONNX's
node tests", has the counts."""
import importlib
import os
import pkgutil
import subprocess
import sys
import tempfile
import types
import warnings

# python3-onnx is Debian's: run under Debian's interpreter.
try:
    import onnx
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
    raise
import onnx.backend.test.case.node as node_tests
from onnx import numpy_helper

from example import fail

# The oldest opset Loom reads (loom/deploy/onnx_common.h). ONNX writes some node tests at opsets
# 1 and 6 (Not, Softplus, Softsign, the global poolings; Elu, Selu, HardSigmoid), older than any
# CNTK wrote: where their ops mean the same at 7, they are also written at 7.
LOOM_OPSET = 7


def collect():
    """ONNX's node test cases. Each module's tests are made as it is imported; onnx 1.12's
    bernoulli and castlike use numpy aliases that numpy 1.24 removed, so their modules stop
    early (ops Loom does not import) and the rest are still collected."""
    broken = []
    warnings.simplefilter("ignore")  # the generators' numpy deprecations
    for module in pkgutil.iter_modules(node_tests.__path__):
        try:
            importlib.import_module(f"{node_tests.__name__}.{module.name}")
        except Exception as e:  # a module of ONNX's that numpy broke (see above)
            broken.append(f"{module.name} ({type(e).__name__})")
    if broken:
        print("node test modules that did not finish:", ", ".join(broken))
    return node_tests._NodeTestCases


def older_but_same_at_loom_opset(model):
    """Whether the model is at an opset below Loom's and every node has the definition it would
    have at Loom's opset (its op unchanged since), so that it may be read at that opset."""
    version = min([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")],
                  default=LOOM_OPSET)
    if version >= LOOM_OPSET:
        return False
    try:
        return all(onnx.defs.get_schema(n.op_type, LOOM_OPSET, n.domain).since_version <= version
                   for n in model.graph.node)
    except onnx.defs.SchemaError:
        return False


# Ops whose earlier form has as attributes what later opsets give as inputs (Loom's importer
# reads both: opset_changes in loom/deploy/onnx_import.cpp): the opset of that form, and the
# attribute of each input after the first.
EARLIER_FORMS = {"Clip": (10, ["min", "max"]), "Pad": (10, ["pads", "value"]),
                 "Slice": (9, ["starts", "ends", "axes"]), "TopK": (9, ["k"]),
                 "Squeeze": (12, ["axes"]), "Unsqueeze": (12, ["axes"]),
                 "ReduceSum": (12, ["axes"]), "Split": (12, ["split"])}


def earlier_form(case):
    """The node test of one such op in its earlier form (named test_..._opsetN): the inputs after
    the first become attributes holding the test's data, the outputs stay ONNX's. None where the
    test is of another op, has an input the earlier form lacks (Slice's steps) or is no valid
    model at that opset (onnx.checker: types the earlier form does not take)."""
    nodes = case.model.graph.node
    if len(nodes) != 1 or nodes[0].op_type not in EARLIER_FORMS:
        return None
    opset, attributes = EARLIER_FORMS[nodes[0].op_type]
    if len(nodes[0].input) > 1 + len(attributes):
        return None
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    node, graph = model.graph.node[0], model.graph
    inputs, outputs = case.data_sets[0]
    data = {info.name: value for info, value in zip(graph.input, inputs)}
    for name, attribute in zip(node.input[1:], attributes):
        if name:
            value = data[name]
            value = (float(value) if attribute in ("min", "max", "value") else
                     int(value.reshape(-1)[0]) if attribute == "k" else
                     [int(v) for v in value.reshape(-1)])
            node.attribute.append(onnx.helper.make_attribute(attribute, value))
    del node.input[1:]
    del graph.input[1:]
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = opset
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        return None
    return types.SimpleNamespace(name=f"{case.name}_opset{opset}", model=model,
                                 data_sets=[([inputs[0]], outputs)])


def resize_at_opset11(case):
    """A node test of Resize (ONNX's are at opset 13, where roi and scales may be left out) at
    opset 11, where both are required inputs: an empty tensor where the test leaves one out, as
    models of that opset give them. None for a test of another op."""
    nodes = case.model.graph.node
    if len(nodes) != 1 or nodes[0].op_type != "Resize":
        return None
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    node = model.graph.node[0]
    for k in (1, 2):
        if not node.input[k]:
            node.input[k] = "empty"
    empty = onnx.helper.make_tensor("empty", onnx.TensorProto.FLOAT, [0], [])
    model.graph.initializer.append(empty)
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = 11
    onnx.checker.check_model(model, full_check=True)
    return types.SimpleNamespace(name=f"{case.name}_opset11", model=model,
                                 data_sets=case.data_sets)


def write(case, folder):
    """As onnx/backend/test/cmd_tools.py generate-data writes a node test (a later test of the
    same name replaces an earlier one, as there), plus model_at_opset7.onnx where the test is
    at an older opset that means the same at 7."""
    data = os.path.join(folder, case.name, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    model = case.model
    with open(os.path.join(folder, case.name, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    at7 = os.path.join(folder, case.name, f"model_at_opset{LOOM_OPSET}.onnx")
    if os.path.exists(at7):
        os.remove(at7)
    if older_but_same_at_loom_opset(model):
        newer = onnx.ModelProto()
        newer.CopyFrom(model)
        for o in newer.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = LOOM_OPSET
        with open(at7, "wb") as f:
            f.write(newer.SerializeToString())
    inputs, outputs = case.data_sets[0]
    for kind, values, infos in (("input", inputs, model.graph.input),
                                ("output", outputs, model.graph.output)):
        for j, (value, info) in enumerate(zip(values, infos)):
            if info.type.HasField("tensor_type"):  # Loom reads tensors only
                with open(os.path.join(data, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(value, info.name).SerializeToString())


build_dir = os.path.abspath(sys.argv[1])
with tempfile.TemporaryDirectory(prefix="onnx_node_tests_") as folder:
    cases = collect()
    for case in cases:
        write(case, folder)
    print(f"{len(cases)} node tests of onnx {onnx.__version__} written "
          f"({len(os.listdir(folder))} names)")
    latest = {case.name: case for case in cases}  # a later test of a name replaces an earlier
    earlier = [e for form in (earlier_form, resize_at_opset11)
               for e in map(form, latest.values()) if e]
    for case in earlier:
        write(case, folder)
    print(f"{len(earlier)} of them also written in their op's earlier form")
    proc = subprocess.run([os.path.join(build_dir, "deploy_test"),
                           "--gtest_filter=OnnxNodeTests.*"],
                          env={**os.environ, "LOOM_ONNX_NODE_TESTS": folder}, timeout=300)
    if proc.returncode != 0:
        fail(f"deploy_test's OnnxNodeTests exited with {proc.returncode}")
