#include "loom/ops/normalization.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "loom/graph/op.h"
#include "loom/kernels/batch_norm.h"
#include "loom/kernels/convolution.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"
#include "loom/ops/reduction.h"

namespace loom {

namespace {

// Fixes the inferred dimensions of a parameter (or of a constant made with inferred ones) and
// checks a known shape against the expected one.
void require_shape(const char* op, const char* role, const Variable& v, const NDShape& expected) {
  LOOM_CHECK(!v.has_batch_axis(), ShapeError, op, ": ", role, " ", v.describe(),
             " has dynamic axes; it must be a plain tensor of shape ", expected.to_string());
  if (v.shape().has_inferred() && (v.is_parameter() || v.is_constant()))
    resolve_parameter_shape(v, expected);
  LOOM_CHECK(v.shape() == expected, ShapeError, op, ": ", role, " ", v.describe(),
             " must have shape ", expected.to_string());
}

// ---- batch normalization ----

enum BnInput { kX, kScale, kBias, kMean, kVar, kCount };

// The [N, C, S] view of x and the layouts of x and the output (loom/kernels/batch_norm.h).
kernels::BatchNormShape bn_shape(const OpCall& call) {
  const Tensor& x = *call.inputs[kX];
  const size_t sample = op_util::sample_size(x);
  const size_t C = call.attributes.get<bool>("spatial") ? x.shape[1] : sample;
  return {x.rows(), C, C ? sample / C : 0, x.blocked, call.output->blocked};
}

// The weight of the minibatch's statistics in the running ones (CNTK's ComputeExpAvgFactor).
double running_weight(double time_constant, double samples, double count) {
  if (count == 0) return 1;
  if (time_constant < 0) return samples / (samples + count);
  if (std::isinf(time_constant)) return 0;
  if (time_constant > 0) return 1 - std::exp(-samples / time_constant);
  return 1;
}

// CNTK's weight of the running statistics in training (ComputeBlendFactor): none before any
// were gathered, all with an infinite blend time constant, else its share T / (T + N) against
// the minibatch's N samples.
double blend_factor(double blend_time_constant, double samples, double count) {
  if (count == 0 || blend_time_constant == 0) return 0;
  if (std::isinf(blend_time_constant)) return 1;
  return blend_time_constant / (blend_time_constant + samples);
}

// Attributes: "spatial" (bool), "normalization_time_constant", "blend_time_constant",
// "epsilon" (double). call.scratch holds, per channel, the mean and variance the forward pass
// normalized with, the gradients of scale and bias, and the weight the minibatch's own
// statistics had in them (kernels::batch_norm_backward's batch_weight).
class BatchNormalizationOp : public AlignedOpDef {
 public:
  const char* name() const override { return "BatchNormalization"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const bool spatial = a.get<bool>("spatial");
    const double blend = a.get<double>("blend_time_constant");
    const double epsilon = a.get<double>("epsilon");
    a.get<double>("normalization_time_constant");
    LOOM_CHECK(blend >= 0, ArgumentError, "BatchNormalization: blend_time_constant ", blend,
               " must be >= 0 (0: the minibatch's statistics; infinity: the running ones)");
    LOOM_CHECK(epsilon >= 0 && std::isfinite(epsilon), ArgumentError,
               "BatchNormalization: epsilon ", epsilon, " must be finite and >= 0");
    const Variable& x = in[kX];
    LOOM_CHECK(x.has_batch_axis(), ShapeError, "BatchNormalization: input ", x.describe(),
               " has no batch axis; batch statistics need a minibatch");
    LOOM_CHECK(!spatial || x.shape().rank() >= 1, ShapeError,
               "BatchNormalization: spatial normalization of ", x.describe(),
               " needs a channel axis (the first axis of the sample)");
    const NDShape stats = spatial ? NDShape{x.shape()[0]} : x.shape();
    require_shape(name(), "scale", in[kScale], stats);
    require_shape(name(), "bias", in[kBias], stats);
    for (BnInput i : {kMean, kVar, kCount})
      LOOM_CHECK(in[i].is_constant(), ArgumentError, "BatchNormalization: the running ",
                 i == kMean  ? "mean"
                 : i == kVar ? "variance"
                             : "count",
                 " ", in[i].describe(), " must be a Constant (the op updates it in training)");
    require_shape(name(), "running_mean", in[kMean], stats);
    require_shape(name(), "running_inv_std", in[kVar], stats);
    LOOM_CHECK(in[kCount].shape().total_size() == 1, ShapeError,
               "BatchNormalization: running_count ", in[kCount].describe(),
               " must hold a single element");
    return {{x.shape(), common_dtype(name(), in), x.dynamic_axes(), false}};
  }

