// CNTK's native user function example library (its Cntk.ExtensibilityExamples): the op
// "NativeUserTimesOp", made by the factory CreateUserTimesFunction, multiplies a matrix W
// [k, n] (the left operand, without dynamic axes) into each sample x [k] of the right operand:
// y = x W, of shape [n] on x's dynamic axes. Its gradient flows to W only (CNTK's refused the
// right operand's). Built as a MODULE library named as CNTK's, beside Loom's Python package, so
// that CNTK's programs register it by CNTK's name:
//   register_native_user_function('NativeUserTimesOp', 'Cntk.ExtensibilityExamples-2.7',
//                                 'CreateUserTimesFunction')
// Float32 operands only.
#include <cstddef>

#include "loom/core/error.h"
#include "loom/graph/user_function.h"

namespace {

class UserTimes : public loom::UserFunction {
 public:
  std::string op_name() const override { return "NativeUserTimesOp"; }

  std::vector<loom::OutputSpec> infer_outputs(
      const std::vector<loom::Variable>& in) const override {
    const loom::Variable &w = in[0], &x = in[1];
    LOOM_CHECK(w.shape().rank() == 2 && !w.has_batch_axis() && x.shape().rank() == 1 &&
                   x.shape()[0] == w.shape()[0],
               loom::ShapeError, op_name(), ": expects a matrix [k, n] and samples [k], not ",
               w.describe(), " and ", x.describe());
    return {{loom::NDShape{w.shape()[1]}, x.dtype(), x.dynamic_axes()}};
  }

  // The state is x, which W's gradient needs.
  std::vector<loom::Value> forward(const std::vector<loom::Value>& in,
                                   const std::vector<loom::Variable>&, bool,
                                   std::any& state) const override {
    const loom::Value &w = in[0], &x = in[1];
    state = x;
    const size_t k = w.sample_shape()[0], n = w.sample_shape()[1];
    const size_t rows = x.data().shape().total_size() / k;  // padding too: dropped when packed
    const float* a = x.data().data<float>();
    const float* b = w.data().data<float>();
    loom::NDShape shape = x.data().shape();
    shape = shape.sub_shape(0, shape.rank() - 1).append(loom::NDShape{n});
    loom::NDArrayView y(loom::DataType::Float32, shape);
    float* out = y.data<float>();
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < k; ++i)
        for (size_t j = 0; j < n; ++j) out[r * n + j] += a[r * k + i] * b[i * n + j];
    return {loom::Value(y, x.is_sequence(), x.mask())};
  }

  // dW[i, j] = sum over samples of x[i] g[j] (the padding's gradients are zeros).
  std::vector<std::optional<loom::Value>> backward(const std::any& state,
                                                   const std::vector<loom::Value>& roots,
                                                   const std::vector<bool>& wanted) const override {
    LOOM_CHECK(!wanted[1], loom::ArgumentError, op_name(),
               " gives no gradient for its right operand (as CNTK's example)");
    const loom::Value& x = std::any_cast<const loom::Value&>(state);
    const loom::Value& g = roots[0];
    const size_t n = g.sample_shape()[0], k = x.sample_shape()[0];
    const size_t rows = x.data().shape().total_size() / k;
    const float* a = x.data().data<float>();
    const float* d = g.data().data<float>();
    loom::NDArrayView dw(loom::DataType::Float32, loom::NDShape{1, k, n});
    float* out = dw.data<float>();
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < k; ++i)
        for (size_t j = 0; j < n; ++j) out[i * n + j] += a[r * k + i] * d[r * n + j];
    return {loom::Value(dw, false), std::nullopt};
  }
};

}  // namespace

extern "C" loom::UserFunction* CreateUserTimesFunction(const loom::Variable* operands,
                                                       size_t num_operands, const loom::Dictionary*,
                                                       const char*) {
  if (num_operands != 2 || operands[0].dtype() != loom::DataType::Float32 ||
      operands[1].dtype() != loom::DataType::Float32)
    return nullptr;
  return new UserTimes();
}
