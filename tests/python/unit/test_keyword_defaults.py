"""Keyword defaults are CNTK 2.7's and come from C++ (docs/decisions.md, keyword defaults written
once): each test reads the default a function exposes (a Python function's signature, or the
signature line pybind11 writes at the top of a C++ binding's docstring), so a changed C++
constant or options field shows here."""
import ast
import inspect

import pytest

import loom as C
from loom.logging import graph

MODEL_FORMAT = C.ops.functions.ModelFormat


def _split(params):
    """pybind11's parameter list split at its top-level commas."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(params):
        depth += ch in '[(<'
        depth -= ch in '])>'
        if ch == ',' and depth == 0:
            parts.append(params[start:i])
            start = i + 1
    return parts + [params[start:]]


def _default_value(text):
    """A default as pybind11 writes it: a literal's repr, or an enum member's
    <ModelFormat.CNTKv2: 0>."""
    if text.startswith('<ModelFormat.'):
        return getattr(MODEL_FORMAT, text[len('<ModelFormat.'):].split(':')[0])
    return ast.literal_eval(text)


def defaults(f):
    """{argument: default} of f as it exposes them."""
    try:
        return {n: p.default for n, p in inspect.signature(f).parameters.items()
                if p.default is not p.empty}
    except ValueError:  # a C++ binding: pybind11's signature line
        line = f.__doc__.splitlines()[0]
        found = {}
        for part in _split(line[line.index('(') + 1:line.rindex(') ->')]):
            if ' = ' in part:
                name, text = part.split(' = ', 1)
                found[name.split(':')[0].strip()] = _default_value(text.strip())
        return found


# (function, {argument: CNTK 2.7's default}).
CNTK_DEFAULTS = [
    (C.metrics.classification_error, {'axis': -1, 'topN': 1}),
    (C.ops.batch_normalization, {'normalization_time_constant': 5000, 'blend_time_constant': 0,
                                 'epsilon': 0.00001}),
    (C.losses.nce_loss, {'num_samples': 32, 'allow_duplicates': True}),
    (C.ops.convolution_transpose, {'reduction_rank': 1, 'max_temp_mem_size_in_samples': 0}),
    (C.ops.sequence.past_value, {'time_step': 1}),
    (C.ops.sequence.future_value, {'time_step': 1}),
    (C.ops.sequence.delay, {'time_step': 1}),
    (C.ops.sequence.unpack, {'no_mask_output': False}),
    (C.Function.save, {'format': MODEL_FORMAT.CNTKv2}),
    (C.Function.load, {'format': MODEL_FORMAT.CNTKv2}),
    (C.load_model, {'format': MODEL_FORMAT.CNTKv2}),
    (C.Function.find_by_name, {'depth': 0}),
    (C.Function.find_all_with_name, {'depth': 0}),
    (graph.depth_first_search, {'depth': 0}),
    (graph.find_by_name, {'depth': 0}),
    (graph.find_all_with_name, {'depth': 0}),
    (graph.find_by_uid, {'depth': 0}),
    (graph.get_node_outputs, {'depth': 0}),
    (C.train.distributed.data_parallel_distributed_learner,
     {'distributed_after': 0, 'num_quantization_bits': 32,
      'use_async_buffered_parameter_update': False}),
    (C.learners.adadelta, {'rho': 0.95, 'epsilon': 1e-8}),
    (C.learners.adam, {'epsilon': 1e-8, 'adamax': False}),
    (C.learners.adagrad, {'need_ave_multiplier': True}),
    (C.learners.rmsprop, {'need_ave_multiplier': True}),
    (C.learners.minibatch_size_schedule, {'epoch_size': 1}),
    (C.layers.Stabilizer, {'steepness': 4}),
    (C.layers.Delay, {'T': 1}),
    (C.io.HTKMLFDeserializer.__init__, {'phoneBoundaries': False}),
    (C.logging.ProgressWriter.__init__, {'first': 0, 'test_first': 0, 'distributed_first': 0}),
    (C.logging.ProgressPrinter.__init__, {'first': 0, 'test_first': 0, 'distributed_first': 0}),
    (C.logging.TensorBoardProgressWriter.__init__, {'log_dir': '.'}),
    (C.io.StreamInformation.__init__, {'defines_mb_size': False}),
    (C.debugging.start_profiler, {'dir': 'profiler', 'sync_gpu': True}),
] + [
    (f, {'gaussian_noise_injection_std_dev': 0.0})
    for f in (C.learners.sgd, C.learners.momentum_sgd, C.learners.nesterov, C.learners.adagrad,
              C.learners.adadelta, C.learners.adam, C.learners.fsadagrad, C.learners.rmsprop)
] + [
    # CNTK's scale=DefaultParamInitScale; its ranks default to a sentinel that a parameter
    # resolves to DefaultParamInitOutputRank 1 and DefaultParamInitFilterRank 0, which Loom's
    # initializers take at once (docs/decisions.md).
    (f, {'scale': 1, 'output_rank': 1, 'filter_rank': 0})
    for f in (C.glorot_uniform, C.glorot_normal, C.he_uniform, C.he_normal, C.xavier)
]


@pytest.mark.parametrize('f, expected', CNTK_DEFAULTS,
                         ids=[f'{f.__qualname__}' for f, _ in CNTK_DEFAULTS])
def test_keyword_defaults_are_cntks(f, expected):
    # Values and types: CNTK's signature writes steepness=4, not 4.0.
    found = defaults(f)
    assert {n: (found.get(n, 'no default'), type(found.get(n))) for n in expected} == \
        {n: (v, type(v)) for n, v in expected.items()}


def test_defaults_reads_cpp_bindings_and_python_functions():
    # The helper itself: a pybind11 signature line's literals and enum members, and a Python
    # signature.
    assert defaults(C.Function.save) == {'format': MODEL_FORMAT.CNTKv2,
                                          'use_external_files_to_store_parameters': False}
    assert defaults(lambda x, y=2, name='': x) == {'y': 2, 'name': ''}
