// A native user function library for the tests of loom/graph/native_user_function.h (built as
// a MODULE library that links Loom itself): "Scale" multiplies its float32 input by the
// attribute "scale", as CNTK's native user function examples were built and loaded at run time.
#include <cstddef>

#include "loom/core/error.h"
#include "loom/graph/user_function.h"

namespace {

class Scale : public loom::UserFunction {
 public:
  explicit Scale(double scale) : scale_(float(scale)) {}
  std::string op_name() const override { return "test.NativeScale"; }
  loom::Value forward(const std::vector<loom::Value>& inputs, bool, std::any&) const override {
    return scaled(inputs[0]);
  }
  std::vector<std::optional<loom::Value>> backward(const std::any&, const loom::Value& gradient,
                                                   const std::vector<bool>&) const override {
    return {scaled(gradient)};
  }

 private:
  loom::Value scaled(const loom::Value& v) const {
    loom::NDArrayView out = v.data().deep_clone();
    float* d = const_cast<float*>(out.data<float>());
    for (size_t i = 0, n = out.shape().total_size(); i < n; ++i) d[i] *= scale_;
    return loom::Value(out, v.is_sequence(), v.mask());
  }
  float scale_;
};

}  // namespace

extern "C" loom::UserFunction* create_scale_function(const loom::Variable* operands,
                                                     size_t num_operands,
                                                     const loom::Dictionary* attributes,
                                                     const char*) {
  if (num_operands != 1 || operands[0].dtype() != loom::DataType::Float32) return nullptr;
  const double scale = attributes->contains("scale") ? attributes->get<double>("scale") : 1.0;
  return new Scale(scale);
}
