#include "loom/ops/random.h"

#include <numbers>

#include "loom/graph/op.h"
#include "loom/kernels/dropout.h"
#include "loom/kernels/random.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"

namespace loom {

namespace {

void check_rate(double rate) {
  LOOM_CHECK(rate >= 0 && rate < 1, ArgumentError, "Dropout: dropout_rate ", rate,
             " is outside [0, 1)");
}

// Attributes: "dropout_rate" (double), optional "seed" (uint64, read by make_primitive).
// A training forward takes a fresh Philox key from the function's generator (two draws) and
// keeps it in call.scratch; backward recomputes the mask from it.
class DropoutOp : public AlignedOpDef {
 public:
  // Backward needs only the mask's key, kept in scratch.
  OpTraits traits(const Dictionary&) const override {
    return {.backward_reads_inputs = InputSet::none(),
            .backward_reads_output = false,
            .is_random = true};
  }
  const char* name() const override { return "Dropout"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    check_rate(a.get<double>("dropout_rate"));
    if (a.contains("seed")) a.get<uint64_t>("seed");  // a wrong type fails here, by name
    const Variable& x = in[0];
    return {{x.shape(), x.dtype(), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    const double rate = call.attributes.get<double>("dropout_rate");
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      if (!active(call, rate)) {
        op_util::copy_or_add(x.size(), x.ptr<T>(), call.output->ptr<T>(), false);
        return;
      }
      const std::array<uint32_t, 2> key{call.random->next_u32(), call.random->next_u32()};
      std::memcpy(call.scratch->ensure(sizeof key), key.data(), sizeof key);
      kernels::dropout(x.size(), x.ptr<T>(), call.output->ptr<T>(), key, rate, false);
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const Tensor& dy = *call.output_gradient;
    const double rate = call.attributes.get<double>("dropout_rate");
    dispatch(dy.dtype, [&](auto zero) {
      using T = decltype(zero);
      if (!active(call, rate)) {
        op_util::copy_or_add(dy.size(), dy.ptr<T>(), dx.ptr<T>(), accumulate);
        return;
      }
      std::array<uint32_t, 2> key;
      std::memcpy(key.data(), call.scratch->ensure(sizeof key), sizeof key);
      kernels::dropout(dy.size(), dy.ptr<T>(), dx.ptr<T>(), key, rate, accumulate);
    });
  }

 private:
  // Whether this pass masks (and draws) at all.
  static bool active(const OpCall& call, double rate) { return call.is_training && rate > 0; }
};

const DropoutOp kDropout;

// Attribute keys: CNTK's Python parameter names.
constexpr const char* kDistribution = "distribution";
constexpr const char* kShape = "shape";
constexpr const char* kDtype = "dtype";
constexpr const char* kSeed = "seed";
constexpr const char* kNumSamples = "num_samples";
constexpr const char* kAllowDuplicates = "allow_duplicates";

// The random ops other than dropout: an input's gradient is zero, and backward reads nothing.
constexpr OpTraits kRandomWithZeroGradient{
    .backward_reads_inputs = InputSet::none(), .backward_reads_output = false, .is_random = true};

// A distribution of RandomDistribution: its Python name and the names of its parameters (the
// kernel's a and b; Bernoulli has no b).
struct DistributionSpec {
  const char* name;
  const char* like;  // the name of the _like form
  kernels::Distribution kind;
  const char* a;
  const char* b;
};
constexpr DistributionSpec kUniform{"uniform", "uniform_like", kernels::Distribution::Uniform,
                                    "low", "high"};
constexpr DistributionSpec kNormal{"normal", "normal_like", kernels::Distribution::Normal, "mean",
                                   "scale"};
constexpr DistributionSpec kGumbel{"gumbel", "gumbel_like", kernels::Distribution::Gumbel, "loc",
                                   "scale"};
constexpr DistributionSpec kBernoulli{"bernoulli", "bernoulli_like",
                                      kernels::Distribution::Bernoulli, "mean", nullptr};

const DistributionSpec& distribution_of(const Dictionary& a) {
  const std::string& name = a.get<std::string>(kDistribution);
  for (const DistributionSpec* d : {&kUniform, &kNormal, &kGumbel, &kBernoulli})
    if (name == d->name) return *d;
  throw ArgumentError("RandomDistribution: unknown distribution '" + name +
                      "'; it is one of uniform, normal, gumbel, bernoulli");
}

// The distribution's parameters (a, b), checked as CNTK's builders check them; errors name the
// Python function (uniform or uniform_like, ...).
std::pair<double, double> distribution_parameters(const DistributionSpec& d, const Dictionary& a,
                                                  bool like) {
  const char* fn = like ? d.like : d.name;
  const double p = a.get<double>(d.a), q = d.b ? a.get<double>(d.b) : 0.0;
  switch (d.kind) {
    case kernels::Distribution::Uniform:
      LOOM_CHECK(p < q, ArgumentError, fn, ": low (", p, ") must be below high (", q, ")");
      break;
    case kernels::Distribution::Normal:
    case kernels::Distribution::Gumbel:
      LOOM_CHECK(q >= 0, ArgumentError, fn, ": scale (", q, ") must be >= 0");
      break;
    case kernels::Distribution::Bernoulli:
      LOOM_CHECK(p >= 0 && p <= 1, ArgumentError, fn, ": mean (", p,
                 ") is a probability: it must be in [0, 1]");
      break;
  }
  return {p, q};
}

// CNTK's RandomDistribution. Attributes: "distribution" (uniform, normal, gumbel, bernoulli), its
// parameters by their Python names (low and high, mean and scale, loc and scale, mean), optional
// "seed" (uint64, read by make_primitive); without an input also "shape" (NDShape) and "dtype"
// (dtype_attribute). Each forward takes a fresh Philox key from the function's generator (two
// draws, as Dropout's) and fills the output from it. The operand's gradient is zero (CNTK's
// RandomDistributionNode::BackpropTo adds nothing).
class RandomDistributionOp : public OpDef {
 public:
  OpTraits traits(const Dictionary&) const override { return kRandomWithZeroGradient; }
  const char* name() const override { return "RandomDistribution"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const DistributionSpec& d = distribution_of(a);
    distribution_parameters(d, a, !in.empty());
    if (a.contains(kSeed)) a.get<uint64_t>(kSeed);  // a wrong type fails here, by name
    if (!in.empty()) return {{in[0].shape(), in[0].dtype(), in[0].dynamic_axes(), false}};
    const NDShape& shape = a.get<NDShape>(kShape);
    LOOM_CHECK(!shape.has_inferred() && !shape.has_free(), ArgumentError, d.name, ": shape ",
               shape.to_string(), " must have every dimension known (no -1)");
    return {{shape, attribute_dtype(a.at(kDtype)), {}, false}};
  }

  void forward(OpCall& call) const override {
    const DistributionSpec& d = distribution_of(call.attributes);
    // A pair, not a structured binding: clang 14 (the fuzz build) cannot capture those.
    const std::pair<double, double> pq =
        distribution_parameters(d, call.attributes, !call.inputs.empty());
    const std::array<uint32_t, 2> key{call.random->next_u32(), call.random->next_u32()};
    Tensor& y = *call.output;
    dispatch(y.dtype, [&](auto zero) {
      kernels::random_fill(y.size(), y.ptr<decltype(zero)>(), d.kind, pq.first, pq.second, key);
    });
  }

  void backward(OpCall&, size_t, Tensor& dx, bool accumulate) const override {
    op_util::zero_gradient(dx, accumulate);
  }
};

// CNTK's RandomSample (frequencies false) and RandomSampleInclusionFrequency. Input: the weights
// [classes]; attributes num_samples (int64), allow_duplicates (bool), optional seed (uint64). The
// draws come from the function's generator, one uniform a draw. The weights' gradient is zero
// (CNTK's nodes propagate none).
class RandomSampleOp : public OpDef {
 public:
  explicit RandomSampleOp(bool frequencies) : frequencies_(frequencies) {}
  OpTraits traits(const Dictionary&) const override { return kRandomWithZeroGradient; }
  const char* name() const override {
    return frequencies_ ? "RandomSampleInclusionFrequency" : "RandomSample";
  }
  const char* python() const {
    return frequencies_ ? "random_sample_inclusion_frequency" : "random_sample";
  }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& w = in[0];
    LOOM_CHECK(w.shape().rank() == 1 && w.dynamic_axes().empty(), ArgumentError, python(),
               ": weights must be a vector of class weights without dynamic axes, not ",
               w.type_string());
    const size_t classes = w.shape()[0], k = num_samples(a);
    if (a.contains(kSeed)) a.get<uint64_t>(kSeed);  // a wrong type fails here, by name
    LOOM_CHECK(a.get<bool>(kAllowDuplicates) || k < classes, ArgumentError, python(),
               ": without duplicates num_samples (", k, ") must be below the number of classes (",
               classes, "); draw fewer or give allow_duplicates=True");
    return {{frequencies_ ? w.shape() : NDShape{k, classes}, w.dtype(), {}, false}};
  }

  void forward(OpCall& call) const override {
    const Tensor& w = *call.inputs[0];
    Tensor& y = *call.output;
    const size_t k = num_samples(call.attributes), classes = w.size();
    const bool duplicates = call.attributes.get<bool>(kAllowDuplicates);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      const kernels::ClassSampler sampler(w.ptr<T>(), classes, python(), "weights");
      T* out = y.ptr<T>();
      if (frequencies_) {
        const std::vector<double> f = sampler.inclusion_frequencies(k, duplicates, *call.random);
        for (size_t c = 0; c < classes; ++c) out[c] = T(f[c]);
        return;
      }
      std::fill_n(out, y.size(), T(0));
      const std::vector<size_t> drawn = sampler.draw(k, duplicates, *call.random);
      for (size_t i = 0; i < k; ++i) out[i * classes + drawn[i]] = T(1);
    });
  }

