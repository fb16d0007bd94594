// CNTK's custom_proxy_op: a stand-in in a graph for an op that only an ONNX consumer computes.
// It has the output type the caller declares and no computation (evaluating it is a StateError,
// as CNTK's CustomProxyOpNode is not implemented); the ONNX exporter writes it as a node of type
// custom_op over its operands.
#pragma once

#include <string>
#include <vector>

#include "loom/graph/function.h"

namespace loom {

Function custom_proxy_op(const std::vector<Variable>& operands, const std::string& custom_op,
                         const NDShape& output_shape, DataType output_data_type,
                         const std::string& name = "");

}  // namespace loom
