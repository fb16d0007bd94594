"""CNTK's cntk.debugging.profiler: the performance profiler over Loom's executor. While enabled
it records every node's forward and backward; stop_profiler() writes dir/<time>_summary_.txt
(CNTK's summary report, one row per node and pass) and dir/<time>_detail_.json (the events in
chrome://tracing's format)."""
from loom import _loom


def start_profiler(dir=_loom.debugging.kProfilerDir,
                   sync_gpu=_loom.debugging.default_profiler_sync_gpu,
                   reserve_mem=_loom.debugging.default_profiler_buffer_size):
    '''
    Start profiler to prepare performance statistics gathering. Note that
    the profiler is not enabled after start.

    Args:
        dir: directory for profiler output
        sync_gpu: whether profiler syncs CPU with GPU when timing (Loom runs on the CPU)
        reserve_mem: size in byte for profiler memory reserved (the detail events)
    '''
    _loom.debugging.start_profiler(dir, sync_gpu, reserve_mem)


def stop_profiler():
    '''
    Stop profiler from gathering performance statistics and flush them to file
    '''
    _loom.debugging.stop_profiler()


def enable_profiler():
    '''
    Enable profiler to gather data.
    '''
    _loom.debugging.enable_profiler()


def disable_profiler():
    '''
    Disable profiler from gathering data.
    '''
    _loom.debugging.disable_profiler()


__all__ = ['start_profiler', 'stop_profiler', 'enable_profiler', 'disable_profiler']