  void backward(OpCall&, size_t, Tensor& dw, bool accumulate) const override {
    op_util::zero_gradient(dw, accumulate);
  }

 private:
  size_t num_samples(const Dictionary& a) const {
    const int64_t k = a.get<int64_t>(kNumSamples);
    LOOM_CHECK(k >= 1, ArgumentError, python(), ": num_samples must be at least 1, not ", k);
    return size_t(k);
  }
  bool frequencies_;
};

const RandomDistributionOp kRandomDistribution;
const RandomSampleOp kRandomSample(false);
const RandomSampleOp kRandomSampleInclusionFrequency(true);

// RandomDistribution's attributes for distribution d with parameters (a, b).
Dictionary distribution_attributes(const DistributionSpec& d, double a, double b,
                                   std::optional<uint64_t> seed) {
  Dictionary attributes;
  attributes[kDistribution] = d.name;
  attributes[d.a] = a;
  if (d.b) attributes[d.b] = b;
  if (seed) attributes[kSeed] = *seed;
  return attributes;
}

// The attributes of a RandomDistribution without an input, of shape and dtype.
Dictionary shaped(Dictionary attributes, const NDShape& shape, DataType dtype) {
  attributes[kShape] = shape;
  attributes[kDtype] = dtype_attribute(dtype);
  return attributes;
}

// RandomDistribution of x (empty, or the operand to be like), its parameters checked first, as
// CNTK's builders do (a placeholder operand defers shape inference).
Function random_tensor(const DistributionSpec& d, std::vector<Variable> x, Dictionary attributes,
                       const std::string& name) {
  distribution_parameters(d, attributes, !x.empty());
  return make_primitive(kRandomDistribution, std::move(x), std::move(attributes), name);
}

Function sample(const RandomSampleOp& op, const Variable& weights, size_t num_samples,
                bool allow_duplicates, std::optional<uint64_t> seed, const std::string& name) {
  Dictionary a;
  a[kNumSamples] = int64_t(num_samples);
  a[kAllowDuplicates] = allow_duplicates;
  if (seed) a[kSeed] = *seed;
  return make_primitive(op, {weights}, std::move(a), name);
}

}  // namespace

