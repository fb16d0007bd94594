"""CNTK's cntk.layers.blocks: the building blocks of the other layers (the recurrent steps, the
stabilizer, identity, forward declarations) and the deprecated ``BlockFunction`` decorator,
at the module path CNTK's scripts name. They are the ones ``loom.layers`` has."""
from loom.layers import (GRU, LSTM, ForwardDeclaration, RNNStep, Stabilizer,
                         UntestedBranchError, identity)
from loom.ops.functions import BlockFunction  # deprecated in CNTK

__all__ = ['BlockFunction', 'ForwardDeclaration', 'GRU', 'LSTM', 'RNNStep', 'Stabilizer',
           'UntestedBranchError', 'identity']
