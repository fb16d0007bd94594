// A native user function library for the tests of loom/graph/native_user_function.h (built as
// a MODULE library that links Loom itself): "Scale" multiplies its float32 input by the
// attribute "scale", and "ScaleAndSquare" gives two outputs, that product and the input's
// square, as CNTK's native user function examples were built and loaded at run time.
#include <cstddef>

#include "loom/core/error.h"
#include "loom/graph/user_function.h"

namespace {

// The Value with f applied to every element of v (and the element of w at the same place).
template <typename F>
loom::Value map(const loom::Value& v, F f, const loom::Value* w = nullptr) {
  loom::NDArrayView out = v.data().deep_clone();
  float* d = const_cast<float*>(out.data<float>());
  const float* e = w ? w->data().data<float>() : nullptr;
  for (size_t i = 0, n = out.shape().total_size(); i < n; ++i) d[i] = f(d[i], e ? e[i] : 0.0f);
  return loom::Value(out, v.is_sequence(), v.mask());
}

class Scale : public loom::UserFunction {
 public:
  explicit Scale(double scale) : scale_(float(scale)) {}
  std::string op_name() const override { return "test.NativeScale"; }
  std::vector<loom::Value> forward(const std::vector<loom::Value>& inputs,
                                   const std::vector<loom::Variable>&, bool,
                                   std::any&) const override {
    return {scaled(inputs[0])};
  }
  std::vector<std::optional<loom::Value>> backward(const std::any&,
                                                   const std::vector<loom::Value>& gradients,
                                                   const std::vector<bool>&) const override {
    return {scaled(gradients[0])};
  }

 protected:
  loom::Value scaled(const loom::Value& v) const {
    return map(v, [s = scale_](float x, float) { return x * s; });
  }
  float scale_;
};

// Outputs x * scale and x * x; its state is x.
class ScaleAndSquare : public Scale {
 public:
  using Scale::Scale;
  std::string op_name() const override { return "test.NativeScaleAndSquare"; }
  std::vector<loom::OutputSpec> infer_outputs(
      const std::vector<loom::Variable>& inputs) const override {
    const loom::Variable& x = inputs[0];
    return {{x.shape(), x.dtype(), x.dynamic_axes()}, {x.shape(), x.dtype(), x.dynamic_axes()}};
  }
  std::vector<loom::Value> forward(const std::vector<loom::Value>& inputs,
                                   const std::vector<loom::Variable>&, bool,
                                   std::any& state) const override {
    state = inputs[0];
    return {scaled(inputs[0]), map(inputs[0], [](float x, float) { return x * x; })};
  }
  // d/dx = scale * g0 + 2 x g1.
  std::vector<std::optional<loom::Value>> backward(const std::any& state,
                                                   const std::vector<loom::Value>& gradients,
                                                   const std::vector<bool>&) const override {
    const loom::Value& x = std::any_cast<const loom::Value&>(state);
    const loom::Value twice_x_g1 = map(
        x, [](float a, float g1) { return 2 * a * g1; }, &gradients[1]);
    return {map(
        scaled(gradients[0]), [](float a, float b) { return a + b; }, &twice_x_g1)};
  }
};

double scale_of(const loom::Dictionary* attributes) {
  return attributes->contains("scale") ? attributes->get<double>("scale") : 1.0;
}

}  // namespace

extern "C" loom::UserFunction* create_scale_function(const loom::Variable* operands,
                                                     size_t num_operands,
                                                     const loom::Dictionary* attributes,
                                                     const char*) {
  if (num_operands != 1 || operands[0].dtype() != loom::DataType::Float32) return nullptr;
  return new Scale(scale_of(attributes));
}

extern "C" loom::UserFunction* create_scale_and_square_function(const loom::Variable* operands,
                                                                size_t num_operands,
                                                                const loom::Dictionary* attributes,
                                                                const char*) {
  if (num_operands != 1 || operands[0].dtype() != loom::DataType::Float32) return nullptr;
  return new ScaleAndSquare(scale_of(attributes));
}