namespace {

// The random ops' conformance cases, each with a seed: conformance_test.cpp checks that a seed
// draws the same (in another function, after save and load, in float32 and float64), the
// gradients with the draws held, and the moments of large draws.
struct RandomCases {
  std::vector<ConformanceCase> dropout, distribution, sample, frequency;
};

RandomCases random_cases() {
  auto seeded = [](Dictionary a, uint64_t seed) {
    a[kSeed] = seed;
    return a;
  };
  // A draw of 20000 of a distribution, of the given mean and variance.
  auto large = [&](Dictionary a, uint64_t seed, DrawMoments moments) {
    a[kShape] = NDShape{20000};
    a[kDtype] = dtype_attribute(DataType::Float64);
    return ConformanceCase{.inputs = {},
                           .attributes = seeded(std::move(a), seed),
                           .sequences = false,
                           .moments = moments};
  };
  const ConformanceInput x{NDShape{3, 4}}, weights{NDShape{5}, false, 0.1, 1};
  return {
      .dropout = {{{x}, seeded(Dictionary({{"dropout_rate", 0.5}}), 3)},
                  {.inputs = {x},
                   .attributes = seeded(Dictionary({{"dropout_rate", 0.0}}), 3),
                   .identity = true},
                  // Ones: an element is 0 or 1 / (1 - rate).
                  {.inputs = {{.shape = NDShape{4000}, .values = {1}}},
                   .attributes = seeded(Dictionary({{"dropout_rate", 0.3}}), 4),
                   .sequences = false,
                   .finite_differences = false,
                   .moments = DrawMoments{1, 0.3 / 0.7}}},
      .distribution =
          {{{x}, seeded(Dictionary({{kDistribution, "normal"}, {"mean", 0.5}, {"scale", 2.0}}), 5)},
           large(Dictionary({{kDistribution, "uniform"}, {"low", -1.0}, {"high", 3.0}}), 6,
                 {1, 16.0 / 12}),
           large(Dictionary({{kDistribution, "normal"}, {"mean", 0.5}, {"scale", 2.0}}), 7,
                 {0.5, 4}),
           large(Dictionary({{kDistribution, "gumbel"}, {"loc", 1.0}, {"scale", 2.0}}), 8,
                 {1 + 2 * std::numbers::egamma, std::numbers::pi * std::numbers::pi / 6 * 4}),
           large(Dictionary({{kDistribution, "bernoulli"}, {"mean", 0.3}}), 9, {0.3, 0.21})},
      .sample = {{{weights},
                  seeded(Dictionary({{kNumSamples, int64_t{3}}, {kAllowDuplicates, true}}), 10),
                  true,
                  false},
                 {{weights},
                  seeded(Dictionary({{kNumSamples, int64_t{3}}, {kAllowDuplicates, false}}), 11),
                  true,
                  false}},
      // Its gradient is zero by design (CNTK's), not the derivative of k * weight / sum.
      .frequency = {{{weights},
                     seeded(Dictionary({{kNumSamples, int64_t{3}}, {kAllowDuplicates, true}}), 12),
                     true,
                     false,
                     false},
                    {{weights},
                     seeded(Dictionary({{kNumSamples, int64_t{3}}, {kAllowDuplicates, false}}), 13),
                     true,
                     false,
                     false}},
  };
}

}  // namespace