  // Blocked where x is a float [C, spatial...] sample (1 to 3 spatial axes) normalized per
  // channel, with C filling whole channel blocks.
  BlockedInput blocked_input(size_t index, const std::vector<Variable>& in,
                             const Dictionary& a) const override {
    const NDShape& x = in[kX].shape();
    return index == kX && in[kX].dtype() == DataType::Float32 && a.get<bool>("spatial") &&
                   x.rank() >= 2 && x.rank() <= 4 && x[0] % kernels::kChannelBlock == 0
               ? BlockedInput::Yes
               : BlockedInput::No;
  }
  bool blocked_output(const std::vector<Variable>&, const Dictionary&,
                      const std::vector<bool>& inputs_blocked) const override {
    return inputs_blocked[kX];
  }

  void forward(OpCall& call) const override {
    const Dictionary& a = call.attributes;
    const Tensor& x = *call.inputs[kX];
    const kernels::BatchNormShape s = bn_shape(call);
    const double epsilon = a.get<double>("epsilon");
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      // The executor binds constants to their own storage: the running statistics are
      // updated in place, as the assign op does.
      T* run_mean = call.inputs[kMean]->ptr<T>();
      T* run_var = call.inputs[kVar]->ptr<T>();
      T* count = call.inputs[kCount]->ptr<T>();
      T* mean = scratch<T>(call, s.C);
      T* var = mean + s.C;
      const T* scale = call.inputs[kScale]->ptr<T>();
      const T* bias = call.inputs[kBias]->ptr<T>();
      T* y = call.output->ptr<T>();
      double running = 1;  // the running statistics' weight (CNTK's blend factor)
      if (call.is_training) {
        kernels::batch_norm_forward(s, x.ptr<T>(), scale, bias, epsilon, true, mean, var, y);
        running = blend_factor(a.get<double>("blend_time_constant"), double(s.N), double(*count));
        update_running(a.get<double>("normalization_time_constant"), s, mean, var, run_mean,
                       run_var, count);
      } else {
        LOOM_CHECK(double(*count) > 0, StateError,
                   "BatchNormalization: inference mode is used, "
                   "but nothing has been trained (the running statistics are empty)");
      }
      if (running > 0) {
        // Normalized by the running statistics (in training: after this minibatch's update,
        // overwriting the output normalized by the minibatch's own), or as CNTK blends them
        // with the minibatch's: the means, and the inverse standard deviations.
        for (size_t c = 0; c < s.C; ++c) {
          const double m = running * double(run_mean[c]) + (1 - running) * double(mean[c]);
          const double inv_std = running / std::sqrt(double(run_var[c]) + epsilon) +
                                 (1 - running) / std::sqrt(double(var[c]) + epsilon);
          mean[c] = T(m);
          var[c] = running == 1 ? run_var[c] : T(1 / (inv_std * inv_std) - epsilon);
        }
        kernels::batch_norm_forward(s, x.ptr<T>(), scale, bias, epsilon, false, mean, var, y);
      }
      mean[4 * s.C] = T(1 - running);  // the batch statistics' weight, after the gradient slots
    });
  }

