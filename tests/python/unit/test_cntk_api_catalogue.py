"""Every name of CNTK 2.7's Python API (../shared/CNTK-API.md, one table a module) at CNTK's
module path in Loom, and every name CNTK's `cntk/__init__.py` re-exports at the top level, except
the names still to come, listed here: a name that Loom gains must leave the list (the test fails
until it does), and a name that disappears fails the test.

A table row names a module-level name (`Trainer`), a member of the class named by the row above
it (`.train_minibatch`) or a member of a named class (`Parameter.asarray`); a row may join
several names with `/`."""
import importlib
import pathlib
import re

import pytest

import loom

API = pathlib.Path(__file__).resolve().parents[4] / 'shared' / 'CNTK-API.md'

# CNTK's section -> the Loom module where its names are (CNTK's module, cntk -> loom).
SECTIONS = {
    'cntk.ops': 'loom.ops',
    'cntk.ops.sequence': 'loom.ops.sequence',
    'cntk.ops.functions': 'loom.ops.functions',
    'cntk.variables': 'loom.variables',
    'cntk.axis': 'loom.axis',
    'cntk.core': 'loom.core',
    'cntk.losses': 'loom.losses',
    'cntk.metrics': 'loom.metrics',
    'cntk.layers': 'loom.layers',
    'cntk.learners': 'loom.learners',
    'cntk.io': 'loom.io',
    'cntk.train': 'loom.train',
    'cntk.eval': 'loom.eval',
    'cntk.logging': 'loom.logging',
    'cntk.random': 'loom.random',
    'cntk.initializer': 'loom.initializer',
    'cntk.device': 'loom.device',
    'cntk.default_options': 'loom.default_options',
    'cntk.debugging': 'loom.debugging',
    'cntk.internal': 'loom.internal',
    'cntk.misc': 'loom.misc',
}
# Names a section's table lists that CNTK keeps in a submodule of the section's module.
SUBMODULE = {('cntk.io', n): 'loom.io.transforms' for n in ('crop', 'scale', 'mean', 'color')}
# The sections `cntk/__init__.py` star-imports (cntk.train's includes cntk.train.distributed),
# and the classes it imports by name.
TOP_LEVEL_SECTIONS = ['cntk.core', 'cntk.ops', 'cntk.device', 'cntk.train', 'cntk.eval',
                      'cntk.learners', 'cntk.losses', 'cntk.metrics', 'cntk.initializer',
                      'cntk.default_options']
TOP_LEVEL_CLASSES = ['Variable', 'Parameter', 'Constant', 'Axis', 'Function']
# The operator rows of cntk.variables: the methods behind them, on Variable and Function.
OPERATORS = ['__add__', '__radd__', '__sub__', '__rsub__', '__mul__', '__rmul__', '__truediv__',
             '__rtruediv__', '__matmul__', '__rmatmul__', '__neg__', '__abs__', '__getitem__',
             '__eq__', '__hash__']

# Out of scope (loom/ops/README.md and docs/decisions.md say why): ops CNTK ran only on GPUs
# and their converter, speech lattices and binary MLFs, and downloading CNTK's samples.
OUT_OF_SCOPE = {'optimized_rnnstack', 'convert_optimized_rnnstack',
                'lattice_sequence_with_softmax', 'LatticeDeserializer',
                'HTKMLFBinaryDeserializer', 'install_samples'}

# Still missing (docs/TODO.md): none now; a name added here must be on its issue's list.
NOT_YET = {}


def _rows(section):
    """The names of a section's table rows, members qualified by their class."""
    text = API.read_text()
    body = text.split(f'## `{section}`', 1)[1].split('\n## ', 1)[0]
    names, owner = [], None
    for row in re.findall(r'^\| `([^`]+)` \|', body, re.M):
        parts = [n.strip() for n in re.split('[/,]', row)]
        if not re.match(r'^\.?[A-Za-z_][\w.]*$', parts[0]):
            continue  # operators: OPERATORS
        qualifier = ''  # `cntk_py.a / b`: b is cntk_py.b
        for name in parts:
            if name.startswith('.'):
                names.append(f'{owner}{name}')
                continue
            if name.endswith('()'):  # `len()`: the owner's __len__
                names.append(f'{owner}.__{name[:-2]}__')
                continue
            if '.' in name:
                qualifier = name.split('.')[0] + '.'
            elif qualifier:
                name = qualifier + name
            names.append(name)
            owner = name.split('.')[0]
    return names


def _find(path, name):
    """path's module (imported: a star import may shadow a submodule's attribute, as
    cntk.default_options the function shadows the module), then name's attributes."""
    try:
        obj = importlib.import_module(path)
    except ImportError:
        return None
    for part in name.split('.'):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _missing(section):
    missing = set()
    for name in _rows(section):
        if name.split('.')[-1] in OUT_OF_SCOPE:
            continue
        if _find(SUBMODULE.get((section, name), SECTIONS[section]), name) is None:
            missing.add(name)
    return missing


def _check(section, missing):
    not_yet = NOT_YET.get(section, set())
    assert missing - not_yet == set(), f'{section}: missing, not listed as not yet'
    assert not_yet - missing == set(), f'{section}: present now: take off NOT_YET'


pytestmark = pytest.mark.skipif(not API.exists(), reason='../shared/CNTK-API.md is not here')


@pytest.mark.parametrize('section', sorted(SECTIONS))
def test_every_cntk_name_is_at_cntks_path_or_listed_as_not_yet(section):
    assert _rows(section), section
    _check(section, _missing(section))


def test_the_top_level_has_what_cntk_reexports():
    missing = set()
    for section in TOP_LEVEL_SECTIONS:
        for name in _rows(section):
            if '.' not in name and name not in OUT_OF_SCOPE and not hasattr(loom, name):
                missing.add(name)
    missing |= {n for n in TOP_LEVEL_CLASSES if not hasattr(loom, n)}
    missing |= {n for n in _rows('cntk') if n not in OUT_OF_SCOPE and _find('loom', n) is None}
    _check('cntk', missing)


def test_variables_and_functions_have_cntks_operators():
    missing = {f'{cls.__name__}.{op}' for cls in (loom.Variable, loom.Function)
               for op in OPERATORS if not hasattr(cls, op)}
    _check('operators', missing)
