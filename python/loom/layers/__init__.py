"""The layers library (CNTK's cntk.layers). An option left out takes the value of the enclosing
``with default_options(...)``; given explicitly, even ``activation=None``, it wins."""
from loom._loom import (GRU, LSTM, AveragePooling, BatchNormalization, Convolution,
                        Convolution1D, Convolution2D, Convolution3D, ConvolutionTranspose, Dense,
                        Dropout, Embedding, Fold, GlobalAveragePooling, GlobalMaxPooling, Identity,
                        LayerNormalization, MaxPooling, Recurrence, RecurrenceFrom, RNNStep,
                        Sequential, Stabilizer)
from loom._loom import DefaultOptions as default_options  # noqa: F401
