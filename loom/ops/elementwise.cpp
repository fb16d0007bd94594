#include "loom/ops/elementwise.h"

#include "loom/graph/op.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"

namespace loom {

namespace {

using kernels::BinaryOp;
using kernels::TernaryOp;
using kernels::UnaryOp;

// The attribute keys of a unary op's constants (UnaryParams' alpha and beta), or null.
struct UnaryKeys {
  const char* alpha = nullptr;
  const char* beta = nullptr;
};

class UnaryElementwiseOp : public AlignedOpDef {
 public:
  constexpr UnaryElementwiseOp(const char* name, UnaryOp op, UnaryKeys keys = {})
      : name_(name), op_(op), keys_(keys) {}
  const char* name() const override { return name_; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& attributes) const override {
    const kernels::UnaryParams p = params(attributes);
    LOOM_CHECK(op_ != UnaryOp::Softplus || p.alpha != 0, ArgumentError, name_,
               ": steepness must not be 0");
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
    const kernels::UnaryParams p = params(call.attributes);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::unary(op_, y.size(), x.ptr<T>(), y.ptr<T>(), p);
    });
  }

  OpTraits traits(const Dictionary&) const override {
    const kernels::UnaryReads reads = kernels::unary_backward_reads(op_);
    return {.backward_reads_inputs = reads.input ? InputSet::all() : InputSet::none(),
            .backward_reads_output = reads.output,
            .writes_over_inputs = InputSet::all(),
            .output_views_input = op_ == UnaryOp::Copy || op_ == UnaryOp::StopGradient,
            // relu(x) = x > 0 ? x : 0 keeps the order of positive values and maps all others to
            // 0, where its gradient is 0.
            .moves_behind_max = op_ == UnaryOp::Relu};
  }
  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    if (op_ == UnaryOp::Copy && dx.data == call.output_gradient->data) return;  // in place: done
    const Tensor& y = *call.output;
    const kernels::UnaryParams p = params(call.attributes);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::unary_backward(op_, y.size(), call.inputs[0]->ptr<T>(), y.ptr<T>(),
                              call.output_gradient->ptr<T>(), dx.ptr<T>(), accumulate, p);
    });
  }

 private:
  kernels::UnaryParams params(const Dictionary& attributes) const {
    kernels::UnaryParams p;
    if (keys_.alpha) p.alpha = attributes.get<double>(keys_.alpha);
    if (keys_.beta) p.beta = attributes.get<double>(keys_.beta);
    return p;
  }

  const char* name_;
  UnaryOp op_;
  UnaryKeys keys_;
};

class BinaryElementwiseOp : public AlignedOpDef {
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

  OpTraits traits(const Dictionary&) const override {
    return {.backward_reads_inputs =
                kernels::binary_backward_reads_inputs(op_) ? InputSet::all() : InputSet::none(),
            .backward_reads_output = false,
            .writes_over_inputs = InputSet::all()};
  }
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

// Select(condition, if_true, if_false) and Clip(x, min, max), broadcasting as the binary ops.
// Select's condition and Clip's bounds get no gradient (CNTK's).
class TernaryElementwiseOp : public AlignedOpDef {
 public:
  constexpr TernaryElementwiseOp(const char* name, TernaryOp op) : name_(name), op_(op) {}
  const char* name() const override { return name_; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    DataType dtype = common_dtype(name_, in);
    return {{broadcast_shapes(name_, in), dtype, common_dynamic_axes(name_, in), false}};
  }