  // The first input whose gradient this pass wants takes all three in one kernel call: x's in
  // place when it is x, those of scale and bias into scratch, for the calls that follow.
  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    const Tensor& x = *call.inputs[kX];
    const kernels::BatchNormShape s = bn_shape(call);
    const std::vector<bool>& wanted = *call.gradient_wanted;
    const size_t first = wanted[kX] ? kX : wanted[kScale] ? kScale : kBias;
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* mean = scratch<T>(call, s.C);
      T *var = mean + s.C, *dscale = mean + 2 * s.C, *dbias = mean + 3 * s.C;
      if (index == first)
        kernels::batch_norm_backward(s, x.ptr<T>(), call.output_gradient->ptr<T>(), mean, var,
                                     call.inputs[kScale]->ptr<T>(), call.inputs[kBias]->ptr<T>(),
                                     call.attributes.get<double>("epsilon"), double(mean[4 * s.C]),
                                     index == kX ? g.ptr<T>() : nullptr, accumulate, dscale, dbias);
      if (index != kX)
        op_util::copy_or_add(s.C, index == kScale ? dscale : dbias, g.ptr<T>(), accumulate);
    });
  }

  // Not the running statistics.
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::only(kX) | InputSet::only(kScale) | InputSet::only(kBias)};
  }

 private:
  // mean, var, dscale, dbias (C each) and the batch statistics' weight. Forward sizes it, so
  // backward's ensure() finds it in place.
  template <typename T>
  static T* scratch(OpCall& call, size_t C) {
    return static_cast<T*>(call.scratch->ensure((4 * C + 1) * sizeof(T)));
  }

  // var holds the minibatch's biased variance.
  template <typename T>
  static void update_running(double time_constant, const kernels::BatchNormShape& s, const T* mean,
                             const T* var, T* run_mean, T* run_var, T* count) {
    const double f = running_weight(time_constant, double(s.N), double(*count));
    const double M = double(s.N * s.S), unbias = M > 1 ? M / (M - 1) : 1;
    if (f > 0)
      for (size_t c = 0; c < s.C; ++c) {
        run_mean[c] = T((1 - f) * double(run_mean[c]) + f * double(mean[c]));
        run_var[c] = T((1 - f) * double(run_var[c]) + f * double(var[c]) * unbias);
      }
    *count = T(double(*count) + double(s.N));
  }
};

// ---- layer normalization ----

// Attribute: "epsilon" (double). call.scratch holds each row's mean and standard deviation.
class LayerNormalizationOp : public OpDef {
 public:
  const char* name() const override { return "LayerNormalization"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const double epsilon = a.get<double>("epsilon");
    LOOM_CHECK(epsilon >= 0 && std::isfinite(epsilon), ArgumentError,
               "LayerNormalization: epsilon ", epsilon, " must be finite and >= 0");
    const Variable& x = in[0];
    require_shape(name(), "scale", in[1], x.shape());
    require_shape(name(), "bias", in[2], x.shape());
    return {{x.shape(), common_dtype(name(), in), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    const size_t D = op_util::sample_size(x), rows = x.rows();
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* mean = static_cast<T*>(call.scratch->ensure(2 * rows * sizeof(T)));
      kernels::layer_norm_forward(rows, D, x.ptr<T>(), call.inputs[1]->ptr<T>(),
                                  call.inputs[2]->ptr<T>(), call.attributes.get<double>("epsilon"),
                                  call.output->ptr<T>(), mean, mean + rows);
    });
  }

  void backward(OpCall& call, size_t index, Tensor& dx, bool accumulate) const override {
    const Tensor& x = *call.inputs[0];
    const size_t D = op_util::sample_size(x), rows = x.rows();
    const double epsilon = call.attributes.get<double>("epsilon");
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>();
      const T* mean = static_cast<const T*>(call.scratch->ensure(2 * rows * sizeof(T)));
      const T* std = mean + rows;
      if (index == 0) {
        kernels::layer_norm_input_gradient(rows, D, x.ptr<T>(), dy, call.inputs[1]->ptr<T>(), mean,
                                           std, epsilon, dx.ptr<T>(), accumulate);
      } else {
        kernels::layer_norm_parameter_gradients(rows, D, x.ptr<T>(), dy, mean, std, epsilon,
                                                index == 1 ? dx.ptr<T>() : nullptr,
                                                index == 2 ? dx.ptr<T>() : nullptr, accumulate);
      }
    });
  }
};

// ---- local response normalization ----

// Attributes: "depth_radius" (int), "bias", "alpha", "beta" (double).
class LocalResponseNormalizationOp : public OpDef {
 public:
  const char* name() const override { return "LocalResponseNormalization"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const int64_t radius = a.get<int64_t>("depth_radius");
    LOOM_CHECK(radius >= 0, ArgumentError, "local_response_normalization: depth_radius ", radius,
               " must be >= 0");
    for (const char* key : {"bias", "alpha", "beta"})
      LOOM_CHECK(std::isfinite(a.get<double>(key)), ArgumentError,
                 "local_response_normalization: ", key, " ", a.get<double>(key), " must be finite");
    const Variable& x = in[0];
    LOOM_CHECK(x.shape().rank() >= 1, ShapeError, "LocalResponseNormalization: the operand ",
               x.describe(), " needs a channel axis (the first axis of the sample)");
    return {{x.shape(), x.dtype(), x.dynamic_axes(), false}};
  }

