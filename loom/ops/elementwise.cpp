#include "loom/ops/elementwise.h"

#include "loom/graph/op.h"
#include "loom/ops/op_defs.h"
#include "loom/ops/op_util.h"

namespace loom {

namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

class UnaryElementwiseOp : public OpDef {
 public:
  constexpr UnaryElementwiseOp(const char* name, UnaryOp op) : name_(name), op_(op) {}
  const char* name() const override { return name_; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    return {{in[0].shape(), in[0].dtype(), in[0].dynamic_axes(), false}};
  }

  // Element by element: any layout, as long as input and output share it.
  BlockedInput blocked_input(size_t, const std::vector<Variable>&,
                             const Dictionary&) const override {
    return BlockedInput::LikeOutput;
  }
  bool blocked_output(const std::vector<Variable>&, const Dictionary&,
                      const std::vector<bool>& inputs_blocked) const override {
    return inputs_blocked[0];
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    Tensor& y = *call.output;
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::unary(op_, y.size(), x.ptr<T>(), y.ptr<T>());
    });
  }

  // relu(x) = x > 0 ? x : 0 keeps the order of positive values and maps all others to 0, where
  // its gradient is 0.
  bool moves_behind_max() const override { return op_ == UnaryOp::Relu; }

  // What unary_backward reads: tanh, sigmoid, exp, sqrt and relu (y > 0 where x > 0) the
  // output; log, square and abs the input.
  bool backward_reads_input(size_t) const override {
    return op_ == UnaryOp::Log || op_ == UnaryOp::Square || op_ == UnaryOp::Abs;
  }
  bool backward_reads_output() const override {
    return op_ == UnaryOp::Tanh || op_ == UnaryOp::Sigmoid || op_ == UnaryOp::Exp ||
           op_ == UnaryOp::Sqrt || op_ == UnaryOp::Relu;
  }
  bool writes_over_input(size_t) const override { return true; }
  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const Tensor& y = *call.output;
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::unary_backward(op_, y.size(), call.inputs[0]->ptr<T>(), y.ptr<T>(),
                              call.output_gradient->ptr<T>(), dx.ptr<T>(), accumulate);
    });
  }

 private:
  const char* name_;
  UnaryOp op_;
};

class BinaryElementwiseOp : public OpDef {
 public:
  constexpr BinaryElementwiseOp(const char* name, BinaryOp op) : name_(name), op_(op) {}
  const char* name() const override { return name_; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    DataType dtype = common_dtype(name_, in);
    return {{broadcast_shapes(name_, in), dtype, common_dynamic_axes(name_, in), false}};
  }

  void forward(OpCall& call) const override {
    const Tensor &a = *call.inputs[0], &b = *call.inputs[1];
    Tensor& y = *call.output;
    const size_t rank = op_util::sample_rank(y);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::binary(op_, y.shape.dims(), op_util::aligned_dims(0, a, rank, y.dynamic()),
                      a.ptr<T>(), op_util::aligned_dims(1, b, rank, y.dynamic()), b.ptr<T>(),
                      y.ptr<T>());
    });
  }

  // Sums and differences pass the gradient on; the other ops read both inputs.
  bool backward_reads_input(size_t) const override {
    return op_ != BinaryOp::Plus && op_ != BinaryOp::Minus;
  }
  bool backward_reads_output() const override { return false; }
  bool writes_over_input(size_t) const override { return true; }
  void backward(OpCall& call, size_t index, Tensor& dx, bool accumulate) const override {
    const Tensor &a = *call.inputs[0], &b = *call.inputs[1];
    const Tensor& y = *call.output;
    const size_t rank = op_util::sample_rank(y);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::binary_backward(op_, int(index), y.shape.dims(),
                               op_util::aligned_dims(0, a, rank, y.dynamic()), a.ptr<T>(),
                               op_util::aligned_dims(1, b, rank, y.dynamic()), b.ptr<T>(),
                               call.output_gradient->ptr<T>(), dx.ptr<T>(), accumulate);
    });
  }

 private:
  const char* name_;
  BinaryOp op_;
};

