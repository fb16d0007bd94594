"""Parameter initializers (CNTK's cntk.initializer)."""
from loom._loom import (Initializer, bilinear, constant_initializer, glorot_normal,  # noqa: F401
                        glorot_uniform, he_normal, he_uniform, initializer_with_rank, normal,
                        truncated_normal, uniform, xavier, zeros)
