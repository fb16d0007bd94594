#include "loom/ops/registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "loom/ops/op_schema.h"
#include "loom/ops/ops.h"

namespace loom {
namespace {

TEST(OpRegistry, FindsEveryOpByItsName) {
  std::set<std::string> names;
  for (const OpDef* op : all_ops()) {
    EXPECT_EQ(&find_op(op->name()), op);
    EXPECT_TRUE(names.insert(op->name()).second) << "two ops named " << op->name();
  }
  EXPECT_GE(names.size(), 32u);
  // The ops the graph API builds are the registered ones.
  Variable x = input_variable({3});
  EXPECT_EQ(&find_op("Plus"), &plus(x, x).op());
  EXPECT_EQ(&find_op("Times"), &times(x, parameter(NDShape{3, 2})).op());
  EXPECT_EQ(&find_op("SequenceLast"), &sequence::last(sequence::input_variable({3})).op());
  EXPECT_EQ(&find_op("Splice"), &splice({x, x}).op());
}

TEST(OpRegistry, UnknownNamesAreArgumentErrors) {
  try {
    find_op("Frobnicate");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown op 'Frobnicate'"), std::string::npos);
  }
  EXPECT_THROW(find_op(""), ArgumentError);
  EXPECT_THROW(find_op("plus"), ArgumentError);  // names are case-sensitive
  try {
    find_op(std::string("bad\n\x01name") + std::string(100, 'x'));
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'bad??namexxx"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("...'"), std::string::npos) << e.what();
  }
}

TEST(OpRegistry, InputCounts) {
  EXPECT_NO_THROW(check_op_input_count(find_op("Times"), 2));
  EXPECT_THROW(check_op_input_count(find_op("Times"), 1), ArgumentError);
  EXPECT_THROW(check_op_input_count(find_op("ReLU"), 0), ArgumentError);
  EXPECT_NO_THROW(check_op_input_count(find_op("Splice"), 5));
  EXPECT_THROW(check_op_input_count(find_op("Splice"), 0), ArgumentError);
  try {
    check_op_input_count(find_op("Plus"), 3);
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "Plus takes 2 input(s), not 3");
  }
}

// RandomDistribution's Python functions are variants of its schema: each fills its own
// parameters' defaults and its distribution, and a seed is never filled from its default (the
// auto_select sentinel), so that the op's generator comes from the global sequence.
TEST(OpSchema, VariantsFillTheirDefaultsAndFixedAttributes) {
  const OpSchema& s = *find_schema("RandomDistribution");
  std::set<std::string> names;
  for (const PythonVariant& v : s.variants) names.insert(v.python);
  EXPECT_EQ(names,
            (std::set<std::string>{"uniform", "normal", "gumbel", "bernoulli", "uniform_like",
                                   "normal_like", "gumbel_like", "bernoulli_like"}));
  const PythonVariant& normal = s.variants[2];
  ASSERT_STREQ(normal.python, "normal");
  const Function f = s.apply({}, Dictionary({{"shape", NDShape{2, 3}}}), "n", &normal);
  EXPECT_EQ(f.attributes().get<std::string>("distribution"), "normal");
  EXPECT_EQ(f.attributes().get<double>("scale"), 1.0);
  EXPECT_EQ(f.attributes().get<std::string>("dtype"), "float32");
  EXPECT_FALSE(f.attributes().contains("seed"));
  EXPECT_EQ(f.output().shape(), (NDShape{2, 3}));
  const Function seeded =
      s.apply({}, Dictionary({{"shape", NDShape{2}}, {"seed", uint64_t{5}}}), "", &normal);
  EXPECT_EQ(seeded.attributes().get<uint64_t>("seed"), 5u);
  try {
    s.apply({}, {}, "", &normal);
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "normal: argument 'shape' is required");
  }
}

