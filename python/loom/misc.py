"""CNTK's cntk.misc: converting the functions of a graph. The walk is at depth 0, as CNTK's: a
block is converted whole or not at all, Loom's layers (composites) function by function;
convert_optimized_rnnstack is left out with optimized_rnnstack (a cuDNN-only op)."""
from loom._loom.ops.functions import CloneMethod
from loom._loom.ops import combine
from loom._loom.logging.graph import depth_first_search


def convert(root_func, filter, converter):
    """A copy of root_func's graph (parameters shared) in which each function for which
    filter(function) is true is replaced by converter(function), one at a time; a converter
    that makes more functions to convert is an error."""
    functions = depth_first_search(root_func, filter)
    for i in range(len(functions)):
        current = depth_first_search(root_func, filter)
        if len(current) > len(functions):
            raise RuntimeError('The conversion adds another possible conversion(s). Stopping '
                               'infinite conversions.')
        # A converted function leaves the list, or (converted into one filter still takes)
        # stays at its place.
        target = current[i] if len(current) == len(functions) else current[0]
        converted = converter(target)
        if target.output not in root_func.outputs:
            root_func = root_func.clone(CloneMethod.share, {target.output: converted.output})
        elif len(root_func.outputs) > 1:
            root_func = combine([converted.output if o == target.output else o
                                 for o in root_func.outputs])
        else:
            root_func = converted
    return root_func


__all__ = ['convert']
