"""Parameter initializers (CNTK's cntk.initializer)."""
from loom._loom import (Initializer, constant_initializer, glorot_normal, glorot_uniform,  # noqa
                        he_normal, he_uniform, normal, uniform, zeros)