  kernels::LrnShape shape_of(const OpCall& call) const {
    const Tensor& x = *call.inputs[0];
    const Dictionary& a = call.attributes;
    const size_t C = x.sample_shape()[0];
    return {x.rows(),
            C,
            op_util::sample_size(x) / C,
            size_t(a.get<int64_t>("depth_radius")),
            a.get<double>("bias"),
            a.get<double>("alpha"),
            a.get<double>("beta")};
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::lrn_forward<T>(shape_of(call), x.ptr<T>(), call.output->ptr<T>());
    });
  }

  void backward(OpCall& call, size_t, Tensor& g, bool accumulate) const override {
    const Tensor& x = *call.inputs[0];
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::lrn_backward<T>(shape_of(call), x.ptr<T>(), call.output_gradient->ptr<T>(),
                               g.ptr<T>(), accumulate);
    });
  }

  OpTraits traits(const Dictionary&) const override { return {.backward_reads_output = false}; }
};

const BatchNormalizationOp kBatchNormalization;
const LayerNormalizationOp kLayerNormalization;
const LocalResponseNormalizationOp kLocalResponseNormalization;

}  // namespace

std::vector<OpSchema> normalization_schemas() {
  OpSchema lrn{&kLocalResponseNormalization, 1, 1};
  lrn.python = "local_response_normalization";
  lrn.params = {{"operand"},
                {"depth_radius", ParamType::Int},
                {"bias", ParamType::Double},
                {"alpha", ParamType::Double},
                {"beta", ParamType::Double}};
  lrn.doc =
      "operand (C, ...) / (bias + alpha / (2 depth_radius + 1) * the sum of the squares of the "
      "channels within depth_radius of each) ^ beta";
  lrn.onnx = {"LRN"};  // size 2 depth_radius + 1
  // A window of 3 of the 5 channels; and one wider than the 5, which CNTK cuts to 5.
  for (auto [radius, bias, alpha, beta] : {std::tuple{1, 2.0, 1.0, 0.75}, {3, 1.0, 0.5, 0.5}})
    lrn.conformance.push_back({{{NDShape{5, 2, 3}}},
                               Dictionary({{"depth_radius", int64_t(radius)},
                                           {"bias", bias},
                                           {"alpha", alpha},
                                           {"beta", beta}})});
  // Over each sample's 6 values, with a scale and bias per value.
  const ConformanceInput x{NDShape{2, 3}}, per_value{NDShape{2, 3}, false, 0.5, 1.5};
  std::vector<ConformanceCase> layer{
      {{x, per_value, {NDShape{2, 3}, false}}, Dictionary({{"epsilon", 1e-5}})}};
  // Per value, and spatial (per channel of (C, H, W)). Gradients are taken in training mode, on
  // the batch's statistics, which make each sample's output depend on the others: the finite
  // differences and the sequences one at a time are normalization_test.cpp's.
  auto statistics = [](NDShape s) {
    return std::vector<ConformanceInput>{{s, false, 0.5, 1.5},
                                         {s, false},
                                         {s, false, -1, 1, true},
                                         {s, false, 0.5, 1.5, true},
                                         {NDShape{}, false, 1, 2, true}};
  };
  auto batch_norm = [](bool spatial) {
    return Dictionary({{"spatial", spatial},
                       {"normalization_time_constant", 5000.0},
                       {"blend_time_constant", 0.0},
                       {"epsilon", 1e-5}});
  };
  std::vector<ConformanceCase> batch;
  for (auto [x, s, spatial] : {std::tuple{NDShape{2, 3}, NDShape{2, 3}, false},
                               std::tuple{NDShape{2, 3, 2}, NDShape{2}, true}}) {
    std::vector<ConformanceInput> inputs{{x}};
    for (const ConformanceInput& in : statistics(s)) inputs.push_back(in);
    batch.push_back({inputs, batch_norm(spatial), true, false, false});
  }
  OpSchema batch_schema{
      .op = &kBatchNormalization,
      .min_inputs = 5,
      .max_inputs = 6,
      .python = "batch_normalization",
      .params = {{"operand"},
                 {"scale"},
                 {"bias"},
                 {"running_mean"},
                 {"running_inv_std"},
                 {"spatial", ParamType::Bool},
                 {"normalization_time_constant", ParamType::Double,
                  int64_t{kBatchNormalizationTimeConstant}},
                 {"blend_time_constant", ParamType::Double,
                  int64_t{kBatchNormalizationBlendTimeConstant}},
                 {"epsilon", ParamType::Double, kBatchNormalizationEpsilon},
                 {"use_cudnn_engine", ParamType::Bool, false},
                 {"disable_regularization", ParamType::Bool, false},
                 {.name = "running_count",
                  .type = ParamType::OptionalTensor,
                  .after_name = true,
                  .none_warning = "batch_normalization requires an additional 'running_count' "
                                  "parameter, which can be instantiated as 'constant(0)'"}},
      .doc =
          "batch normalization of operand (which has a batch axis) by the minibatch's "
          "statistics in training (also updating running_mean, running_inv_std, which holds "
          "the variance, and running_count, all constants) and by the running ones in "
          "inference; spatial: one statistic per channel (the first axis). running_count "
          "None: a constant 0 of operand's dtype, with CNTK's warning. use_cudnn_engine and "
          "disable_regularization are accepted and not used",
      .onnx = {"BatchNormalization"},
      .conformance = std::move(batch),
      .build = [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
        const Variable count = in.size() > 5 ? in[5] : Variable(constant(0.0, in[0].dtype()));
        return batch_normalization(in[0], in[1], in[2], in[3], in[4], count, a.get<bool>("spatial"),
                                   a.get<double>("normalization_time_constant"),
                                   a.get<double>("blend_time_constant"), a.get<double>("epsilon"),
                                   name);
      }};
  OpSchema layer_schema = internal_op(kLayerNormalization, 3, 3, std::move(layer));
  // Written as ReduceMean, Sub, Sqrt, Add, Div, Mul, Add: CNTK divides by std + epsilon, ONNX's
  // LayerNormalization (opset 17) by sqrt(var + epsilon).
  layer_schema.onnx = {"LayerNormalization"};
  const MeanVarianceNormalizationOptions mvn;
  std::vector<ConformanceCase> mvn_cases;
  for (bool across : {false, true})
    for (bool scaling : {true, false})
      mvn_cases.push_back(
          {{{NDShape{2, 3, 2}}},
           Dictionary({{"use_stats_across_channels", across}, {"do_variance_scaling", scaling}})});
  return {
      batch_schema,
      layer_schema,
      lrn,
      {.op = nullptr,
       .min_inputs = 3,
       .max_inputs = 3,
       .python = "per_dim_mean_variance_normalize",
       .params = {{"operand"}, {"mean"}, {"inv_stddev"}},
       .doc = "(operand - mean) * inv_stddev, elementwise with broadcasting",
       .conformance = {{{{NDShape{2, 3}}, {NDShape{3}, false}, {NDShape{3}, false, 0.5, 2}}}},
       .build =
           [](std::vector<Variable> in, const Dictionary&, const std::string& name) {
             return per_dim_mean_variance_normalize(in[0], in[1], in[2], name);
           }},
      {.op = nullptr,
       .min_inputs = 1,
       .max_inputs = 1,
       .python = "mean_variance_normalization",
       .params = {{"operand"},
                  {"epsilon", ParamType::Double, mvn.epsilon},
                  {"use_stats_across_channels", ParamType::Bool, mvn.use_stats_across_channels},
                  {"do_variance_scaling", ParamType::Bool, mvn.do_variance_scaling}},
       .doc = "operand minus its mean, divided (do_variance_scaling) by its standard deviation "
              "plus epsilon; the statistics per channel (the first axis) or, "
              "use_stats_across_channels, over the whole sample",
       .conformance = mvn_cases,
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             return mean_variance_normalization(
                 in[0],
                 {a.get<double>("epsilon"), a.get<bool>("use_stats_across_channels"),
                  a.get<bool>("do_variance_scaling")},
                 name);
           }},
      {.op = nullptr,
       .min_inputs = 1,
       .max_inputs = 1,
       .python = "image_scaler",
       .params = {{"x"}, {"scalar", ParamType::Double}, {"biases", ParamType::Doubles}},
       .doc = "x [channels, height, width] * scalar + biases[c] on channel c (one bias per "
              "channel)",
       .conformance = {{{{NDShape{2, 3, 2}}},
                        Dictionary({{"scalar", 0.5}, {"biases", DictionaryVector{1.0, -2.0}}})}},
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             std::vector<double> biases;
             for (const DictionaryValue& b : a.at("biases").get<DictionaryVector>())
               biases.push_back(b.get<double>());
             return image_scaler(in[0], a.get<double>("scalar"), biases, name);
           }},
  };
}