const BinaryElementwiseOp kPlus("Plus", BinaryOp::Plus);
const BinaryElementwiseOp kMinus("Minus", BinaryOp::Minus);
const BinaryElementwiseOp kTimes("ElementTimes", BinaryOp::Times);
const BinaryElementwiseOp kDivide("ElementDivide", BinaryOp::Divide);
const BinaryElementwiseOp kMax("ElementMax", BinaryOp::Max);
const BinaryElementwiseOp kMin("ElementMin", BinaryOp::Min);

const UnaryElementwiseOp kNegate("Negate", UnaryOp::Negate);
const UnaryElementwiseOp kTanh("Tanh", UnaryOp::Tanh);
const UnaryElementwiseOp kSigmoid("Sigmoid", UnaryOp::Sigmoid);
const UnaryElementwiseOp kRelu("ReLU", UnaryOp::Relu);
const UnaryElementwiseOp kExp("Exp", UnaryOp::Exp);
const UnaryElementwiseOp kLog("Log", UnaryOp::Log);
const UnaryElementwiseOp kSqrt("Sqrt", UnaryOp::Sqrt);
const UnaryElementwiseOp kSquare("Square", UnaryOp::Square);
const UnaryElementwiseOp kAbs("Abs", UnaryOp::Abs);

}  // namespace

const OpDef& plus_op() {
  return kPlus;
}
const OpDef& minus_op() {
  return kMinus;
}
const OpDef& element_times_op() {
  return kTimes;
}
const OpDef& element_divide_op() {
  return kDivide;
}
const OpDef& element_max_op() {
  return kMax;
}
const OpDef& element_min_op() {
  return kMin;
}
const OpDef& negate_op() {
  return kNegate;
}
const OpDef& tanh_op() {
  return kTanh;
}
const OpDef& sigmoid_op() {
  return kSigmoid;
}
const OpDef& relu_op() {
  return kRelu;
}
const OpDef& exp_op() {
  return kExp;
}
const OpDef& log_op() {
  return kLog;
}
const OpDef& sqrt_op() {
  return kSqrt;
}
const OpDef& square_op() {
  return kSquare;
}
const OpDef& abs_op() {
  return kAbs;
}

Function plus(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kPlus, {a, b}, {}, name);
}
Function minus(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kMinus, {a, b}, {}, name);
}
Function element_times(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kTimes, {a, b}, {}, name);
}
Function element_divide(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kDivide, {a, b}, {}, name);
}
Function element_max(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kMax, {a, b}, {}, name);
}
Function element_min(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kMin, {a, b}, {}, name);
}

Function negate(const Variable& x, const std::string& name) {
  return make_primitive(kNegate, {x}, {}, name);
}
Function tanh(const Variable& x, const std::string& name) {
  return make_primitive(kTanh, {x}, {}, name);
}
Function sigmoid(const Variable& x, const std::string& name) {
  return make_primitive(kSigmoid, {x}, {}, name);
}
Function relu(const Variable& x, const std::string& name) {
  return make_primitive(kRelu, {x}, {}, name);
}
Function exp(const Variable& x, const std::string& name) {
  return make_primitive(kExp, {x}, {}, name);
}
Function log(const Variable& x, const std::string& name) {
  return make_primitive(kLog, {x}, {}, name);
}
Function sqrt(const Variable& x, const std::string& name) {
  return make_primitive(kSqrt, {x}, {}, name);
}
Function square(const Variable& x, const std::string& name) {
  return make_primitive(kSquare, {x}, {}, name);
}
Function abs(const Variable& x, const std::string& name) {
  return make_primitive(kAbs, {x}, {}, name);
}

Function operator+(const Variable& a, const Variable& b) {
  return plus(a, b);
}
Function operator-(const Variable& a, const Variable& b) {
  return minus(a, b);
}
Function operator*(const Variable& a, const Variable& b) {
  return element_times(a, b);
}
Function operator/(const Variable& a, const Variable& b) {
  return element_divide(a, b);
}
Function operator-(const Variable& a) {
  return negate(a);
}

}  // namespace loom