  void forward(OpCall& call) const override {
    const Tensor &c = *call.inputs[0], &a = *call.inputs[1], &b = *call.inputs[2];
    Tensor& y = *call.output;
    const size_t rank = op_util::sample_rank(y);
    const bool rows = y.dynamic();
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::ternary(op_, y.shape.dims(), op_util::aligned_dims(0, c, rank, rows), c.ptr<T>(),
                       op_util::aligned_dims(1, a, rank, rows), a.ptr<T>(),
                       op_util::aligned_dims(2, b, rank, rows), b.ptr<T>(), y.ptr<T>());
    });
  }

  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = op_ == TernaryOp::Select ? InputSet::all_but(0) : InputSet::only(0),
            .backward_reads_inputs = InputSet::only(0),
            .backward_reads_output = op_ == TernaryOp::Clip};
  }
  void backward(OpCall& call, size_t index, Tensor& dx, bool accumulate) const override {
    const Tensor& c = *call.inputs[0];
    const Tensor& y = *call.output;
    const size_t rank = op_util::sample_rank(y);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::ternary_backward(
          op_, int(index), y.shape.dims(), op_util::aligned_dims(0, c, rank, y.dynamic()),
          c.ptr<T>(), y.ptr<T>(), op_util::aligned_dims(1, *call.inputs[index], rank, y.dynamic()),
          call.output_gradient->ptr<T>(), dx.ptr<T>(), accumulate);
    });
  }

 private:
  const char* name_;
  TernaryOp op_;
};

const BinaryElementwiseOp kPlus("Plus", BinaryOp::Plus);
const BinaryElementwiseOp kMinus("Minus", BinaryOp::Minus);
const BinaryElementwiseOp kTimes("ElementTimes", BinaryOp::Times);
const BinaryElementwiseOp kDivide("ElementDivide", BinaryOp::Divide);
const BinaryElementwiseOp kMax("ElementMax", BinaryOp::Max);
const BinaryElementwiseOp kMin("ElementMin", BinaryOp::Min);
const BinaryElementwiseOp kPow("Pow", BinaryOp::Pow);
const BinaryElementwiseOp kLogPlus("LogPlus", BinaryOp::LogPlus);
const BinaryElementwiseOp kEqual("Equal", BinaryOp::Equal);
const BinaryElementwiseOp kNotEqual("NotEqual", BinaryOp::NotEqual);
const BinaryElementwiseOp kLess("Less", BinaryOp::Less);
const BinaryElementwiseOp kLessEqual("LessEqual", BinaryOp::LessEqual);
const BinaryElementwiseOp kGreater("Greater", BinaryOp::Greater);
const BinaryElementwiseOp kGreaterEqual("GreaterEqual", BinaryOp::GreaterEqual);
const BinaryElementwiseOp kAnd("And", BinaryOp::And);
const BinaryElementwiseOp kOr("Or", BinaryOp::Or);
const BinaryElementwiseOp kXor("Xor", BinaryOp::Xor);
const BinaryElementwiseOp kPRelu("PReLU", BinaryOp::PRelu);