Function batch_normalization(const Variable& x, const Variable& scale, const Variable& bias,
                             const Variable& running_mean, const Variable& running_inv_std,
                             const Variable& running_count, bool spatial,
                             double normalization_time_constant, double blend_time_constant,
                             double epsilon, const std::string& name) {
  Dictionary a;
  a["spatial"] = spatial;
  a["normalization_time_constant"] = normalization_time_constant;
  a["blend_time_constant"] = blend_time_constant;
  a["epsilon"] = epsilon;
  return make_primitive(kBatchNormalization,
                        {x, scale, bias, running_mean, running_inv_std, running_count},
                        std::move(a), name);
}

Function layer_normalization(const Variable& x, const Variable& scale, const Variable& bias,
                             double epsilon, const std::string& name) {
  Dictionary a;
  a["epsilon"] = epsilon;
  return make_primitive(kLayerNormalization, {x, scale, bias}, std::move(a), name);
}

Function local_response_normalization(const Variable& operand, size_t depth_radius, double bias,
                                      double alpha, double beta, const std::string& name) {
  Dictionary a;
  a["depth_radius"] = int64_t(depth_radius);
  a["bias"] = bias;
  a["alpha"] = alpha;
  a["beta"] = beta;
  return make_primitive(kLocalResponseNormalization, {operand}, std::move(a), name);
}

