// Blocks (as_block, CNTK's BlockFunction): one function from outside, its composite inside;
// they compute, differentiate, walk, clone, save and load as blocks.
#include <gtest/gtest.h>

#include <memory>

#include "loom/graph/graph_impl.h"
#include "loom/graph/graph_walk.h"
#include "loom/ops/ops.h"
#include "loom/ops/ops_test_util.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

// tanh(p W + b) over a placeholder p, its inner function named "inner".
struct Dense {
  Variable p = placeholder({3}, kF64, default_batch_axes(), "p");
  Parameter W = parameter(random_array({3, 2}, kF64, 1), "W");
  Parameter b = parameter(random_array({2}, kF64, 2), "b");
  Function composite = combine({tanh(plus(times(p, W, 1, -1, "inner"), b))});
};

std::vector<double> eval_values(const Function& f, const Variable& x, const Value& data) {
  return values(f.eval({{x, data}}).begin()->second);
}

std::vector<std::string> names(const std::vector<GraphNode>& nodes) {
  std::vector<std::string> out;
  for (const GraphNode& n : nodes) out.push_back(name_of(n));
  return out;
}

TEST(Block, IsOneFunctionFromOutside) {
  Dense d;
  Variable x = input_variable({3}, f64("x"));
  Function block = as_block(d.composite, {{d.p, x}}, "MyDense", "d1");
  EXPECT_TRUE(block.is_block());
  EXPECT_FALSE(block.is_composite());
  EXPECT_EQ(block.op_name(), "MyDense");
  EXPECT_EQ(block.name(), "d1");
  EXPECT_EQ(block.uid().rfind("Block", 0), 0u);
  EXPECT_EQ(block.to_string(), "d1: MyDense(x: Tensor[3]) -> Tensor[2]");
  // CNTK's inputs: the composite's parameters and constants, then the arguments.
  ASSERT_EQ(block.inputs().size(), 3u);
  EXPECT_EQ(block.inputs()[0], d.W);
  EXPECT_EQ(block.inputs()[1], d.b);
  EXPECT_EQ(block.inputs()[2], x);
  EXPECT_EQ(block.arguments(), std::vector<Variable>{x});
  EXPECT_EQ(block.output().name(), "d1");
  // The output's owner is the block, its producer the primitive inside.
  EXPECT_EQ(block.output().owner(), block);
  EXPECT_EQ(block.output().producer().op_name(), "Tanh");
  EXPECT_EQ(Function(block.output()), block);
  EXPECT_EQ(std::hash<Function>()(block.output().owner()), std::hash<Function>()(block));
  // The composite comes back.
  EXPECT_EQ(block.block_root(), d.composite.output().owner());
  const auto mapping = block.block_arguments_mapping();
  ASSERT_EQ(mapping.size(), 1u);
  EXPECT_EQ(mapping[0].first, d.p);
  EXPECT_EQ(mapping[0].second, x);
  expect_error<StateError>([] { Function(tanh(input_variable(1))).block_root(); },
                           {"is not a block"});
}

TEST(Block, ComputesAndDifferentiatesAsItsComposite) {
  Dense d;
  Variable x = input_variable({3}, f64("x"));
  Function block = as_block(d.composite, {{d.p, x}}, "MyDense");
  Function direct = d.composite.clone(ParameterCloneMethod::Share, {{d.p, x}});
  const Value data = random_batch({3}, 4, kF64, 3);
  EXPECT_EQ(eval_values(block, x, data), eval_values(direct, x, data));
  const ValueMap g = block.grad({{x, data}}, {d.W}), h = direct.grad({{x, data}}, {d.W});
  EXPECT_EQ(values(g.at(d.W)), values(h.at(d.W)));
  // And as a part of a larger graph, whose gradient checks against finite differences.
  Variable y = input_variable({3}, f64("y"));
  Function outer = reduce_sum(block.output() * as_block(d.composite, {{d.p, y}}, "MyDense"));
  expect_gradients_match(outer, {{x, data}, {y, random_batch({3}, 4, kF64, 4)}}, {x, y, d.W});
}

