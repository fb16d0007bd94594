// The C++ API as a CNTK user writes it (issue 11): printing as seed 002 shows functions,
// sparseness checks on the data bound to inputs, evaluating a model on data, arguments and
// parameters by name, and messages that name variables by their layer.
#include <gtest/gtest.h>

#include "loom/core/error_test_util.h"
#include "loom/layers/dense.h"
#include "loom/layers/dropout.h"
#include "loom/layers/sequential.h"
#include "loom/learners/sgd.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linear.h"
#include "loom/ops/losses.h"
#include "loom/serialize/model_file.h"
#include "loom/train/function_training.h"

namespace loom {
namespace {

// ---- printing (seed 002) ----

TEST(Printing, CriterionWithNamedArguments) {
  Variable images = input_variable({28, 28}, {.name = "images"});
  Variable labels = input_variable(10, {.is_sparse = true, .name = "labels"});
  Variable z = Dense(10)(images);
  Function criterion =
      combine({cross_entropy_with_softmax(z, labels), classification_error(z, labels)});
  EXPECT_EQ(criterion.to_string(),
            "Composite(images: Tensor[28,28], labels: SparseTensor[10]) -> "
            "Tuple[Tensor[1], Tensor[1]]");
}

TEST(Printing, SequentialIsAComposite) {
  Function model = Sequential({Dense(96, {.activation = relu}), Dropout(0.5), Dense(10)});
  EXPECT_EQ(model.to_string(), "Composite(keep: Sequence[tensor]) -> Sequence[tensor]");
  EXPECT_EQ(model(input_variable({28, 28})).to_string(), "Composite(Tensor[28,28]) -> Tensor[10]");
}

TEST(Printing, LayerShowsItsNameOnlyWhenAppliedToArguments) {
  Variable x = input_variable(2);
  EXPECT_EQ(Dense(2)(x).to_string(), "Dense(Tensor[2]) -> Tensor[2]");
  EXPECT_EQ(Dense(2).to_string(), "Dense(x: Sequence[tensor]) -> Sequence[tensor]");
  // Applied to another layer's output, the root's inputs are not the arguments (CNTK).
  EXPECT_EQ(Dense(3)(Dense(2)(x)).to_string(), "Composite(Tensor[2]) -> Tensor[3]");
  EXPECT_EQ(Dense(2, {.name = "out"})(x).to_string(), "out: Dense(Tensor[2]) -> Tensor[2]");
}

TEST(Printing, GraphApiExpressionPrintsAsComposite) {
  Variable x = input_variable(3, {.name = "x"});
  Parameter W = parameter({3, 2}), b = parameter(2);
  EXPECT_EQ(Function(times(x, W) + b).to_string(), "Composite(x: Tensor[3]) -> Tensor[2]");
  EXPECT_EQ(Function(times(x, W)).to_string(), "Times(x: Tensor[3]) -> Tensor[2]");
  EXPECT_EQ(W.type_string(), "ParameterTensor[3,2]");
  EXPECT_EQ(sequence::input_variable(4).type_string(), "Sequence[Tensor[4]]");
}

// ---- sparseness of the data bound to inputs ----

struct Classifier {
  Variable x = input_variable(2, {.name = "features"});
  Variable y = input_variable(2, {.is_sparse = true, .name = "labels"});
  Function model = Dense(2);
  Function criterion;
  Classifier() {
    Variable z = model(x);
    criterion = combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
  }
};

TEST(Sparseness, DenseDataForASparseInputIsAnError) {
  Classifier c;
  ValueMap args;
  args.emplace(c.x, Value::create_batch<float>(2, {1, 2, 3, 4}));
  args.emplace(c.y, Value::create_batch<float>(2, {1, 0, 0, 1}));
  EXPECT_EQ(message_of([&] { c.criterion.eval(args); }),
            "value for labels: SparseTensor[2] is dense, but the variable is sparse: give sparse "
            "data (Value::one_hot, a CSR NDArrayView), or declare the input without is_sparse");
}

TEST(Sparseness, SwappedFeaturesAndLabelsAreAnError) {
  Classifier c;
  ValueMap swapped;
  swapped.emplace(c.x, Value::one_hot(2, {0, 1}));
  swapped.emplace(c.y, Value::create_batch<float>(2, {1, 2, 3, 4}));
  EXPECT_THROW(c.criterion.eval(swapped), ShapeError);
}

TEST(Sparseness, TrainingOnSwappedArraysIsAnError) {
  Classifier c;
  NDArrayView features = NDArrayView::from_vector<float>({2, 2}, {1, 2, 3, 4});
  NDArrayView labels = Value::one_hot(2, {0, 1}).data();
  TrainOptions options{
      .parameter_learners = {sgd(c.model.parameters(), learning_parameter_schedule(0.1))}};
  EXPECT_NO_THROW(c.criterion.train({features, labels}, options));
  EXPECT_THROW(c.criterion.train({labels, features}, options), ShapeError);
}

TEST(Sparseness, SparseDataForADenseInputIsDensified) {
  Classifier c;
  Value dense = Value::create_batch<float>(2, {1, 0, 0, 1});
  Value sparse = Value::one_hot(2, {0, 1});
  EXPECT_EQ(c.model(c.x).eval_one({{c.x, sparse}}).data().to_vector<float>(),
            c.model(c.x).eval_one({{c.x, dense}}).data().to_vector<float>());
}

// ---- evaluating on data ----

struct Affine {
  Variable x = input_variable(2, {.name = "features"});
  Function model = Dense(3)(x);
  Affine() {
    model.parameter("W").set_value(NDArrayView::from_vector<float>({2, 3}, {1, 0, 0, 0, 1, 0}));
    model.parameter("b").set_value(NDArrayView::from_vector<float>(3, {0, 0, 0.5f}));
  }
};

TEST(Eval, SequenceArgument) {
  Variable s = sequence::input_variable(2);
  Function sum = Dense(1, {.bias = false})(s);
  sum.parameter("W").set_value(NDArrayView::from_vector<float>({2, 1}, {1, 1}));
  EXPECT_EQ(sum({1, 2, 3, 4}).data().to_vector<float>(), (std::vector<float>{3, 7}));
  EXPECT_EQ(sum(NDArrayView::from_vector<float>({2, 1, 2}, {1, 2, 3, 4})).sequence_lengths(),
            (std::vector<size_t>{1, 1}));
}

TEST(Eval, LargeRaggedBatchIsPackedIntact) {
  // 48 sequences of lengths 1..48 of 2,048 floats, 19 MB padded: over the size from which the
  // padded rows are packed on several threads. Each step holds its own sequence and step number.
  constexpr size_t kDim = 2048, kSequences = 48;
  std::vector<std::vector<float>> sequences(kSequences);
  for (size_t b = 0; b < kSequences; ++b)
    for (size_t t = 0; t <= b; ++t)
      sequences[b].insert(sequences[b].end(), kDim, float(b * 100 + t));
  Variable s = sequence::input_variable(kDim);
  Function doubled = s + s;
  const auto result =
      doubled(Value::create_sequences<float>({kDim}, sequences)).as_sequences<float>();
  ASSERT_EQ(result.size(), kSequences);
  for (size_t b = 0; b < kSequences; ++b) {
    ASSERT_EQ(result[b].size(), (b + 1) * kDim) << b;
    for (size_t i = 0; i < result[b].size(); ++i)
      ASSERT_EQ(result[b][i], 2 * sequences[b][i]) << "sequence " << b << ", element " << i;
  }
}

TEST(Eval, OneSampleOfTheArgumentsShape) {
  Affine a;
  Value scores = a.model(NDArrayView::from_vector<float>(2, {2, 1}));
  EXPECT_EQ(scores.data().shape(), (NDShape{1, 3}));
  EXPECT_EQ(scores.data().argmax(), 0u);
  EXPECT_EQ(scores.to_string(), "[[ 2.   1.   0.5]]");
}

TEST(Eval, ABatchAsFloatsIndexesAndArgmaxesPerSample) {
  Affine a;
  Value r = a.model({2, 1, 0, 3, 0, 0});
  EXPECT_EQ(r.argmax(), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(r[1].to_vector<float>(), (std::vector<float>{0, 3, 0.5f}));
  EXPECT_EQ(r[1].argmax(), 1u);
  EXPECT_EQ(a.model.eval(NDArrayView::from_vector<float>({3, 2}, {2, 1, 0, 3, 0, 0})).argmax(),
            r.argmax());
  EXPECT_EQ(message_of([&] {
              a.model({1, 2, 3});
            }),
            "3 values for argument features: Tensor[2] are not a whole number of samples");
  EXPECT_EQ(message_of([&] {
              a.model(NDArrayView::from_vector<float>(3, {1, 2, 3}));
            }),
            "data of shape [3] for argument features: Tensor[2]: expected [2] (one sample) or "
            "[N,...] (N samples)");
}

TEST(Eval, ArgumentsByName) {
  Classifier c;
  Function loss = c.criterion.outputs()[0];
  Value l = loss.eval({{"features", NDArrayView::from_vector<float>(2, {1, 2})},
                       {"labels", Value::one_hot(2, {1})}});
  ValueMap args;
  args.emplace(c.x, Value::create_batch<float>(2, {1, 2}));
  args.emplace(c.y, Value::one_hot(2, {1}));
  EXPECT_EQ(l.data().to_vector<float>(), loss.eval_one(args).data().to_vector<float>());
  EXPECT_EQ(c.criterion.argument("labels"), c.y);
  EXPECT_EQ(message_of([&] { c.criterion.argument("label"); }),
            "Composite(features: Tensor[2], labels: SparseTensor[2]) -> Tuple[Tensor[1], "
            "Tensor[1]] has no arguments named 'label'; its arguments are: features, labels");
  EXPECT_THROW(c.criterion.eval(std::vector<float>{1, 2}),
               ArgumentError);  // two arguments: by name
}

// ---- parameters by path ----

TEST(ParameterPaths, LayersNumberedWhenTheyRepeat) {
  Function model = Sequential({Dense(4), Dense(3, {.name = "classifier"}), Dense(2), Dense(2)});
  model = model(input_variable(5));
  EXPECT_EQ(model.parameter_paths(),
            (std::vector<std::string>{"Dense1.W", "Dense1.b", "classifier.W", "classifier.b",
                                      "Dense2.W", "Dense2.b", "Dense3.W", "Dense3.b"}));
  EXPECT_EQ(model.parameter("Dense2.W").shape(), (NDShape{3, 2}));
  EXPECT_EQ(model.parameter("classifier.b").shape(), (NDShape{3}));
  EXPECT_EQ(message_of([&] { model.parameter("W"); }),
            "'W' names several parameters of Composite(Tensor[5]) -> Tensor[2]: Dense1.W, "
            "classifier.W, Dense2.W, Dense3.W");
  EXPECT_EQ(message_of([&] { model.parameter("Dense4.W"); }),
            "no parameter 'Dense4.W' in Composite(Tensor[5]) -> Tensor[2]; its parameters are: "
            "Dense1.W, Dense1.b, classifier.W, classifier.b, Dense2.W, Dense2.b, Dense3.W, "
            "Dense3.b");
}

TEST(ParameterPaths, OneLayerByNameOrPathAndFreeParameters) {
  Function d = Dense(2);
  EXPECT_EQ(d.parameter_paths(), (std::vector<std::string>{"Dense.W", "Dense.b"}));
  EXPECT_EQ(d.parameter("W"), d.parameter("Dense.W"));
  Parameter v = parameter(2, glorot_uniform(), DataType::Float32, "v");
  Function f = plus(d(input_variable(3)), v);
  EXPECT_EQ(f.parameter_paths(), (std::vector<std::string>{"Dense.W", "Dense.b", "v"}));
}

TEST(ParameterPaths, SurviveSavingAndLoading) {
  Function model = Sequential({Dense(4), Dense(2)})(input_variable(3, {.name = "features"}));
  Function loaded = load_model_from_bytes(save_model_to_bytes(model));
  EXPECT_EQ(loaded.parameter_paths(), model.parameter_paths());
  EXPECT_EQ(loaded.parameter("Dense2.W").value().to_vector<float>(),
            model.parameter("Dense2.W").value().to_vector<float>());
  EXPECT_EQ(loaded.argument("features").shape(), (NDShape{3}));
  // A clone with new parameters keeps the layers.
  EXPECT_EQ(model.clone(ParameterCloneMethod::Clone).parameter_paths(), model.parameter_paths());
}

TEST(Clone, SubstitutesAnInnerOutput) {
  Variable x = input_variable({2}, {.name = "x"});
  Function r = relu(x, "r");
  Function z = plus(r, x, "z");
  Function n = negate(x);
  Function c = z.clone(ParameterCloneMethod::Share, {{r.output(), n.output()}});
  EXPECT_EQ(c({-1.f, 2.f}).data().to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(z({-1.f, 2.f}).data().to_vector<float>(), (std::vector<float>{-1, 4}));
}

// ---- arguments in CNTK's order ----

TEST(Arguments, DepthFirstEachFunctionsInputsLeftToRight) {
  Variable x = input_variable({2}, {.name = "x"}), y = input_variable({2}, {.name = "y"});
  Variable z = input_variable({2}, {.name = "z"});
  auto names = [](const Function& f) {
    std::vector<std::string> out;
    for (const Variable& v : f.arguments()) out.push_back(v.name());
    return out;
  };
  // CNTK's order, where a topological one would reach y (under sigmoid) before x.
  EXPECT_EQ(names(plus(x, sigmoid(y))), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(names(plus(sigmoid(y), x)), (std::vector<std::string>{"y", "x"}));
  EXPECT_EQ(names(plus(x, plus(z, y))), (std::vector<std::string>{"x", "z", "y"}));
}

// ---- messages name parameters by layer ----

TEST(Messages, ParameterNamedByItsLayer) {
  Function d = Dense(2, {.name = "out"});
  EXPECT_EQ(d.parameter("W").describe(), "out.W: ParameterTensor[-1,2]");
  EXPECT_EQ(message_of([&] { d.parameter("W").value(); }),
            "out.W: ParameterTensor[-1,2] has no value yet: its shape is inferred at the first "
            "call of its layer");
  Function e = Dense(2);
  e(input_variable(3));
  EXPECT_EQ(message_of([&] { e.parameter("b").set_value(NDArrayView(DataType::Float32, 3)); }),
            "set_value of Dense.b: ParameterTensor[2]: the new value has shape [3]");
  Variable x = input_variable(3);
  EXPECT_EQ(message_of([&] { plus(x, e.parameter("b")); }),
            "Plus: shapes cannot be broadcast: Tensor[3], Dense.b: ParameterTensor[2]");
  EXPECT_EQ(input_variable(2, {.name = "x"}).describe(), "x: Tensor[2]");
  Variable unnamed = input_variable(2);
  EXPECT_EQ(unnamed.describe(), unnamed.uid() + ": Tensor[2]");
}

// ---- CNTK spellings ----

TEST(Spelling, OneAxisShapesAndNoneActivation) {
  EXPECT_EQ(input_variable(2).shape(), (NDShape{2}));
  EXPECT_EQ(input_variable({2}).shape(), (NDShape{2}));
  EXPECT_EQ(input_variable({}).shape(), NDShape());
  Function d = Dense(1, {.activation = None});
  Function y = d(input_variable(1));
  d.parameter("W").set_value(NDArrayView::from_vector<float>({1, 1}, {-3}));
  EXPECT_EQ(y({1.f}).data().to_vector<float>(), (std::vector<float>{-3}));
}

}  // namespace
}  // namespace loom