const UnaryElementwiseOp kNegate("Negate", UnaryOp::Negate);
const UnaryElementwiseOp kTanh("Tanh", UnaryOp::Tanh);
const UnaryElementwiseOp kSigmoid("Sigmoid", UnaryOp::Sigmoid);
const UnaryElementwiseOp kRelu("ReLU", UnaryOp::Relu);
const UnaryElementwiseOp kExp("Exp", UnaryOp::Exp);
const UnaryElementwiseOp kLog("Log", UnaryOp::Log);
const UnaryElementwiseOp kSqrt("Sqrt", UnaryOp::Sqrt);
const UnaryElementwiseOp kSquare("Square", UnaryOp::Square);
const UnaryElementwiseOp kAbs("Abs", UnaryOp::Abs);
const UnaryElementwiseOp kFloor("Floor", UnaryOp::Floor);
const UnaryElementwiseOp kCeil("Ceil", UnaryOp::Ceil);
const UnaryElementwiseOp kRound("Round", UnaryOp::Round);
const UnaryElementwiseOp kReciprocal("Reciprocal", UnaryOp::Reciprocal);
const UnaryElementwiseOp kSin("Sin", UnaryOp::Sin);
const UnaryElementwiseOp kCos("Cos", UnaryOp::Cos);
const UnaryElementwiseOp kTan("Tan", UnaryOp::Tan);
const UnaryElementwiseOp kAsin("Asin", UnaryOp::Asin);
const UnaryElementwiseOp kAcos("Acos", UnaryOp::Acos);
const UnaryElementwiseOp kAtan("Atan", UnaryOp::Atan);
const UnaryElementwiseOp kSinh("Sinh", UnaryOp::Sinh);
const UnaryElementwiseOp kCosh("Cosh", UnaryOp::Cosh);
const UnaryElementwiseOp kAsinh("Asinh", UnaryOp::Asinh);
const UnaryElementwiseOp kAtanh("Atanh", UnaryOp::Atanh);
const UnaryElementwiseOp kElu("ELU", UnaryOp::Elu, {"alpha"});
const UnaryElementwiseOp kSelu("SELU", UnaryOp::Selu, {"alpha", "scale"});
const UnaryElementwiseOp kLeakyRelu("LeakyReLU", UnaryOp::LeakyRelu, {"alpha"});
const UnaryElementwiseOp kSoftplus("Softplus", UnaryOp::Softplus, {"steepness"});
const UnaryElementwiseOp kSoftsign("Softsign", UnaryOp::Softsign);
const UnaryElementwiseOp kHardSigmoid("HardSigmoid", UnaryOp::HardSigmoid, {"alpha", "beta"});
const UnaryElementwiseOp kStraightThrough("StraightThrough", UnaryOp::StraightThrough);
const UnaryElementwiseOp kStopGradient("StopGradient", UnaryOp::StopGradient);
const UnaryElementwiseOp kNot("Not", UnaryOp::Not);
const UnaryElementwiseOp kZerosLike("ZerosLike", UnaryOp::ZerosLike);
const UnaryElementwiseOp kOnesLike("OnesLike", UnaryOp::OnesLike);
const UnaryElementwiseOp kPass("Pass", UnaryOp::Copy);

const TernaryElementwiseOp kSelect("Select", TernaryOp::Select);
const TernaryElementwiseOp kClip("Clip", TernaryOp::Clip);

// Conformance inputs: samples [3, 4], or [3, 4] against a shared [4] (broadcasting).
ConformanceInput sample(double low = -1, double high = 1) {
  return {NDShape{3, 4}, true, low, high};
}
ConformanceInput shared(double low = -1, double high = 1) {
  return {NDShape{4}, false, low, high};
}

OpSchema unary(const UnaryElementwiseOp& op, const char* python, const char* doc, OnnxMapping onnx,
               double low = -1, double high = 1, const char* operand = "x") {
  return {&op,         1,     1,   python,          "ops",
          {{operand}}, false, doc, std::move(onnx), {{{sample(low, high)}}}};
}
// A unary op whose gradient is by design not its derivative.
OpSchema unary_by_design(const UnaryElementwiseOp& op, const char* python, const char* doc,
                         OnnxMapping onnx, const char* operand = "x") {
  OpSchema s = unary(op, python, doc, std::move(onnx), -1, 1, operand);
  s.conformance[0].finite_differences = false;
  return s;
}
OpSchema binary(const BinaryElementwiseOp& op, const char* python, const char* doc,
                OnnxMapping onnx, bool associative = false, const char* left = "left",
                const char* right = "right") {
  return {&op,
          2,
          2,
          python,
          "ops",
          {{left}, {right}},
          associative,
          doc,
          std::move(onnx),
          {{{sample(), sample()}}, {{sample(), shared()}}}};
}
OnnxMapping onnx(const char* op_type) {
  return {op_type, true};
}
OnnxMapping no_onnx(const char* because) {
  return {.none_because = because};
}

}  // namespace

