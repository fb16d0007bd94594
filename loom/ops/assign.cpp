#include "loom/ops/assign.h"
#include "loom/ops/op_schema.h"

#include <cstring>

#include "loom/ops/op_util.h"

namespace loom {

namespace {

class AssignOp : public OpDef {
 public:
  const char* name() const override { return "Assign"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    const Variable& ref = in[0];
    const Variable& input = in[1];
    LOOM_CHECK(ref.is_parameter() || ref.is_constant(), ArgumentError,
               "Assign: ref must be a Parameter or a Constant, got ", ref.describe());
    LOOM_CHECK(!input.has_batch_axis(), ShapeError, "Assign: input ", input.describe(),
               " has dynamic axes; assign takes a plain tensor of ref's shape");
    LOOM_CHECK(ref.dtype() == input.dtype(), ShapeError, "Assign: ref ", ref.describe(), " is ",
               to_string(ref.dtype()), " but input ", input.describe(), " is ",
               to_string(input.dtype()));
    if (ref.is_parameter() && ref.shape().has_inferred())
      resolve_parameter_shape(ref, input.shape());
    LOOM_CHECK(ref.shape() == input.shape(), ShapeError, "Assign: ref ", ref.describe(),
               " and input ", input.describe(),
               " have different shapes; assign does not broadcast");
    return {{input.shape(), input.dtype(), {}, false}};
  }

  void forward(OpCall& call) const override {
    // The executor points a parameter's or constant's tensor at the variable's own storage,
    // and every node reading ref reads this same Tensor.
    Tensor& ref = const_cast<Tensor&>(*call.inputs[0]);
    const Tensor& input = *call.inputs[1];
    Tensor& out = *call.output;
    const size_t bytes = ref.size() * size_of(ref.dtype);
    void* storage = ref.data;
    // Readers of ref that run later in this pass (forward and backward) see the old value.
    void* old = call.scratch->ensure(bytes);
    if (bytes) std::memcpy(old, storage, bytes);
    ref.data = old;
    // input may be ref itself: it now reads the snapshot, which storage no longer aliases.
    if (bytes) std::memmove(storage, input.data, bytes);
    // The output is the new value: ref's storage, no second copy.
    out.data = storage;
  }

  void backward(OpCall& call, size_t /*index*/, Tensor& dx, bool accumulate) const override {
    const Tensor& dy = *call.output_gradient;
    dispatch(dy.dtype, [&](auto zero) {
      using T = decltype(zero);
      op_util::copy_or_add(dy.size(), dy.ptr<T>(), dx.ptr<T>(), accumulate);
    });
  }

  // The new value does not depend on ref's old value.
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::only(1)};
  }
};

const AssignOp kAssign;

}  // namespace

std::vector<OpSchema> assign_schemas() {
  OpSchema schema{&kAssign,
                  2,
                  2,
                  "assign",
                  "ops",
                  {{"ref"}, {"input"}},
                  false,
                  "input's value written into ref (a parameter or constant) when evaluated; the "
                  "output is the new value"};
  // A parameter's new value from another.
  schema.conformance = {{.inputs = {{NDShape{2, 3}, false}, {NDShape{2, 3}, false}},
                         .sequences = false,
                         .assigns = true}};
  schema.onnx.none_because = "ONNX's graphs do not write their initializers";
  return {schema};
}

Function assign(const Variable& ref, const Variable& input, const std::string& name) {
  return make_primitive(kAssign, {ref, input}, {}, name);
}

}  // namespace loom