TEST(Block, WalksSeeInsideOnlyWhenAsked) {
  Dense d;
  Variable x = input_variable({3}, f64("x"));
  Function model = combine({sigmoid(as_block(d.composite, {{d.p, x}}, "MyDense", "d1"), "top")});
  EXPECT_EQ(names(find_all_with_name(model, "d1")), std::vector<std::string>{"d1"});
  EXPECT_TRUE(find_all_with_name(model, "inner").empty());
  ASSERT_EQ(find_all_with_name(model, "inner", 1).size(), 1u);
  EXPECT_EQ(find_all_with_name(model, "inner", kAllDepths).size(), 1u);
  // At depth 0: top, the block, its inputs; entered: the block, then the functions inside.
  const auto functions = [](const GraphNode& n) { return std::holds_alternative<Function>(n); };
  EXPECT_EQ(names(depth_first_search(model, functions)), (std::vector<std::string>{"top", "d1"}));
  std::vector<std::string> ops;
  for (const GraphNode& n : depth_first_search(model, functions, 1))
    ops.push_back(std::get<Function>(n).op_name());
  EXPECT_EQ(ops, (std::vector<std::string>{"Sigmoid", "MyDense", "Tanh", "Plus", "Times"}));
  expect_argument_error([&] { depth_first_search(model, functions, -2); }, {"depth -2"});
}

TEST(Block, OfPlaceholdersIsCalledAsAFunction) {
  Dense d;
  Variable outer = placeholder("x");
  Function block = as_block(d.composite, {{d.p, outer}}, "MyDense", "d1");
  EXPECT_EQ(block.placeholders(), std::vector<Variable>{outer});
  Variable x = input_variable({3}, f64("x"));
  Function applied = block(x);
  EXPECT_TRUE(applied.is_block());
  EXPECT_EQ(applied.op_name(), "MyDense");
  EXPECT_EQ(applied.name(), "d1");
  EXPECT_NE(applied.uid(), block.uid());
  EXPECT_EQ(applied.block_arguments_mapping()[0].second, x);
  EXPECT_EQ(applied.block_arguments_mapping()[0].first, d.p);  // one definition, shared
  EXPECT_EQ(applied.output().type_string(), "Tensor[2]");
  const Value data = random_batch({3}, 2, kF64, 5);
  EXPECT_EQ(eval_values(applied, x, data),
            eval_values(d.composite.clone(ParameterCloneMethod::Share, {{d.p, x}}), x, data));
  // The block's outer placeholder replaced in place: the block reads the new variable.
  block.replace_placeholders({{outer, x}});
  EXPECT_EQ(block.block_arguments_mapping()[0].second, x);
  EXPECT_EQ(block.inputs().back(), x);
}

TEST(Block, ClonesAsABlock) {
  Dense d;
  Variable x = input_variable({3}, f64("x"));
  Function block = as_block(d.composite, {{d.p, x}}, "MyDense", "d1");
  Function copy = block.clone(ParameterCloneMethod::Clone);
  EXPECT_TRUE(copy.is_block());
  EXPECT_EQ(copy.op_name(), "MyDense");
  EXPECT_EQ(copy.name(), "d1");
  EXPECT_NE(copy.uid(), block.uid());
  EXPECT_NE(copy.inputs()[0], d.W);  // new parameters, same values
  EXPECT_EQ(copy.inputs()[0].value().to_vector<double>(), d.W.value().to_vector<double>());
  const Value data = random_batch({3}, 2, kF64, 6);
  EXPECT_EQ(eval_values(copy, x, data), eval_values(block, x, data));
  // A clone ends at the variables it substitutes: the graph above them is not copied.
  Variable y = input_variable({3}, f64("y"));
  Function chain = combine({block.output() * constant(2.0, kF64)});
  Function rebased =
      chain.clone(ParameterCloneMethod::Share, {{block.output(), y * constant(1.0, kF64)}});
  EXPECT_TRUE(find_all_with_name(rebased, "d1", kAllDepths).empty());
}

