"""Walking a model's graph (CNTK's cntk.logging.graph). ``depth`` is how many levels of blocks
(as_block) a walk enters: at 0 a block is one node, -1 enters every block. Loom's layers are
composites of primitives, which every walk sees."""
import os
import shutil
import subprocess

from loom._loom.ops.functions import Function
from loom._loom.variables import Variable
from loom._loom.logging.graph import (depth_first_search, find_all_with_name,  # noqa: F401
                                      find_by_name, find_by_uid, get_node_outputs)


def _dot(root):
    """The graph in Graphviz's DOT language: functions as boxes, leaves as ellipses."""
    lines = ['digraph loom {', '  rankdir=BT;']
    nodes = depth_first_search(root, lambda n: True)
    for n in nodes:
        if isinstance(n, Function):
            label = f'{n.op_name}\\n{n.name}' if n.name else n.op_name
            lines.append(f'  "{n.uid}" [shape=box, label="{label}"];')
            for i in n.inputs:
                source = i.owner.uid if i.is_output else i.uid
                lines.append(f'  "{source}" -> "{n.uid}";')
        else:
            label = f'{n.name or n.uid}\\n{n.shape}'
            lines.append(f'  "{n.uid}" [shape=ellipse, label="{label}"];')
    lines.append('}')
    return '\n'.join(lines) + '\n'


def plot(root, filename=None):
    """The graph's description in DOT; given a filename, also written there: .dot as text,
    .png, .pdf or .svg rendered by Graphviz's `dot` program (an error naming it if absent)."""
    if isinstance(root, Variable):
        root = root.owner
    description = _dot(root)
    if filename is None:
        return description
    suffix = os.path.splitext(filename)[1].lower()
    if suffix == '.dot':
        with open(filename, 'w') as f:
            f.write(description)
        return description
    if suffix not in ('.png', '.pdf', '.svg'):
        raise ValueError(f'plot: {filename}: the suffix must be .dot, .png, .pdf or .svg')
    dot = shutil.which('dot')
    if dot is None:
        raise RuntimeError(f'plot: writing {filename} needs Graphviz\'s dot program '
                           '(apt-get install graphviz); a .dot file needs nothing')
    subprocess.run([dot, '-T' + suffix[1:], '-o', filename], input=description, text=True,
                   check=True)
    return description


__all__ = ['depth_first_search', 'find_all_with_name', 'find_by_name', 'find_by_uid',
           'get_node_outputs', 'plot']
