"""Progress writers (CNTK's cntk.logging). Subclass ProgressWriter and define any of
on_write_training_update(samples, updates, aggregate_loss, aggregate_metric) (each a (first,
last) pair), on_write_test_update(samples, updates, aggregate_metric),
on_write_training_summary(samples, updates, summaries, aggregate_loss, aggregate_metric,
elapsed_milliseconds), on_write_test_summary(samples, updates, summaries, aggregate_metric,
elapsed_milliseconds) and write(key, value) to receive progress."""
from loom._loom import ProgressPrinter, ProgressWriter, TensorBoardProgressWriter  # noqa: F401
