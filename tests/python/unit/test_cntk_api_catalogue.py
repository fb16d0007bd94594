"""Every name of CNTK 2.7's op sections (../shared/CNTK-API.md: cntk.ops, cntk.ops.sequence,
cntk.losses, cntk.metrics, cntk.random) at CNTK's module path in Loom, except the names still
to come, listed here: a name that Loom gains must leave the list (the test fails until it
does), and a name that disappears fails the test."""
import pathlib
import re

import pytest

import loom

API = pathlib.Path(__file__).resolve().parents[4] / 'shared' / 'CNTK-API.md'

# CNTK's section -> the Loom modules where each of its names must be.
SECTIONS = {
    'cntk.ops': ['loom.ops', 'loom'],
    'cntk.ops.sequence': ['loom.ops.sequence', 'loom.sequence'],
    'cntk.losses': ['loom.losses', 'loom'],
    'cntk.metrics': ['loom.metrics', 'loom'],
    'cntk.random': ['loom.random'],
}

# Out of scope (loom/ops/README.md says why): ops CNTK ran only on GPUs, and speech lattices.
OUT_OF_SCOPE = {'optimized_rnnstack', 'lattice_sequence_with_softmax'}

# Still missing: the op catalogue's open work (docs/TODO.md, issue 28).
NOT_YET = {
    'cntk.ops': {
        'as_block', 'output_variable',
    },
    'cntk.ops.sequence': set(),
    'cntk.losses': set(),
    'cntk.metrics': set(),
    'cntk.random': set(),
}


def _names(section):
    """The names of the rows of a section's table (`a / b` rows give several)."""
    text = API.read_text()
    body = text.split(f'## `{section}`', 1)[1].split('\n## ', 1)[0]
    names = []
    for row in re.findall(r'^\| `([^`]+)` \|', body, re.M):
        names += [n.strip() for n in row.split('/')]
    return names


def _module(path):
    module = loom
    for part in path.split('.')[1:]:
        module = getattr(module, part, None)
        if module is None:
            return None
    return module


@pytest.mark.skipif(not API.exists(), reason='../shared/CNTK-API.md is not here')
@pytest.mark.parametrize('section', sorted(SECTIONS))
def test_every_cntk_name_is_at_cntks_path_or_listed_as_not_yet(section):
    names = [n for n in _names(section) if n not in OUT_OF_SCOPE]
    assert names, section
    missing = set()
    for name in names:
        for path in SECTIONS[section]:
            module = _module(path)
            if module is None or not hasattr(module, name):
                missing.add(name)
    assert missing - NOT_YET[section] == set(), f'{section}: missing, not listed as not yet'
    assert NOT_YET[section] - missing == set(), f'{section}: present now: take off NOT_YET'
    assert NOT_YET[section] <= set(names), f'{section}: NOT_YET names CNTK does not have'
