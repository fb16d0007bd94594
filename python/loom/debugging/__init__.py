"""CNTK's cntk.debugging: debug_model, dump_function/dump_signature, checked mode, node timing,
trace levels, force_deterministic and the profiler, over Loom's executor
(loom/graph/debugging.h)."""
import warnings

from loom import _loom
from loom.debugging.debug import (DEBUG_USAGE, debug_model,  # noqa: F401
                                  save_as_legacy_model, set_checked_mode,
                                  set_computation_network_trace_level, set_node_timing)
from loom.debugging.profiler import (disable_profiler, enable_profiler,  # noqa: F401
                                     start_profiler, stop_profiler)


def force_deterministic(seed):
    '''
    Force most of the computation nodes to run deterministically.

    Args:
        seed (int): set the random seed for all random ops in the graph and readers.
    '''
    warnings.warn("RNN based nodes don't run deterministically yet.", Warning)
    _loom.cntk_py.set_fixed_random_seed(seed)
    _loom.cntk_py.force_deterministic_algorithms()


def dump_signature(root, tag=None):
    '''
    Debug helper that prints the signature of a Function.
    '''
    print(str(root))


def _graph_nodes(root):
    # CNTK's depth_first_search(root.root_function, lambda x: not an output variable, depth=-1):
    # every function, blocks and what is inside them (a layer's call is a block), then the
    # leaves, once each.
    if not isinstance(root, _loom.ops.functions.Function):
        if not root.is_output:
            return [root]
        root = root.owner
    return _loom.logging.graph.depth_first_search(
        root.root_function,
        lambda n: not (isinstance(n, _loom.variables.Variable) and n.is_output), -1)


def dump_function(root, tag=None):
    '''
    Debug helper that prints the signature of a Function and then every node of its graph: op,
    name (or a made-up letter sequence), inputs and outputs with their dynamic axes and shapes.
    '''
    names = dict()

    def make_name(n):  # a letter sequence
        if n < 26:
            return chr(n + ord('a'))
        return make_name(n // 26) + make_name(n % 26)

    def name_it(item):
        if item.name != '':
            return item.name
        if item not in names:
            names[item] = make_name(len(names))
        return names[item]

    axis_names = dict()

    def name_axis(axis):
        actual_name = axis.name
        if actual_name in axis_names:
            return axis_names[actual_name]
        if actual_name == "UnknownAxes":
            name = "?"
        elif actual_name == "defaultBatchAxis":
            name = "b*"
        else:
            name = make_name(len(axis_names) + 12) + "*"
            print("  Axis", actual_name, "==", name)
        axis_names[actual_name] = name
        return name

    def type_spec(var):
        s = "[" + ",".join([name_axis(axis) for axis in var.dynamic_axes]) + "]" \
            if var.dynamic_axes else ''
        return s + str(var.shape)

    def print_item(item):
        name = name_it(item)
        sep, inputs = '', ''
        if isinstance(item, _loom.ops.functions.Function):
            op_name = item.op_name
            shape = '(' + ', '.join([name_it(output) + ':' + type_spec(output)
                                     for output in item.outputs]) + ')'
            inputs = '(' + ', '.join([name_it(input) + ':' + type_spec(input)
                                      for input in item.inputs]) + ')'
            sep = '-> '
        elif item.is_constant:
            op_name = "Constant"
            shape = type_spec(item)
        elif item.is_parameter:
            op_name = "Parameter"
            shape = type_spec(item)
        else:
            op_name = "Placeholder" if item.is_placeholder else \
                "Input" if item.is_input else "Variable"
            shape = type_spec(item)
            name = name + " " + item.uid
        print('  {:20} {:30} {} {}{}'.format(op_name, name, inputs, sep, shape))

    dump_signature(root, tag)
    for item in _graph_nodes(root):
        print_item(item)


__all__ = ['force_deterministic', 'dump_signature', 'dump_function', 'DEBUG_USAGE',
           'save_as_legacy_model', 'set_checked_mode', 'set_computation_network_trace_level',
           'set_node_timing', 'debug_model', 'start_profiler', 'stop_profiler',
           'enable_profiler', 'disable_profiler']