std::vector<OpSchema> random_schemas() {
  const OpParam seed{"seed", ParamType::Seed, kAutoSelectRandomSeed};
  OpSchema dropout_schema{
      &kDropout, 1, 1, "dropout", "ops", {{"x"}, {"dropout_rate", ParamType::Double, 0.0}, seed}};
  dropout_schema.doc =
      "training: each element zeroed with probability dropout_rate, the rest scaled by 1 / (1 - "
      "dropout_rate); inference: x";
  dropout_schema.onnx.op_type = "Dropout";  // at inference (loom/deploy's own code)

  // One op, CNTK's eight functions: uniform, normal, gumbel, bernoulli of a shape and dtype, and
  // their _like forms of an operand's type.
  OpSchema distribution{&kRandomDistribution, 0, 1};
  distribution.doc = "a random tensor of a shape, or like x, drawn at every evaluation";
  distribution.onnx.none_because =
      "ONNX's RandomUniform, RandomNormal and Bernoulli draw from the runtime's own generator "
      "(their float seed does not continue Loom's stream after a load), and ONNX has no Gumbel";
  // Each distribution's defaults (its options') and docs.
  struct Form {
    const DistributionSpec& d;
    double a, b;                 // the defaults of its parameters d.a and d.b
    const char *doc, *like_doc;  // the shaped form's, the _like form's
  };
  const Form forms[] = {
      {kUniform, UniformRandomOptions{}.low, UniformRandomOptions{}.high,
       "a tensor of shape and dtype uniform in [low, high), drawn at every evaluation",
       "uniform() of x's shape, dtype and dynamic axes"},
      {kNormal, NormalRandomOptions{}.mean, NormalRandomOptions{}.scale,
       "a tensor of shape and dtype, normal of mean and standard deviation scale, drawn at every "
       "evaluation",
       "normal() of x's shape, dtype and dynamic axes"},
      {kGumbel, GumbelRandomOptions{}.loc, GumbelRandomOptions{}.scale,
       "a tensor of shape and dtype, Gumbel of location loc and scale, drawn at every evaluation",
       "gumbel() of x's shape, dtype and dynamic axes"},
      {kBernoulli, BernoulliRandomOptions{}.mean, 0,
       "a tensor of shape and dtype, 1 with probability mean and 0 otherwise, drawn at every "
       "evaluation",
       "bernoulli() of x's shape, dtype and dynamic axes"}};
  for (const Form& f : forms) {
    std::vector<OpParam> shaped{{kShape, ParamType::Shape},
                                {kDtype, ParamType::DataType, dtype_attribute(DataType::Float32)}};
    std::vector<OpParam> like{{"x"}};
    // The distribution's parameters: built once and copied (a braced temporary pushed in the
    // loop set off g++ 12's -Wmaybe-uninitialized at -O2 under -fsanitize=thread).
    std::vector<OpParam> parameters{{f.d.a, ParamType::Double, f.a}};
    if (f.d.b) parameters.push_back({f.d.b, ParamType::Double, f.b});
    parameters.push_back(seed);
    shaped.insert(shaped.end(), parameters.begin(), parameters.end());
    like.insert(like.end(), parameters.begin(), parameters.end());
    Dictionary fixed;
    fixed[kDistribution] = f.d.name;
    distribution.variants.push_back({f.d.name, "random", std::move(shaped), f.doc, fixed});
    distribution.variants.push_back({f.d.like, "random", std::move(like), f.like_doc, fixed});
  }

  std::vector<OpParam> sample_params{
      {"weights"}, {kNumSamples, ParamType::Int}, {kAllowDuplicates, ParamType::Bool}, seed};
  OpSchema sample_schema{&kRandomSample, 1, 1, "random_sample", "ops", sample_params};
  sample_schema.doc =
      "num_samples one-hot rows of classes drawn in proportion to weights (a vector without "
      "dynamic axes), at every evaluation";
  sample_schema.onnx.none_because =
      "ONNX's Multinomial draws indices per batch row from the runtime's generator, with "
      "duplicates, not one-hot rows of Loom's seeded stream";
  OpSchema frequency{&kRandomSampleInclusionFrequency,    1,     1,
                     "random_sample_inclusion_frequency", "ops", sample_params};
  frequency.doc = "the expected number of times each class is in random_sample's draw";
  frequency.onnx.none_because = "ONNX has no node for a weighted sampling's inclusion counts";
  RandomCases cases = random_cases();
  dropout_schema.conformance = std::move(cases.dropout);
  distribution.conformance = std::move(cases.distribution);
  sample_schema.conformance = std::move(cases.sample);
  frequency.conformance = std::move(cases.frequency);
  return {dropout_schema, distribution, sample_schema, frequency};
}

