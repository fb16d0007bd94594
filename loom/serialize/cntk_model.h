// CNTK's own model files (docs/cntk-formats.md): CNTK 2.x's v2 format (a protocol buffer of
// CNTK.proto's Dictionary) and cntk.exe's v1 legacy format (the "BCN" computation-network
// stream). load_model (model_file.h) recognises both by content.
//
// Both readers meet in one place, as in CNTK (whose v1 loader maps legacy nodes to v2 ops,
// BackCompat.cpp): a v2 file is parsed into a Dictionary in CNTK's v2 schema (the keys and op
// numbers CNTK's Serialization.cpp and PrimitiveFunction write; shapes in CNTK's C++ order; an
// Axis is a map {static_axis_idx, name, is_ordered_dynamic_axis}), a v1 file is translated into
// the same schema, and one builder turns that Dictionary into a Loom Function.
//
// The schema, as function_from_cntk_dictionary reads it (docs/cntk-formats.md has the ops):
//   value types: CNTK's Bool -> bool, Int -> int64_t, SizeT -> uint64_t (the builder takes
//     either integer type wherever CNTK writes one), Float and Double -> double, String ->
//     std::string, NDShape -> NDShape in CNTK's C++ order (column-major: the reverse of Loom's
//     and of CNTK's Python order; CNTK's sentinels kept: -1 inferred, -2 unknown, -3 free),
//     Axis -> DictionaryMap {"static_axis_idx": int64 (a static axis in C++ order, negative from
//     the end; 2147483647 a dynamic axis, 2147483646 all static axes, 2147483645 unknown axes,
//     2147483644 the end of the static axes (Reshape's endAxis), 2147483643 all axes), "name":
//     string ("defaultDynamicAxis", "defaultBatchAxis", or a named sequence axis),
//     "is_ordered_dynamic_axis": bool}, Vector -> DictionaryVector, Dictionary -> DictionaryMap,
//     NDArrayView -> loom::NDArrayView in LOOM's order: the shape reversed (row-major), the values
//     exactly as CNTK stores them (column-major in C++'s shape is row-major in the reversed one),
//     float32 or float64 only (float16 read as float32).
//   composite (the top): "type": "CompositeFunction" (optional), "uid", "name" (optional),
//     "root": the uid of the function whose outputs are the model's, "inputs": a vector of
//     variables, "primitive_functions": a vector of functions (any order: the builder sorts).
//   variable: "uid", "name" (optional), "kind": 0 input, 2 parameter, 3 constant,
//     4 placeholder; "data_type": 1 float, 2 double (4 float16: float), 0 unknown (untyped
//     placeholder); "shape": NDShape (C++ order); "dynamic_axis": a vector of Axis maps,
//     innermost first as CNTK lists them ([defaultDynamicAxis, defaultBatchAxis] for a
//     sequence input, [defaultBatchAxis] for a plain one, [] for parameters and constants);
//     "is_sparse", "needs_gradient": bool (optional, false); "value": NDArrayView (Loom's
//     order, see above) for parameters and constants. A placeholder whose uid is the output
//     uid of a function ("<function uid>_Output_<k>") stands for that output: it closes a
//     recurrent loop once the graph is built.
//   function: "type": "PrimitiveFunction" (optional), "uid", "name" (optional), "op": CNTK's
//     PrimitiveOpType number, "inputs": a vector of uids (variables, or outputs of functions,
//     which are named "<function uid>_Output_<k>"), "attributes": DictionaryMap of CNTK's
//     attribute keys (e.g. Times' "outputRank", Slice's "axis"/"beginIndex"/"endIndex",
//     PastValue's "offset"). Inputs in the v2 primitive's operand order, which is CNTK's C++
//     API's (Times(W, x): W first; CrossEntropyWithSoftmax, ClassificationError and Logistic:
//     prediction, then labels, where cntk.exe's v1 nodes take the labels first; Clip: x, min,
//     max; PastValue: x, then the initial state). A block (op 57)
//     adds "block_function_op_name" (the layer: "Dense"), "block_function_composite":
//     {"root": uid of the block's inner root function, "uid"}, and
//     "block_function_composite_arguments_map_keys"/"_values": the block's placeholders and
//     the uids they are bound to; the block's inner functions are listed in
//     "primitive_functions" too, reading the placeholders; its outputs are its root's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "loom/core/dictionary.h"
#include "loom/graph/function.h"

namespace loom {

enum class CntkFormat { None, V2, V1 };

// Which of CNTK's formats bytes start with (None: neither; the bytes may be anything else).
CntkFormat cntk_format_of(std::span<const uint8_t> bytes);

// A v2 file's protocol buffer as a Dictionary in CNTK's v2 schema. A DataError naming the file
// (name), what was expected and where (byte offset or dictionary key) for damaged, truncated or
// foreign bytes.
Dictionary cntk_v2_dictionary(std::span<const uint8_t> bytes, const std::string& name);

// A v1 file translated into the same schema (a CompositeFunction dictionary). A DataError naming
// the file, what was expected and where for damaged bytes; an UnsupportedError-style DataError
// naming the node and its type for a v1 node type Loom cannot map.
Dictionary cntk_v1_dictionary(std::span<const uint8_t> bytes, const std::string& name);

// The Loom Function a CompositeFunction dictionary in CNTK's v2 schema describes (where names
// the file in messages: "'model.dnn'"): parameters become Parameters, constants Constants,
// primitives keep CNTK's uids and names, blocks become layers (their parameters the layer's,
// Function::parameter("Dense.W")), and the result is the root function (a composite of the
// block's name when the root is a block). A DataError naming the place in the dictionary, and
// for a function its uid, name and op, for anything it cannot build (an op Loom cannot map).
// CNTK's recurrent LSTM loops become Loom's fused recurrence (cntk_recurrence.h) unless
// fuse_recurrences is false (the graph exactly as the file has it).
Function function_from_cntk_dictionary(const Dictionary& composite, const std::string& where,
                                       bool fuse_recurrences = true);

// CNTK's PrimitiveOpType name of an op number ("Times" for 31; "op <n>" past the last).
std::string cntk_op_type_name(int64_t op);
// The op numbers function_from_cntk_dictionary maps to Loom ops, ascending.
std::vector<int64_t> cntk_mapped_op_types();

// The model in bytes, whichever of CNTK's formats it is in (CntkFormat::None: an ArgumentError).
Function load_cntk_model_from_bytes(std::span<const uint8_t> bytes, const std::string& name);

}  // namespace loom