// Splice's schema builds through splice() (OpSchema::build): along a new leading axis it stacks
// its inputs, which the primitive alone does not.
TEST(OpSchema, ApplyCallsTheOpsBuilder) {
  const Variable x = input_variable({2, 3});
  const OpSchema& s = *find_schema("Splice");
  EXPECT_EQ(s.apply({x, x, x}, {}).output().shape(), (NDShape{2, 9}));
  const Function stacked =
      s.apply({x, x}, Dictionary({{"axis", axis_attribute(Axis::new_leading_axis())}}));
  EXPECT_EQ(stacked.output().shape(), (NDShape{2, 2, 3}));
  EXPECT_EQ(stacked.op().name(), std::string("Splice"));
  EXPECT_THROW(s.apply({x, x}, Dictionary({{"axis", axis_attribute(Axis::all_static_axes())}})),
               ShapeError);
}

// Every Python function, an op's own or a variant's, has a name of its own in its module, and
// as many tensor parameters as the inputs the op may take.
TEST(OpSchema, PythonVariantsAreWellFormed) {
  std::set<std::string> names;
  for (const OpSchema& s : op_table()) {
    if (s.python) names.insert(std::string(s.module) + "." + s.python);
    for (const PythonVariant& v : s.variants) {
      EXPECT_TRUE(names.insert(std::string(v.module) + "." + v.python).second) << v.python;
      size_t tensors = 0;
      for (const OpParam& p : v.params) tensors += is_tensor(p.type);
      EXPECT_GE(tensors, s.min_inputs) << v.python;
      EXPECT_LE(tensors, s.max_inputs) << v.python;
    }
  }
}

// A composite has no OpDef: the registry's lookups by op name (model files) pass it by, the
// table finds it by its Python path, and apply checks its arity and fills its defaults.
TEST(OpSchema, CompositesAreFoundByTheirPythonPathOnly) {
  const OpSchema* s = find_schema("ops.times_transpose");
  ASSERT_TRUE(s && !s->op && s->build);
  EXPECT_EQ(s->name(), "ops.times_transpose");
  EXPECT_THROW(find_op("ops.times_transpose"), ArgumentError);
  for (const OpDef* op : all_ops()) EXPECT_NE(op, nullptr);
  const Variable x = input_variable({3});
  const Function f =
      s->apply({x, parameter(NDArrayView::from_vector<float>({2, 3}, std::vector<float>(6)))}, {});
  EXPECT_EQ(f.output().shape(), NDShape{2});
  EXPECT_EQ(f.op_name(), "Times");  // what model files hold
  try {
    s->apply({x}, {});
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "ops.times_transpose takes 2 input(s), not 1");
  }
  const Function mvn = find_schema("ops.mean_variance_normalization")->apply({x}, {});
  EXPECT_EQ(mvn.output().shape(), NDShape{3});
}

// A parameter stored under another key: apply takes and fills the key.
TEST(OpSchema, ParametersStoredUnderOtherKeysFillTheirKeys) {
  const Variable z = input_variable({3}), t = input_variable({3});
  const Function e = find_schema("ClassificationError")->apply({z, t}, {});
  EXPECT_EQ(e.attributes().get<int64_t>("top_n"), 1);
  EXPECT_FALSE(e.attributes().contains("topN"));
  const Function s = find_schema("Slice")->apply(
      {z}, Dictionary({{"axis", int64_t{0}}, {"begin", int64_t{1}}, {"end", int64_t{0}}}));
  EXPECT_EQ(s.output().shape(), NDShape{2});
}

// past_value's initial_state left out is a zero constant input, as CNTK's None.
TEST(OpSchema, AnInitialStateLeftOutIsAZeroConstant) {
  const Variable x = sequence::input_variable({2});
  for (const char* name : {"PastValue", "FutureValue", "sequence.delay"}) {
    const Function f = find_schema(name)->apply({x}, {});
    ASSERT_EQ(f.inputs().size(), 2u) << name;
    EXPECT_TRUE(f.inputs()[1].is_constant()) << name;
    EXPECT_EQ(f.inputs()[1].value().to_vector<double>(), std::vector<double>{0}) << name;
  }
}

}  // namespace
}  // namespace loom
