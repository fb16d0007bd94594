"""CNTK's cntk.debugging.debug: debug_model and the runtime switches (checked mode, trace level,
node timing).

debug_model(z) returns a copy of z's graph with a debug node after every node (Loom's Debug op,
an identity that calls back into Python). When the copy is evaluated or trained, each debug node
stops with CNTK's command line::

    =================================== forward  ===================================
    p: ParameterTensor[2] with uid 'Parameter4'
    [CNTK forward] >>> n

At every stop: the pass (forward or backward), the node (its Function, or the input, parameter
or constant), and its uid.
"""
import sys
from collections import defaultdict

from loom import _loom

DEBUG_USAGE = '''\
    Commands:
        n - execute the next node
        n <number> - execute the next <number> nodes

        u f - execute until forward pass (like 'n' when already in forward pass)
        u b - execute until backward pass (like 'n' when already in backward pass)
        u name - execute until a node with that name is hit
        u <lambda> - execute until the lambda expression is True. Examples:
                     Until a Times node is hit:
                         lambda arg, node: node.op_name == 'Times'
                     Until a node is hit that has 3 dimensions:
                         lambda arg, node: len(node.shape) == 3
                     Until the variance of the input exceeds 1 (np = numpy):
                         lambda arg, node: np.var(arg) > 1

        c - execute until end
        p - print input (forward) or root gradients (backward)
        d - drop into a pdb shell
        q - quit\
'''


def save_as_legacy_model(root_op, filename):
    '''
    CNTK saved the network of ``root_op`` in CNTK's v1 (legacy) model format. Loom does not
    write that format: this raises NotImplementedError. Save with ``root_op.save(filename)``
    (Loom's model format, read back by ``load_model``), or export ONNX with
    ``loom export MODEL --onnx FILE``.
    '''
    raise NotImplementedError(
        "save_as_legacy_model: Loom does not write CNTK's v1 (legacy) model format; save the "
        "model with root_op.save(%r) (Loom's format, read by loom.load_model) or export it to "
        "ONNX with `loom export MODEL --onnx FILE`" % (filename,))


def set_checked_mode(enable):
    '''
    Checked mode: after every node's forward its value, and after its backward the gradients it
    wrote, are checked for NaN and infinite values; the first bad one raises loom.DataError
    naming the node, its op (and the input whose gradient is bad). Costs a pass over every value.

    Args:
        enable (bool): whether to enable checked mode (with performance impact)
    '''
    _loom.debugging.set_checked_mode(bool(enable))


def set_computation_network_trace_level(level):
    '''
    Set trace level to the computation network. Currently supported values:

       0
         turn off trace
       1
         output nodes' dimensions and some other static info (when an executor plans)
       1000
         output each node's abs sum of elements in its value matrix for every forward/backward
       1000000
         output each node's full matrix for every forward/backward

    Args:
        level (int): trace level
    '''
    _loom.debugging.set_computation_network_trace_level(int(level))


def set_node_timing(enable):
    '''
    Node-timing records per-node average execution time per-minibatch; print it with
    Function/Trainer/Evaluator.print_node_timing().

    Args:
        enable (bool): whether to enable per-node timing
    '''
    _loom.debugging.set_node_timing(bool(enable))


class _DebugState(object):

    def __init__(self, all_nodes):
        self.commands = []
        self.last_pass = '<start>'
        self.all_nodes = all_nodes
        self.name_to_node = defaultdict(lambda: [])
        for n in self.all_nodes:
            self.name_to_node[n.name].append(n)


def _shape(x):
    return [a.shape for a in x] if isinstance(x, list) else x.shape


