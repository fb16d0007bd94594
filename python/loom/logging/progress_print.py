"""CNTK's cntk.logging.progress_print helpers over Loom's progress writers."""
import functools
import operator

from loom._loom.logging import ProgressWriter


class TrainingSummaryProgressCallback(ProgressWriter):
    """Calls callback(epoch_index, epoch_loss, epoch_metric, epoch_samples) at each training
    summary (the loss and metric are the summary's sums over its samples, as in CNTK). As in
    CNTK, the summaries decide the epochs: epoch_size is accepted and not read."""

    def __init__(self, epoch_size, callback):
        super().__init__()
        self._callback = callback

    def on_write_training_summary(self, samples, updates, summaries, aggregate_loss,
                                  aggregate_metric, elapsed_milliseconds):
        self._callback(summaries - 1, aggregate_loss, aggregate_metric, samples)


def log_number_of_parameters(model, trace_level=0):
    """Prints "Training N parameters in M parameter tensors." (each tensor's shape too when
    trace_level > 0)."""
    parameters = model.parameters
    if any(d == -1 for p in parameters for d in p.shape):
        total = 'so far unspecified number of'
    else:
        total = sum(functools.reduce(operator.mul, p.shape, 1) for p in parameters)
    print(f'Training {total} parameters in {len(parameters)} parameter tensors.')
    if trace_level > 0:
        print()
        for p in parameters:
            print(f'\t{p.shape}')


__all__ = ['TrainingSummaryProgressCallback', 'log_number_of_parameters']
