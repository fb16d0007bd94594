#include "loom/ops/custom_proxy.h"

#include <cstdint>

#include "loom/graph/op.h"
#include "loom/ops/op_schema.h"

namespace loom {

namespace {

class CustomProxyOp : public OpDef {
 public:
  const char* name() const override { return "CustomProxyOp"; }
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::none(), .runs_step_by_step = false};
  }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const NDShape& shape = a.get<NDShape>("output_shape");
    LOOM_CHECK(!shape.has_inferred() && !shape.has_free(), ShapeError, "custom_proxy_op '",
               a.get<std::string>("custom_op"), "': output_shape ", shape.to_string(),
               " must be known (the proxy cannot infer it)");
    return {
        {shape, attribute_dtype(a.at("output_data_type")), common_dynamic_axes(name(), in), false}};
  }

  void forward(OpCall& call) const override { refuse(call.attributes); }
  void backward(OpCall& call, size_t, Tensor&, bool) const override { refuse(call.attributes); }

 private:
  [[noreturn]] static void refuse(const Dictionary& a) {
    throw StateError("custom_proxy_op '" + a.get<std::string>("custom_op") +
                     "' stands for an op that ONNX consumers compute; it has no computation in "
                     "Loom (nor in CNTK): export the model to ONNX to run it");
  }
};

const CustomProxyOp kCustomProxy;

}  // namespace

Function custom_proxy_op(const std::vector<Variable>& operands, const std::string& custom_op,
                         const NDShape& output_shape, DataType output_data_type,
                         const std::string& name) {
  return make_primitive(kCustomProxy, operands,
                        Dictionary({{"custom_op", custom_op},
                                    {"output_shape", output_shape},
                                    {"output_data_type", dtype_attribute(output_data_type)}}),
                        name);
}

std::vector<OpSchema> custom_proxy_schemas() {
  // Bound by hand in Python (its operands are varargs after the attributes), through _apply_op.
  OpSchema s{&kCustomProxy, 0, SIZE_MAX};
  s.params = {{"custom_op", ParamType::String},
              {"output_shape", ParamType::Shape},
              {"output_data_type", ParamType::DataType}};
  // ONNX's Sub over two operands: their order matters.
  s.conformance = {
      {.inputs = {{NDShape{3}}, {NDShape{3}}},
       .attributes = Dictionary({{"custom_op", "Sub"},
                                 {"output_shape", NDShape{3}},
                                 {"output_data_type", dtype_attribute(DataType::Float32)}}),
       .sequences = false,
       .stands_for = "Minus"}};
  return {s};
}

}  // namespace loom
