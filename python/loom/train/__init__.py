"""Training (CNTK's cntk.train): Trainer, Evaluator, training_session and its configs."""
from loom._loom.train import (CheckpointConfig, CrossValidationConfig, DataUnit,  # noqa: F401
                              Frequency, TestConfig, TrainingSession, training_session)
from loom._loom.learners import minibatch_size_schedule  # noqa: F401
from loom import _loom
from loom.train import distributed  # noqa: F401
from loom.train.distributed import *  # noqa: F401,F403 (as CNTK's cntk.train)


def _as_list(x):
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


class Trainer(_loom.train.Trainer):
    """Trainer(model, criterion, parameter_learners, progress_writers=None): criterion is a
    Function with outputs (loss, metric), a tuple (loss, metric) or a loss; model may be None;
    learners and writers are one object or a list."""

    def __init__(self, model, criterion, parameter_learners, progress_writers=None):
        super().__init__(model, criterion, _as_list(parameter_learners),
                         _as_list(progress_writers))

    def _argument_map(self, arguments):
        """CNTK's rule: data that is not a dict feeds the one input of model and criterion."""
        if isinstance(arguments, dict):
            return arguments
        inputs = set()
        for f in (self.loss_function, self.model, self.evaluation_function):
            if f is not None:
                inputs |= set(f.arguments if hasattr(f, 'arguments') else f.owner.arguments)
        if len(inputs) != 1:
            raise ValueError(f'the minibatch data is not a dict, and the trainer has '
                             f'{len(inputs)} inputs: give {{input: data}}')
        return {inputs.pop(): arguments}

    def train_minibatch(self, arguments, outputs=None, device=None, is_sweep_end=None):
        return super().train_minibatch(self._argument_map(arguments), outputs, device,
                                       is_sweep_end)

    def test_minibatch(self, arguments, device=None):
        return super().test_minibatch(self._argument_map(arguments), device)


class Evaluator(_loom.eval.Evaluator):
    """Evaluator(eval_function, progress_writers=None)."""

    def __init__(self, eval_function, progress_writers=None):
        super().__init__(eval_function, _as_list(progress_writers))