// GCC 12 reports a use after free inside the destructors of this long initializer list, which
// neither ASan nor valgrind sees (a known false positive of -Wuse-after-free with inlining).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif
std::vector<OpSchema> elementwise_schemas() {
  return {
      binary(kPlus, "plus", "left + right, broadcasting", onnx("Add"), true),
      binary(kMinus, "minus", "left - right, broadcasting", onnx("Sub")),
      binary(kTimes, "element_times", "left * right elementwise, broadcasting", onnx("Mul"), true),
      binary(kDivide, "element_divide", "left / right elementwise, broadcasting", onnx("Div")),
      binary(kMax, "element_max", "the larger of left and right, elementwise", onnx("Max"), true),
      binary(kMin, "element_min", "the smaller of left and right, elementwise", onnx("Min"), true),
      {&kPow,
       2,
       2,
       "pow",
       "ops",
       {{"base"}, {"exponent"}},
       false,
       "base ** exponent elementwise (CNTK's safe power)",
       onnx("Pow"),
       {{{sample(0.5, 2), sample()}}, {{sample(0.5, 2), shared()}}}},
      binary(kLogPlus, "log_add_exp", "log(exp(left) + exp(right)), elementwise",
             {"Softplus"} /* Max(a, b) + Softplus(-|a - b|) */, true),
      binary(kEqual, "equal", "1 where left == right, else 0", {"Equal"}),
      binary(kNotEqual, "not_equal", "1 where left != right, else 0", {"Not"} /* of Equal */),
      binary(kLess, "less", "1 where left < right, else 0", {"Less"}),
      binary(kLessEqual, "less_equal", "1 where left <= right, else 0", {"LessOrEqual"}),
      binary(kGreater, "greater", "1 where left > right, else 0", {"Greater"}),
      binary(kGreaterEqual, "greater_equal", "1 where left >= right, else 0", {"GreaterOrEqual"}),
      binary(kAnd, "element_and", "1 where x > 0 and y > 0, else 0", {"And"}, false, "x", "y"),
      binary(kOr, "element_or", "1 where x > 0 or y > 0, else 0", {"Or"}, false, "x", "y"),
      binary(kXor, "element_xor", "1 where exactly one of x > 0 and y > 0, else 0", {"Xor"}, false,
             "x", "y"),
      binary(kPRelu, "param_relu", "x where x >= 0, else alpha * x (alpha learnable)", {"PRelu"},
             false, "alpha", "x"),
      unary(kNegate, "negate", "-x", onnx("Neg")),
      unary(kTanh, "tanh", "tanh(x)", onnx("Tanh")),
      unary(kSigmoid, "sigmoid", "1 / (1 + exp(-x))", onnx("Sigmoid")),
      unary(kRelu, "relu", "max(x, 0)", onnx("Relu")),
      unary(kExp, "exp", "exp(x)", onnx("Exp")),
      unary(kLog, "log", "log(x); inputs below 1e-37 give -85.1 (CNTK's clamp)", onnx("Log"), 0.1,
            2),
      unary(kSqrt, "sqrt", "sqrt(x); negative inputs give 0 (CNTK's)", onnx("Sqrt"), 0.1, 2),
      unary(kSquare, "square", "x * x", {.op_type = "Mul"}),
      unary(kAbs, "abs", "|x|", onnx("Abs")),
      unary(kFloor, "floor", "the largest integer <= x", onnx("Floor"), -3, 3),
      unary(kCeil, "ceil", "the smallest integer >= x", onnx("Ceil"), -3, 3),
      unary(kRound, "round", "x rounded to the nearest integer, halves up (-2.5 -> -2)",
            {"Floor"} /* of x + 0.5: ONNX's Round takes halves to even */, -3, 3),
      unary(kReciprocal, "reciprocal", "1 / x; 0 gives 0 (CNTK's)", onnx("Reciprocal"), 0.5, 2),
      unary(kSin, "sin", "sin(x)", onnx("Sin")),
      unary(kCos, "cos", "cos(x)", onnx("Cos")),
      unary(kTan, "tan", "tan(x)", onnx("Tan")),
      unary(kAsin, "asin", "asin(x)", onnx("Asin"), -0.9, 0.9),
      unary(kAcos, "acos", "acos(x)", onnx("Acos"), -0.9, 0.9),
      unary(kAtan, "atan", "atan(x)", onnx("Atan")),
      unary(kSinh, "sinh", "sinh(x)", onnx("Sinh")),
      unary(kCosh, "cosh", "cosh(x)", onnx("Cosh")),
      unary(kAsinh, "asinh", "asinh(x)", onnx("Asinh")),
      unary(kAtanh, "atanh", "atanh(x)", onnx("Atanh"), -0.9, 0.9),
      unary_by_design(
          kStraightThrough, "straight_through_impl",
          "1 where x > 0, else -1; the gradient passes where |x| <= 1",
          no_onnx("ONNX has no straight-through op (an inference graph would be Sign)")),
      unary_by_design(kStopGradient, "stop_gradient", "input, with no gradient",
                      {.op_type = "Identity"}, "input"),
      unary(kZerosLike, "zeros_like", "zeros of x's shape and dynamic axes",
            no_onnx("an inference graph would hold a constant (not written yet)")),
      unary(kOnesLike, "ones_like", "ones of x's shape and dynamic axes",
            no_onnx("an inference graph would hold a constant (not written yet)")),
      unary(kPass, "alias", "x under another name: a distinct node of the graph",
            {.op_type = "Identity", .generic = true}),
      unary(kNot, "element_not", "1 where x <= 0, else 0 (CNTK takes x > 0 as true)",
            {"Not"} /* of Greater(x, 0) */),
      {&kElu,
       1,
       1,
       "elu",
       "ops",
       {{"x"}, {"alpha", ParamType::Double, EluOptions{}.alpha}},
       false,
       "x where x >= 0, else alpha * (exp(x) - 1)",
       {"Elu", true, {{"alpha", "alpha", 1.0}}},
       {{{sample()}, {{{"alpha", 1.0}}}}, {{sample()}, {{{"alpha", 0.5}}}}}},
      {&kSelu,
       1,
       1,
       "selu",
       "ops",
       {{"x"},
        {"scale", ParamType::Double, SeluOptions{}.scale},
        {"alpha", ParamType::Double, SeluOptions{}.alpha}},
       false,
       "scale * (x where x >= 0, else alpha * (exp(x) - 1))",
       {"Selu",
        true,
        {{"alpha", "alpha", 1.67326319217681884765625},
         {"scale", "gamma", 1.05070102214813232421875}}},
       {{{sample()}}}},
      {&kLeakyRelu,
       1,
       1,
       "leaky_relu",
       "ops",
       {{"x"}, {"alpha", ParamType::Double, LeakyReluOptions{}.alpha}},
       false,
       "x where x >= 0, else alpha * x",
       {"LeakyRelu", true, {{"alpha", "alpha", 0.01}}},
       {{{sample()}}, {{sample()}, {{{"alpha", 0.3}}}}}},
      {&kSoftplus,
       1,
       1,
       "softplus",
       "ops",
       {{"x"}, {"steepness", ParamType::Double, SoftplusOptions{}.steepness}},
       false,
       "log(1 + exp(steepness * x)) / steepness",
       {"Softplus"} /* Softplus(steepness x) / steepness */,
       {{{sample()}}, {{sample()}, {{{"steepness", 3.0}}}}}},
      {&kHardSigmoid,
       1,
       1,
       "hard_sigmoid",
       "ops",
       {{"x"}, {"alpha", ParamType::Double}, {"beta", ParamType::Double}},
       false,
       "max(0, min(1, alpha * x + beta))",
       {"HardSigmoid", true, {{"alpha", "alpha", 0.2}, {"beta", "beta", 0.5}}},
       {{{sample(-4, 4)}, {{{"alpha", 0.2}, {"beta", 0.5}}}}}},
      {&kSelect,
       3,
       3,
       "element_select",
       "ops",
       {{"flag"}, {"value_if_true"}, {"value_if_false"}},
       false,
       "value_if_true where flag != 0, else value_if_false",
       {"Where"},
       {{{sample(), sample(), sample()}}, {{shared(), sample(), shared()}}}},
      {&kClip,
       3,
       3,
       "clip",
       "ops",
       {{"x"}, {"min_value"}, {"max_value"}},
       false,
       "x clamped to [min_value, max_value]",
       {"Clip"} /* exported as Max(Min(x, max), min): ONNX's bounds are scalars */,
       {{{sample(-2, 2), shared(-1, -0.2), shared(0.2, 1)}}}},
      // CNTK 2.7 takes a steepness and ignores it; Loom keeps it as an attribute, unused.
      {&kSoftsign,
       1,
       1,
       "softsign",
       "ops",
       {{"x"}, {"steepness", ParamType::Double, 1.0}},
       false,
       "x / (1 + |x|)",
       onnx("Softsign"),
       {{{sample()}}}},
      // CNTK's sum(*operands) and mean(*operands): a chain of Plus (mean's times 1/n).
      {.op = nullptr,
       .min_inputs = 1,
       .max_inputs = SIZE_MAX,
       .python = "sum",
       .params = {{"operands", ParamType::Tensors}},
       .doc = "the elementwise sum of the operands, broadcasting",
       .conformance = {{{sample(), sample(), shared()}}, {{sample()}}},
       .build = [](std::vector<Variable> in, const Dictionary&,
                   const std::string& name) { return sum(in, name); }},
      {.op = nullptr,
       .min_inputs = 1,
       .max_inputs = SIZE_MAX,
       .python = "mean",
       .params = {{"operands", ParamType::Tensors}},
       .doc = "the elementwise mean of the operands, broadcasting",
       .conformance = {{{sample(), shared(), sample()}}},
       .build = [](std::vector<Variable> in, const Dictionary&,
                   const std::string& name) { return mean(in, name); }},
  };
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

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

Function floor(const Variable& x, const std::string& name) {
  return make_primitive(kFloor, {x}, {}, name);
}
Function ceil(const Variable& x, const std::string& name) {
  return make_primitive(kCeil, {x}, {}, name);
}
Function round(const Variable& x, const std::string& name) {
  return make_primitive(kRound, {x}, {}, name);
}
Function reciprocal(const Variable& x, const std::string& name) {
  return make_primitive(kReciprocal, {x}, {}, name);
}
Function sin(const Variable& x, const std::string& name) {
  return make_primitive(kSin, {x}, {}, name);
}
Function cos(const Variable& x, const std::string& name) {
  return make_primitive(kCos, {x}, {}, name);
}
Function tan(const Variable& x, const std::string& name) {
  return make_primitive(kTan, {x}, {}, name);
}
Function asin(const Variable& x, const std::string& name) {
  return make_primitive(kAsin, {x}, {}, name);
}
Function acos(const Variable& x, const std::string& name) {
  return make_primitive(kAcos, {x}, {}, name);
}
Function atan(const Variable& x, const std::string& name) {
  return make_primitive(kAtan, {x}, {}, name);
}
Function sinh(const Variable& x, const std::string& name) {
  return make_primitive(kSinh, {x}, {}, name);
}
Function cosh(const Variable& x, const std::string& name) {
  return make_primitive(kCosh, {x}, {}, name);
}
Function asinh(const Variable& x, const std::string& name) {
  return make_primitive(kAsinh, {x}, {}, name);
}
Function atanh(const Variable& x, const std::string& name) {
  return make_primitive(kAtanh, {x}, {}, name);
}
Function elu(const Variable& x, const EluOptions& options, const std::string& name) {
  return make_primitive(kElu, {x}, Dictionary({{"alpha", options.alpha}}), name);
}
Function selu(const Variable& x, const SeluOptions& options, const std::string& name) {
  return make_primitive(kSelu, {x},
                        Dictionary({{"scale", options.scale}, {"alpha", options.alpha}}), name);
}
Function leaky_relu(const Variable& x, const LeakyReluOptions& options, const std::string& name) {
  return make_primitive(kLeakyRelu, {x}, Dictionary({{"alpha", options.alpha}}), name);
}
Function softplus(const Variable& x, const SoftplusOptions& options, const std::string& name) {
  return make_primitive(kSoftplus, {x}, Dictionary({{"steepness", options.steepness}}), name);
}
Function softsign(const Variable& x, const std::string& name) {
  return make_primitive(kSoftsign, {x}, Dictionary({{"steepness", 1.0}}), name);
}
Function hard_sigmoid(const Variable& x, double alpha, double beta, const std::string& name) {
  return make_primitive(kHardSigmoid, {x}, Dictionary({{"alpha", alpha}, {"beta", beta}}), name);
}
Function straight_through(const Variable& x, const std::string& name) {
  return make_primitive(kStraightThrough, {x}, {}, name);
}
Function stop_gradient(const Variable& x, const std::string& name) {
  return make_primitive(kStopGradient, {x}, {}, name);
}
Function zeros_like(const Variable& x, const std::string& name) {
  return make_primitive(kZerosLike, {x}, {}, name);
}
Function ones_like(const Variable& x, const std::string& name) {
  return make_primitive(kOnesLike, {x}, {}, name);
}
Function alias(const Variable& x, const std::string& name) {
  return make_primitive(kPass, {x}, {}, name);
}
Function sum(const std::vector<Variable>& operands, const std::string& name) {
  LOOM_CHECK(!operands.empty(), ArgumentError, "sum: no operands");
  if (operands.size() == 1) return alias(operands[0], name);
  Variable total = operands[0];
  for (size_t i = 1; i + 1 < operands.size(); ++i) total = plus(total, operands[i]);
  return plus(total, operands.back(), name);
}
Function mean(const std::vector<Variable>& operands, const std::string& name) {
  LOOM_CHECK(!operands.empty(), ArgumentError, "mean: no operands");
  return element_times(sum(operands), constant(1.0 / double(operands.size()), operands[0].dtype()),
                       name);
}
Function element_not(const Variable& x, const std::string& name) {
  return make_primitive(kNot, {x}, {}, name);
}
Function pow(const Variable& base, const Variable& exponent, const std::string& name) {
  return make_primitive(kPow, {base, exponent}, {}, name);
}
Function log_add_exp(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kLogPlus, {a, b}, {}, name);
}
Function equal(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kEqual, {a, b}, {}, name);
}
Function not_equal(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kNotEqual, {a, b}, {}, name);
}
Function less(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kLess, {a, b}, {}, name);
}
Function less_equal(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kLessEqual, {a, b}, {}, name);
}
Function greater(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kGreater, {a, b}, {}, name);
}
Function greater_equal(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kGreaterEqual, {a, b}, {}, name);
}
Function element_and(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kAnd, {a, b}, {}, name);
}
Function element_or(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kOr, {a, b}, {}, name);
}
Function element_xor(const Variable& a, const Variable& b, const std::string& name) {
  return make_primitive(kXor, {a, b}, {}, name);
}
Function param_relu(const Variable& alpha, const Variable& x, const std::string& name) {
  return make_primitive(kPRelu, {alpha, x}, {}, name);
}
Function element_select(const Variable& flag, const Variable& value_if_true,
                        const Variable& value_if_false, const std::string& name) {
  return make_primitive(kSelect, {flag, value_if_true, value_if_false}, {}, name);
}
Function clip(const Variable& x, const Variable& min_value, const Variable& max_value,
              const std::string& name) {
  return make_primitive(kClip, {x, min_value, max_value}, {}, name);
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
