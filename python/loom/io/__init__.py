"""Readers (CNTK's cntk.io): deserializers for CTF text and IDX files, in-memory arrays, and
MinibatchSource, which cuts their data into minibatches."""
from loom._loom import (FULL_DATA_SWEEP, INFINITELY_REPEAT, CTFDeserializer,  # noqa: F401
                        IDXDeserializer, IDXStreamDef, MinibatchData, MinibatchSource,
                        MinibatchSourceFromData, StreamDef, StreamInformation)


class StreamDefs(dict):
    """Stream name -> definition, in the order given: StreamDefs(xy=StreamDef(...), ...)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None