TEST(Block, SavesAndLoadsAsABlock) {
  Dense d;
  Variable x = input_variable({3}, f64("x"));
  Function block = as_block(d.composite, {{d.p, x}}, "MyDense", "d1");
  Function model = combine({sigmoid(block, "top")});
  const Value data = random_batch({3}, 3, kF64, 7);
  for (const Function& saved : {model, block}) {
    SCOPED_TRACE(saved.to_string());
    Function loaded = load_model_from_bytes(save_model_to_bytes(saved));
    EXPECT_EQ(loaded.is_block(), saved.is_block());
    EXPECT_EQ(eval_values(loaded, loaded.arguments()[0], data), eval_values(saved, x, data));
    const auto found = find_all_with_name(loaded, "d1");
    ASSERT_EQ(found.size(), 1u);
    const Function b = std::get<Function>(found[0]);
    EXPECT_TRUE(b.is_block());
    EXPECT_EQ(b.op_name(), "MyDense");
    EXPECT_EQ(b.uid(), block.uid());
    EXPECT_TRUE(find_all_with_name(loaded, "inner").empty());
    EXPECT_EQ(find_all_with_name(loaded, "inner", 1).size(), 1u);
    // The definition, made again from what computes the block: the same function of a
    // placeholder of the argument's type.
    const auto mapping = b.block_arguments_mapping();
    ASSERT_EQ(mapping.size(), 1u);
    EXPECT_TRUE(mapping[0].first.is_placeholder());
    EXPECT_EQ(mapping[0].first.type_string(), "Tensor[3]");
    EXPECT_EQ(mapping[0].second.uid(), x.uid());
    EXPECT_EQ(b.block_root().op_name(), "Tanh");
    Variable z = input_variable({3}, f64("z"));
    Function again = b.block_root().clone(ParameterCloneMethod::Share, {{mapping[0].first, z}});
    EXPECT_EQ(eval_values(again, z, data), eval_values(block, x, data));
  }
  // A graph without blocks stays version 1, which older Looms read.
  EXPECT_EQ(model_to_dictionary(d.composite.clone(ParameterCloneMethod::Share, {{d.p, x}}))
                .get<int64_t>("graph_version"),
            1);
  EXPECT_EQ(model_to_dictionary(model).get<int64_t>("graph_version"), 2);
}

TEST(Block, DamagedBlocksInAFileAreDataErrors) {
  Dense d;
  Variable x = input_variable({3}, f64("x"));
  const Dictionary g = model_to_dictionary(combine({as_block(d.composite, {{d.p, x}}, "MyDense")}));
  const auto expect = [](const Dictionary& damaged, const std::string& message) {
    expect_error<DataError>([&] { model_from_dictionary(damaged, "m.loom"); }, {message});
  };
  Dictionary old = g;
  old["graph_version"] = int64_t(1);
  expect(old, "blocks in a graph of version 1");
  auto with_block = [&](const std::string& key, DictionaryValue value) {
    Dictionary damaged = g;
    DictionaryVector blocks = damaged.get<DictionaryVector>("blocks");
    DictionaryMap b = blocks[0].get<DictionaryMap>();
    b[key] = std::move(value);
    blocks[0] = std::move(b);
    damaged["blocks"] = std::move(blocks);
    return damaged;
  };
  expect(with_block("arguments", DictionaryVector{std::string("nowhere")}),
         "arguments[0] 'nowhere' is not defined");
  expect(with_block("outputs", DictionaryVector{x.uid()}), "is not computed");
  expect(with_block("op_name", std::string()), "a block without an op name");
  Dictionary bad_number = g;
  DictionaryVector functions = bad_number.get<DictionaryVector>("functions");
  for (auto& f : functions) {
    DictionaryMap fm = f.get<DictionaryMap>();
    DictionaryVector outs = fm.at("outputs").get<DictionaryVector>();
    DictionaryMap o = outs[0].get<DictionaryMap>();
    if (o.count("blocks")) o["blocks"] = DictionaryVector{int64_t(7)};
    outs[0] = std::move(o);
    fm["outputs"] = std::move(outs);
    f = std::move(fm);
  }
  bad_number["functions"] = std::move(functions);
  expect(bad_number, "is not the number of one of the 1 blocks");
}

