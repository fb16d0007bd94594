// ONNX model files (CNTK's ModelFormat.ONNX): a Function exported as an ONNX ModelProto (opset
// 13) and an ONNX file imported as a Function. The op mapping, the axis conventions and what is
// not supported are in docs/onnx.md.
//
// Loom's samples are row-major, so an ONNX tensor is a Loom value with the batch axis in front:
// an input of shape [28,28] is ONNX's [N,28,28] (N a symbolic dimension), a convolution's
// [C,H,W] sample is ONNX's NCHW. Values without dynamic axes (parameters, constants) keep their
// shapes. A batch of sequences is ONNX's [T, N, sample...] with an int32 input of the
// sequences' lengths; Recurrence(LSTM | GRU | RNNStep) is ONNX's LSTM, GRU or RNN.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "loom/graph/function.h"

namespace loom {

// CNTK's ModelFormat: Loom's own container (loom/serialize/model_file.h) or ONNX.
enum class ModelFormat { Loom, ONNX };
// CNTK's default format (ModelFormat.CNTKv2), which is Loom's own here.
inline constexpr ModelFormat kDefaultModelFormat = ModelFormat::Loom;

// save_model(f, path) and load_model(path) in the given format. ONNX export throws an
// ArgumentError naming the op (and the function) that has no ONNX mapping, and for inputs
// on two different sequence axes or unbound placeholders; an IOError when the file cannot be
// written. ONNX import throws a DataError naming the file and the node for a file that is not ONNX,
// an op Loom does not import, attributes Loom cannot express, or sizes beyond what the file's
// data bounds (docs/onnx.md); no other exception leaves it.
void save_model(const Function& f, const std::string& path, ModelFormat format);
Function load_model(const std::string& path, ModelFormat format);

// How an ONNX file is imported.
struct OnnxImportOptions {
  // Axis 0 of a graph input whose size the file fixes: Loom's batch axis (true: a file exported
  // with a batch of 1 takes any batch), or a static axis of that size (false: the file's tensors
  // as they are, so that ops along axis 0 import; the input then takes exactly that tensor). An
  // axis 0 of no fixed size is always the batch axis (or, with axis 1, the sequence axis).
  bool fixed_axis0_is_batch = true;
};

// The same in memory; name stands for the file in messages.
std::vector<uint8_t> save_onnx_to_bytes(const Function& f);
Function load_onnx_from_bytes(std::span<const uint8_t> bytes, const std::string& name = "<memory>",
                              const OnnxImportOptions& options = {});

// The ONNX op types (of the default domain) the importer reads, sorted.
std::vector<std::string> onnx_imported_op_types();

}  // namespace loom
