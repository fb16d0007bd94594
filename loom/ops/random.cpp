#include "loom/ops/random.h"

#include <cstring>

#include "loom/graph/op.h"
#include "loom/kernels/dropout.h"
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
class DropoutOp : public OpDef {
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

}  // namespace

std::vector<OpSchema> random_schemas() {
  return {{&kDropout, 1, 1}};
}

Function dropout(const Variable& x, double dropout_rate, std::optional<uint64_t> seed,
                 const std::string& name) {
  check_rate(dropout_rate);
  Dictionary a;
  a["dropout_rate"] = dropout_rate;
  if (seed) a["seed"] = *seed;
  return make_primitive(kDropout, {x}, std::move(a), name);
}

}  // namespace loom
