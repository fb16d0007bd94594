"""Readers (CNTK's cntk.io): deserializers for CTF text, IDX files and images (with the
transforms of loom.io.transforms), in-memory arrays, and MinibatchSource, which cuts their data
into minibatches; UserMinibatchSource, the base of a source written in Python
(MinibatchSourceInterface is the base of both)."""
from loom._loom import (FULL_DATA_SWEEP, INFINITELY_REPEAT, CTFDeserializer,  # noqa: F401
                        IDXDeserializer, IDXStreamDef, ImageDeserializer, MinibatchData,
                        MinibatchSource, MinibatchSourceFromData, MinibatchSourceInterface,
                        StreamDef, StreamInformation, UserMinibatchSource)
from loom.io import transforms  # noqa: F401


class StreamDefs(dict):
    """Stream name -> definition, in the order given: StreamDefs(xy=StreamDef(...), ...)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None
