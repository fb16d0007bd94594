"""Parameter initializers (CNTK's cntk.initializer)."""
from loom._loom.initializer import (Initializer, bilinear, constant_initializer,  # noqa: F401
                                    glorot_normal, glorot_uniform, he_normal, he_uniform,
                                    initializer_with_rank, normal, truncated_normal, uniform,
                                    xavier, zeros)