TEST(Block, NestsAndKeepsItsLevels) {
  Dense d;
  Variable q = placeholder({3}, kF64, default_batch_axes(), "q");
  Function inner = as_block(d.composite, {{d.p, q}}, "MyDense", "in");
  Function outer_composite = combine({inner.output() * constant(3.0, kF64)});
  Variable x = input_variable({3}, f64("x"));
  Function outer = as_block(outer_composite, {{q, x}}, "Scaled", "out");
  for (const Function& f : {outer, load_model_from_bytes(save_model_to_bytes(outer))}) {
    EXPECT_EQ(names(find_all_with_name(f, "in")), std::vector<std::string>{});
    EXPECT_EQ(names(find_all_with_name(f, "in", 1)), std::vector<std::string>{"in"});
    EXPECT_TRUE(find_all_with_name(f, "inner", 1).empty());
    EXPECT_EQ(find_all_with_name(f, "inner", 2).size(), 1u);
    EXPECT_EQ(f.block_root().op_name(), "ElementTimes");
  }
  // A block whose output is a nested block's output: outermost first as the owner.
  Function pass = as_block(combine({inner.output()}), {{q, x}}, "Pass", "pass");
  EXPECT_EQ(pass.output().owner().op_name(), "Pass");
  EXPECT_EQ(std::get<Function>(find_all_with_name(pass, "in", 1).at(0)).op_name(), "MyDense");
}

TEST(Block, InARecurrentLoopIsFreedWithIt) {
  // h = step(x, sequence::past_value(h)), the step a block, as CNTK's recurrences of LSTM blocks.
  Variable px = placeholder({2}, kF64, default_sequence_axes(), "px");
  Variable ph = placeholder({2}, kF64, default_sequence_axes(), "ph");
  Parameter U = parameter(random_array({2, 2}, kF64, 8), "U");
  Function step = combine({tanh(plus(px, times(ph, U)))});
  Variable x = sequence::input_variable({2}, f64("x"));
  Variable state = placeholder({2}, kF64, x.dynamic_axes(), "state");
  std::weak_ptr<FunctionImpl> kept;
  {
    Function h = as_block(step, {{px, x}, {ph, sequence::past_value(state)}}, "Step", "h");
    h.replace_placeholders({{state, h.output()}});
    kept = h.output().producer().impl();
    const Value data = random_sequences({2}, kLengths, kF64, 9);
    // The same recurrence without a block.
    Variable s2 = placeholder({2}, kF64, x.dynamic_axes());
    Function plain = tanh(plus(x, times(sequence::past_value(s2), U)));
    plain.replace_placeholders({{s2, plain.output()}});
    EXPECT_EQ(eval_values(h, x, data), eval_values(plain, x, data));
    const Function loaded = load_model_from_bytes(save_model_to_bytes(h));
    EXPECT_TRUE(loaded.is_block());
    EXPECT_EQ(eval_values(loaded, loaded.arguments()[0], data), eval_values(h, x, data));
  }
  EXPECT_TRUE(kept.expired());
}

TEST(Block, BadInputIsAClearError) {
  Dense d;
  Variable x = input_variable({3}, f64("x"));
  expect_argument_error([&] { as_block(d.composite, {}, "MyDense"); },
                        {"as_block 'MyDense'", "no variable is given for p"});
  expect_argument_error(
      [&] {
        as_block(d.composite, {{d.p, x}, {d.p, x}}, "MyDense");
      },
      {"mapped twice"});
  expect_argument_error(
      [&] {
        as_block(d.composite, {{placeholder("other"), x}}, "MyDense");
      },
      {"other", "is not an argument of the composite"});
  expect_argument_error([&] { as_block(d.composite, {{d.p, x}}, ""); }, {"needs an op name"});
  expect_shape_error(
      [&] {
        as_block(d.composite, {{d.p, input_variable({4}, f64())}}, "MyDense");
      },
      {"placeholder p", "of another type"});
  Variable y = input_variable({3}, f64("y"));
  expect_argument_error(
      [&] {
        as_block(combine({d.p * y}), {{d.p, x}}, "Mul");
      },
      {"argument y", "is not a placeholder"});
  expect_argument_error(
      [&] {
        as_block(combine({d.p}), {{d.p, x}}, "Pass");
      },
      {"output 0", "alias()"});
}

}  // namespace
}  // namespace loom
