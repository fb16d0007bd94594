"""Progress writers (CNTK's cntk.logging). Subclass ProgressWriter and define any of
on_write_training_update(samples, updates, aggregate_loss, aggregate_metric) (each a (first,
last) pair), on_write_test_update(samples, updates, aggregate_metric),
on_write_training_summary(samples, updates, summaries, aggregate_loss, aggregate_metric,
elapsed_milliseconds), on_write_test_summary(samples, updates, summaries, aggregate_metric,
elapsed_milliseconds) and write(key, value) to receive progress."""
from loom._loom.logging import (ProgressPrinter, ProgressWriter,  # noqa: F401
                                TensorBoardProgressWriter)
from loom.logging import graph  # noqa: F401
from loom.logging.graph import *  # noqa: F401,F403
from loom.logging.progress_print import *  # noqa: F401,F403

from enum import Enum, unique

from loom import _loom


@unique
class TraceLevel(Enum):
    '''
    Describes different logging verbosity levels.
    '''

    Error = 0
    Warning = 1
    Info = 2

    def __eq__(self, other):
        if isinstance(other, TraceLevel):
            return self.value == other.value
        return self.value == other

    def __ne__(self, other):
        return not (self == other)

    __hash__ = Enum.__hash__


def set_trace_level(value):
    '''
    Specifies global logging verbosity level (Info also turns on the computation network's
    trace, as CNTK's).

    Args:
        value (:class:`~loom.logging.TraceLevel` or int): required verbosity level.
    '''
    _loom.logging.set_trace_level(value.value if isinstance(value, TraceLevel) else int(value))


def get_trace_level():
    '''
    Returns current logging verbosity level (an int, as CNTK's; it compares equal to the
    TraceLevel member).
    '''
    return _loom.logging.get_trace_level()
