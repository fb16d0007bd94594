"""Writes seed 002's convnet on [28, 28] images (as bench/mnist.cpp and bench/c_api_eval.cpp
build it; random weights: the speed does not depend on them) to the path given, for the C#
and Java benchmarks (docs/clients.md).

  PYTHONPATH=build/release/python python3 bindings/csharp/bench/convnet.py /tmp/convnet.cmf
"""
import sys

import loom
from loom.layers import Convolution2D, Dense, Dropout, MaxPooling, Sequential, default_options

if len(sys.argv) != 2:
    sys.exit("usage: convnet.py OUTPUT")
with default_options(activation=loom.relu, pad=False):
    model = Sequential([Convolution2D((5, 5), 32, pad=True, reduction_rank=0),
                        MaxPooling((3, 3), strides=(2, 2)), Convolution2D((3, 3), 48),
                        MaxPooling((3, 3), strides=(2, 2)), Convolution2D((3, 3), 64), Dense(96),
                        Dropout(0.5), Dense(10, activation=None)])
model(loom.input_variable((28, 28), name="features")).save(sys.argv[1])
print("Wrote", sys.argv[1])