Function per_dim_mean_variance_normalize(const Variable& operand, const Variable& mean,
                                         const Variable& inv_stddev, const std::string& name) {
  return element_times(minus(operand, mean), inv_stddev, name);
}

Function mean_variance_normalization(const Variable& operand,
                                     const MeanVarianceNormalizationOptions& options,
                                     const std::string& name) {
  const size_t rank = operand.shape().rank();
  LOOM_CHECK(rank >= 1, ArgumentError, "mean_variance_normalization: the operand ",
             operand.describe(), " must have at least one static axis");
  LOOM_CHECK(options.epsilon >= 0, ArgumentError,
             "mean_variance_normalization: epsilon must be >= 0, not ", options.epsilon);
  std::vector<Axis> axes;  // the channel axis (the first) stays apart
  for (size_t i = options.use_stats_across_channels || rank == 1 ? 0 : 1; i < rank; ++i)
    axes.emplace_back(int(i));
  const Function mean = reduce_mean(operand, axes);
  if (!options.do_variance_scaling) return minus(operand, mean, name);
  const Function centred = minus(operand, mean);
  const Function deviation = sqrt(reduce_mean(square(centred), axes));
  return element_divide(centred, plus(deviation, constant(options.epsilon, operand.dtype())), name);
}

Function image_scaler(const Variable& operand, double scalar, const std::vector<double>& biases,
                      const std::string& name) {
  const NDShape& shape = operand.shape();
  LOOM_CHECK(shape.rank() == 3, ArgumentError, "image_scaler: the operand ", operand.describe(),
             " must be an image [channels, height, width]");
  LOOM_CHECK(biases.size() == shape[0], ArgumentError, "image_scaler: ", biases.size(),
             " biases for the ", shape[0], " channels of ", operand.describe(),
             "; give one per channel");
  NDArrayView b = NDArrayView::uninitialized(operand.dtype(), NDShape{biases.size(), 1, 1});
  dispatch(operand.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::copy(biases.begin(), biases.end(), b.data<T>());
  });
  return plus(element_times(operand, constant(scalar, operand.dtype())), constant(b), name);
}

}  // namespace loom