Function dropout(const Variable& x, double dropout_rate, std::optional<uint64_t> seed,
                 const std::string& name) {
  check_rate(dropout_rate);
  Dictionary a;
  a["dropout_rate"] = dropout_rate;
  if (seed) a["seed"] = *seed;
  return make_primitive(kDropout, {x}, std::move(a), name);
}

Function uniform_random(const NDShape& shape, DataType dtype, const UniformRandomOptions& o,
                        const std::string& name) {
  return random_tensor(
      kUniform, {}, shaped(distribution_attributes(kUniform, o.low, o.high, o.seed), shape, dtype),
      name);
}
Function normal_random(const NDShape& shape, DataType dtype, const NormalRandomOptions& o,
                       const std::string& name) {
  return random_tensor(
      kNormal, {}, shaped(distribution_attributes(kNormal, o.mean, o.scale, o.seed), shape, dtype),
      name);
}
Function gumbel_random(const NDShape& shape, DataType dtype, const GumbelRandomOptions& o,
                       const std::string& name) {
  return random_tensor(
      kGumbel, {}, shaped(distribution_attributes(kGumbel, o.loc, o.scale, o.seed), shape, dtype),
      name);
}
Function bernoulli_random(const NDShape& shape, DataType dtype, const BernoulliRandomOptions& o,
                          const std::string& name) {
  return random_tensor(kBernoulli, {},
                       shaped(distribution_attributes(kBernoulli, o.mean, 0, o.seed), shape, dtype),
                       name);
}
Function uniform_random_like(const Variable& x, const UniformRandomOptions& o,
                             const std::string& name) {
  return random_tensor(kUniform, {x}, distribution_attributes(kUniform, o.low, o.high, o.seed),
                       name);
}
Function normal_random_like(const Variable& x, const NormalRandomOptions& o,
                            const std::string& name) {
  return random_tensor(kNormal, {x}, distribution_attributes(kNormal, o.mean, o.scale, o.seed),
                       name);
}
Function gumbel_random_like(const Variable& x, const GumbelRandomOptions& o,
                            const std::string& name) {
  return random_tensor(kGumbel, {x}, distribution_attributes(kGumbel, o.loc, o.scale, o.seed),
                       name);
}
Function bernoulli_random_like(const Variable& x, const BernoulliRandomOptions& o,
                               const std::string& name) {
  return random_tensor(kBernoulli, {x}, distribution_attributes(kBernoulli, o.mean, 0, o.seed),
                       name);
}

Function random_sample(const Variable& weights, size_t num_samples, bool allow_duplicates,
                       std::optional<uint64_t> seed, const std::string& name) {
  return sample(kRandomSample, weights, num_samples, allow_duplicates, seed, name);
}

Function random_sample_inclusion_frequency(const Variable& weights, size_t num_samples,
                                           bool allow_duplicates, std::optional<uint64_t> seed,
                                           const std::string& name) {
  return sample(kRandomSampleInclusionFrequency, weights, num_samples, allow_duplicates, seed,
                name);
}

}  // namespace loom
