// A layer's call is a block in the graph it is applied to, as CNTK's layers are
// (@BlockFunction): op name the layer's, name the layer's name; Recurrence, Fold and UnfoldFrom
// are inlined, as CNTK's composites are.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>

#include "loom/graph/graph_walk.h"
#include "loom/layers/convolution.h"
#include "loom/layers/dense.h"
#include "loom/layers/dropout.h"
#include "loom/layers/normalization.h"
#include "loom/layers/pooling.h"
#include "loom/layers/recurrent.h"
#include "loom/layers/sequential.h"
#include "loom/ops/elementwise.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

// The op names of the functions a walk at depth meets.
std::vector<std::string> ops(const Function& f, int depth = 0) {
  std::vector<std::string> out;
  for (const GraphNode& n : depth_first_search(
           f, [](const GraphNode& n) { return std::holds_alternative<Function>(n); }, depth))
    out.push_back(std::get<Function>(n).op_name());
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(LayerBlocks, DenseCallIsANamedBlock) {
  Variable x = input_variable({2}, {.name = "x"});
  Function d = Dense(10, {.activation = relu, .name = "classify"});
  Function z = d(x);
  // The call prints as before: a composite shown as its layer.
  EXPECT_TRUE(z.is_composite());
  EXPECT_EQ(z.to_string(), "classify: Dense(x: Tensor[2]) -> Tensor[10]");
  // Its root is the block (CNTK's root_function).
  const Function root = z.output().owner();
  EXPECT_TRUE(root.is_block());
  EXPECT_EQ(root.op_name(), "Dense");
  EXPECT_EQ(root.name(), "classify");
  EXPECT_EQ(z.output().name(), "classify");
  EXPECT_EQ(z.output().producer().op_name(), "ReLU");
  // CNTK's inputs: the parameters, then the argument.
  ASSERT_EQ(root.inputs().size(), 3u);
  EXPECT_EQ(root.inputs()[2], x);
  EXPECT_EQ(root.block_root(), d.output().owner());
  ASSERT_EQ(root.block_arguments_mapping().size(), 1u);
  EXPECT_EQ(root.block_arguments_mapping()[0].second, x);
  // The layer object itself is unchanged: a composite over its placeholder.
  EXPECT_TRUE(d.is_composite());
  EXPECT_EQ(d.placeholders().size(), 1u);
  // Parameter paths are the layer's, inside the block too.
  EXPECT_EQ(z.parameter_paths(), (std::vector<std::string>{"classify.W", "classify.b"}));
  EXPECT_EQ(root.parameter("b"), d.parameter("classify.b"));
  // A walk at depth 0 meets the block, not what is inside; deeper it meets both.
  EXPECT_EQ(ops(z), (std::vector<std::string>{"Dense"}));
  EXPECT_EQ(ops(z, kAllDepths), (std::vector<std::string>{"Dense", "ReLU", "Plus", "Times"}));
  const std::vector<GraphNode> found = find_all_with_name(z, "classify");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(std::get<Function>(found[0]), root);
}

TEST(LayerBlocks, PrintsAsItsLayerOnlyOnArguments) {
  Variable x = input_variable({2});
  const Function z = Dense(3)(Dense(2)(x));
  EXPECT_EQ(z.to_string(), "Composite(Tensor[2]) -> Tensor[3]");
  // The blocks print by the primitives' rule: the op only when applied to arguments.
  EXPECT_EQ(z.output().owner().to_string(), "Composite(Tensor[2]) -> Tensor[3]");
  EXPECT_EQ(Dense(3)(x).output().owner().to_string(), "Dense(Tensor[2]) -> Tensor[3]");
}

TEST(LayerBlocks, ComputesAsTheInlinedLayer) {
  Variable x = input_variable({3});
  Function d = Dense(4, {.activation = tanh});
  Function block = d(x);
  Function inlined = d.clone(ParameterCloneMethod::Share, {{d.placeholders()[0], x}});
  EXPECT_FALSE(inlined.output().owner().is_block());
  ValueMap args;
  args.emplace(x, Value::create_batch<float>({3}, {1, 2, 3, -1, 0.5f, 0}));
  EXPECT_EQ(block.eval_one(args).data().to_vector<float>(),
            inlined.eval_one(args).data().to_vector<float>());
  const ValueMap g = block.grad(args, {d.parameters()[0]});
  const ValueMap h = inlined.grad(args, {d.parameters()[0]});
  EXPECT_EQ(g.at(d.parameters()[0]).data().to_vector<float>(),
            h.at(d.parameters()[0]).data().to_vector<float>());
}

TEST(LayerBlocks, SequentialHoldsOneBlockPerLayerFoundByName) {
  Variable q = sequence::input_variable({20}, {.is_sparse = true, .name = "query"});
  Function model =
      Sequential({Embedding(8, {.name = "embed"}), Recurrence(LSTM(6), {.fused = false}),
                  Dense(3, {.name = "classify"})});
  Function z = model(q);
  EXPECT_EQ(z.to_string(), "Composite(query: Sequence[SparseTensor[20]]) -> Sequence[Tensor[3]]");
  auto by_name = [&](const std::string& name) {
    const std::vector<GraphNode> found = find_all_with_name(z, name);
    EXPECT_EQ(found.size(), 1u) << name;
    return std::get<Function>(found.at(0));
  };
  const Function embed = by_name("embed"), classify = by_name("classify");
  EXPECT_EQ(embed.op_name(), "Embedding");
  EXPECT_EQ(classify.op_name(), "Dense");
  // A block's parameters are those of the graph below it, as every function's in Loom: paths
  // tell the layers apart (Python's model.classify.b looks inside the block only, as CNTK's).
  EXPECT_EQ(embed.parameter("E").shape(), (NDShape{20, 8}));
  EXPECT_EQ(classify.parameter("classify.b").shape(), (NDShape{3}));
  // The Recurrence is inlined (CNTK's is a composite) around its step's LSTM block, which
  // reads the loop's delayed states.
  const std::vector<std::string> top = ops(z);
  EXPECT_TRUE(contains(top, "LSTM"));
  EXPECT_TRUE(contains(top, "PastValue"));
  EXPECT_FALSE(contains(top, "Recurrence"));
  EXPECT_FALSE(contains(top, "Times"));
  // The parameter paths did not change.
  EXPECT_EQ(z.parameter_paths(), (std::vector<std::string>{"embed.E", "LSTM.W", "LSTM.b", "LSTM.H",
                                                           "classify.W", "classify.b"}));
}

TEST(LayerBlocks, NamedRecurrencesAndFoldsAreFoundByName) {
  // CNTK's _inject_name: inlined, a named Recurrence or Fold ends in an alias of its name.
  Variable x = sequence::input_variable({3}, {.name = "x"});
  const Value data = Value::create_sequences<float>({3}, std::vector<float>(6, 0.5f), {2});
  for (bool fused : {true, false}) {
    const Function step = LSTM(4);
    const Function named = Recurrence(step, {.name = "encoder", .fused = fused})(x);
    const std::vector<GraphNode> found = find_all_with_name(named, "encoder");
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(std::get<Function>(found[0]).op_name(), "Pass");
    EXPECT_EQ(named.output().name(), "encoder");
    const Function plain = Recurrence(step, {.fused = fused})(x);
    EXPECT_EQ(named.eval_one({{x, data}}).data().to_vector<float>(),
              plain.eval_one({{x, data}}).data().to_vector<float>());
  }
  const Function fold = Fold(RNNStep(4), {.name = "summary"})(x);
  ASSERT_EQ(find_all_with_name(fold, "summary").size(), 1u);
  EXPECT_EQ(fold.output().name(), "summary");
  // Several outputs (return_full_state) stay as they are, in a composite of the name.
  const Function full = Recurrence(LSTM(4), {.return_full_state = true, .name = "both"});
  EXPECT_EQ(full.outputs().size(), 2u);
  EXPECT_EQ(full.name(), "both");
}

TEST(LayerBlocks, FusedRecurrenceStaysOneOp) {
  Variable x = sequence::input_variable({3});
  Function r = Recurrence(LSTM(4))(x);
  EXPECT_EQ(ops(r), (std::vector<std::string>{"FusedRecurrence"}));
}

TEST(LayerBlocks, EachLayerIsABlockOfItsOpName) {
  Variable img = input_variable({1, 6, 6}, {.name = "img"});
  Variable v = input_variable({4}, {.name = "v"});
  Variable s = sequence::input_variable({4}, {.name = "s"});
  auto op_of = [](const Function& call) {
    const Function root = call.outputs()[0].owner();
    EXPECT_TRUE(root.is_block()) << call.to_string();
    return root.op_name();
  };
  EXPECT_EQ(op_of(Convolution({3, 3}, 2)(img)), "Convolution");
  EXPECT_EQ(op_of(Convolution2D({3, 3}, 2)(img)), "Convolution2D");
  EXPECT_EQ(op_of(ConvolutionTranspose({3, 3}, 2)(img)), "ConvolutionTranspose");
  EXPECT_EQ(op_of(MaxPooling({2, 2})(img)), "MaxPooling");
  EXPECT_EQ(op_of(AveragePooling({2, 2})(img)), "AveragePooling");
  EXPECT_EQ(op_of(GlobalMaxPooling()(img)), "GlobalMaxPooling");
  EXPECT_EQ(op_of(GlobalAveragePooling()(img)), "GlobalAveragePooling");
  EXPECT_EQ(op_of(BatchNormalization()(v)), "BatchNormalization");
  EXPECT_EQ(op_of(LayerNormalization()(v)), "LayerNormalization");
  EXPECT_EQ(op_of(Dropout(0.5)(v)), "Dropout");
  EXPECT_EQ(op_of(ActivationLayer(relu)(v)), "Activation");
  EXPECT_EQ(op_of(Stabilizer()(v)), "Stabilizer");
  EXPECT_EQ(op_of(Delay(1)(s)), "Delay");
  EXPECT_EQ(op_of(PastValueWindow(2, -2)(s)), "PastValueWindow");
  const Function lstm = LSTM(3)(placeholder({3}, DataType::Float32, default_sequence_axes()),
                                placeholder({3}, DataType::Float32, default_sequence_axes()), s);
  EXPECT_EQ(op_of(lstm), "LSTM");
  EXPECT_EQ(lstm.outputs().size(), 2u);
  // A layer that passes its argument through has no block: its call is the argument.
  EXPECT_FALSE(ActivationLayer(None)(v).output().is_output());
  EXPECT_FALSE(Identity()(v).output().is_output());
  // Recurrence and Fold are composites (CNTK's too), their results are no blocks.
  EXPECT_FALSE(Recurrence(RNNStep(3))(s).output().owner().is_block());
  EXPECT_FALSE(Fold(GRU(3), {.fused = false})(s).output().owner().is_block());
}

TEST(LayerBlocks, SetAttributeReachesThePrimitiveInside) {
  Function d = Dropout(0.5)(input_variable({4}));
  d.set_attribute("dropoutRate", 0.25);
  EXPECT_DOUBLE_EQ(d.output().producer().attributes().get<double>("dropout_rate"), 0.25);
}

TEST(LayerBlocks, ModelFilesAndClonesKeepTheBlocks) {
  Variable x = input_variable({3}, {.name = "x"});
  Function z = Sequential({Dense(4, {.activation = tanh, .name = "hidden"}), Dense(2)})(x);
  const std::string path =
      ::testing::TempDir() + "loom_layer_blocks_" + std::to_string(getpid()) + ".model";
  save_model(z, path);
  const Function loaded = load_model(path);
  std::remove(path.c_str());
  EXPECT_EQ(ops(loaded), ops(z));
  EXPECT_EQ(ops(loaded), (std::vector<std::string>{"Dense", "Dense"}));
  EXPECT_EQ(loaded.parameter_paths(), z.parameter_paths());
  EXPECT_EQ(std::get<Function>(find_all_with_name(loaded, "hidden").at(0)).op_name(), "Dense");
  const Function copy = z.clone(ParameterCloneMethod::Clone);
  EXPECT_EQ(ops(copy), ops(z));
  EXPECT_EQ(copy.parameter_paths(), z.parameter_paths());
  ValueMap args;
  args.emplace(x, Value::create_batch<float>({3}, {1, 2, 3}));
  ValueMap largs;
  largs.emplace(loaded.arguments()[0], Value::create_batch<float>({3}, {1, 2, 3}));
  EXPECT_EQ(z.eval_one(args).data().to_vector<float>(),
            loaded.eval_one(largs).data().to_vector<float>());
}

}  // namespace
}  // namespace loom