class _DebugNode(object):
    '''
    The command line of one debug node: what debug_model's node after ``arg`` does when the
    value (forward) or gradient (backward) passes through it.

    Args:
      arg (Function or Variable): the node the debug node follows
      debug_state (:class:`_DebugState`): state shared among all debug nodes
      in_stream: `readline()` is called on it to obtain user input
      out_stream: `write()` and `flush()` are called on it to output debug info
      exit_func (callable): called with an exit code when the user quits
    '''
    PROMPT_FORWARD = '[CNTK forward] >>> '
    PROMPT_BACKWARD = '[CNTK backward] >>> '

    def __init__(self, arg, debug_state, in_stream=sys.stdin, out_stream=sys.stdout,
                 exit_func=sys.exit):
        self.after = arg
        self.debug_state = debug_state
        self._in, self._out = in_stream, out_stream
        self._exit = exit_func

    def _wait_for_input(self, prompt):
        understood = False
        while not understood:
            self._out.write(prompt)
            self._out.flush()
            new_input = self._in.readline().strip()
            if not new_input:
                continue

            if len(new_input) == 1 and new_input in 'bf':
                # CNTK took these as commands no stop understood, and looped forever; here
                # they are 'u b' and 'u f'.
                understood = ['u' + new_input]
            elif len(new_input) == 1 and new_input in 'cdp':
                understood = [new_input]
            elif new_input[0] == 'n':
                if len(new_input) > 1:
                    try:
                        understood = ['n'] * int(new_input[1:])
                    except ValueError:
                        pass
                else:
                    understood = ['n']
            elif new_input[0] == 'u':
                try:
                    what = new_input[1:].strip()
                    if what.startswith('lambda'):
                        import numpy
                        understood = [eval(what, {'np': numpy})]  # the lambdas may use np
                    elif what in self.debug_state.name_to_node:
                        def until_named(arg, n):
                            return n.name == what
                        understood = [until_named]
                    elif "backward".startswith(what):
                        understood = ['ub']
                    elif "forward".startswith(what):
                        understood = ['uf']
                except SyntaxError:
                    understood = False
            elif new_input == 'q':
                self._exit(0)

            if not understood:
                self._out.write(DEBUG_USAGE + '\n')
                self._out.flush()

        return understood

    def _print_status(self, current_pass):
        if current_pass != self.debug_state.last_pass:
            if current_pass == 'f':
                self._out.write('\n')
                self._out.write('=' * 35 + ' forward  ' + '=' * 35 + '\n')
            else:
                self._out.write('=' * 35 + ' backward ' + '=' * 35 + '\n')
            self._out.flush()

        self._out.write("\n%s with uid '%s'\n" % (str(self.after), self.after.uid))
        self._out.flush()

    # One stop: runs the commands until one lets the pass go on. `pass_` is 'f' or 'b'; `until`
    # is the 'u' command that stops in this pass, `other` the one that runs on to the other.
    def _stop(self, pass_, data, print_data):
        self._print_status(pass_)
        prompt = _DebugNode.PROMPT_FORWARD if pass_ == 'f' else _DebugNode.PROMPT_BACKWARD
        here, there = ('uf', 'ub') if pass_ == 'f' else ('ub', 'uf')
        last = 'b' if pass_ == 'f' else 'f'
        done = False
        while not done:
            if not self.debug_state.commands:
                self.debug_state.commands = self._wait_for_input(prompt)
            commands = self.debug_state.commands
            command = commands[-1]
            if command == 'c':
                done = True
            elif isinstance(command, str) and command.startswith('n'):
                if len(command) == 1:
                    commands.pop()
                    done = True
            elif command == here:
                commands.pop()
                if self.debug_state.last_pass == last:
                    # As CNTK's: asks again, with the forward prompt.
                    self.debug_state.commands = self._wait_for_input(
                        _DebugNode.PROMPT_FORWARD)
                else:
                    done = True
            elif command == there:
                done = True
            elif command == 'p':
                print_data()
                commands.pop()
            elif command == 'd':
                if pass_ == 'f':
                    commands.pop()
                import pdb
                pdb.set_trace()
                done = True
            elif callable(command):
                if command(data, self.after):
                    commands.pop()
                else:
                    done = True
        self.debug_state.last_pass = pass_

    def forward(self, argument):
        def print_input():
            self._out.write('Input with shape %s: \n' % str(_shape(argument)))
            self._out.write(str(argument))
            self._out.write('\n')
            self._out.flush()
        self._stop('f', argument, print_input)

    def backward(self, state, root_gradients):
        def print_gradients():
            if state is not None:
                self._out.write('State: %s\n' % str(state))
            self._out.write('Root gradients with shape %s: \n' % str(_shape(root_gradients)))
            self._out.write(str(root_gradients))
            self._out.write('\n')
            self._out.flush()
        self._stop('b', root_gradients, print_gradients)

    def __str__(self):
        return "_DebugNode(after=%s)" % str(self.after)


def debug_model(model, in_stream=sys.stdin, out_stream=sys.stdout, exit_func=sys.exit):
    '''
    debug_model(model, in_stream=sys.stdin, out_stream=sys.stdout, exit_func=sys.exit)

    Returns a copy of the model (sharing its parameters) that has a debug node after every
    node. When the graph is evaluated or trained, those nodes let one inspect the graph with
    the commands of DEBUG_USAGE.

    Args:
      model (root node): root node until which the nodes are to be debugged
      in_stream (object behaving like sys.stdin, default stdin): `readline()`
       will be called on it to obtain user input
      out_stream (object behaving like sys.stdout, default stdout): `write()`
       and `flush()` will be called on it to output debug info to the user
      exit_func (callable, default sys.exit): callable that takes an exit code and is called,
       when the user exits the debugging process

    Returns:
      a clone of the model that has debugging enabled
    '''
    debug_nodes = []

    def on_node(pass_, index, value):
        node = debug_nodes[index]
        if pass_ == 'f':
            node.forward(value)
        else:
            node.backward(None, value)

    debugged, followed = _loom.debugging.debug_graph(model, on_node)
    nodes = [v.owner if v.is_output else v for v in followed]
    state = _DebugState(nodes)
    debug_nodes.extend(_DebugNode(n, state, in_stream, out_stream, exit_func) for n in nodes)
    return debugged


__all__ = ['DEBUG_USAGE', 'save_as_legacy_model', 'set_checked_mode',
           'set_computation_network_trace_level', 'set_node_timing', 'debug_model']
