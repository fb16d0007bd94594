// CNTKLibrary.h over Loom: a CNTK evaluation client (cntk_eval_client.cpp) on model files CNTK
// wrote, checked against Loom's own C++ API on the same inputs; shapes in CNTK's order; Share-
// clones evaluated from several threads at once; and every bad input giving the exception type
// CNTK threw.
#include <gtest/gtest.h>

#include <CNTKLibrary.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/deploy/model_runner.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linear.h"
#include "loom/serialize/model_file.h"

// cntk_eval_client.cpp
std::vector<std::vector<float>> EvaluationBatchUsingDense(const wchar_t*, size_t,
                                                          const CNTK::DeviceDescriptor&);
std::vector<std::vector<float>> EvaluateIntermediateLayer(const wchar_t*, const wchar_t*,
                                                          const wchar_t*, size_t,
                                                          const CNTK::DeviceDescriptor&);
std::vector<std::vector<float>> EvaluationSingleSequenceUsingOneHot(const wchar_t*, const wchar_t*,
                                                                    const wchar_t*, const char*,
                                                                    std::vector<std::string>&,
                                                                    const CNTK::DeviceDescriptor&);
std::vector<std::vector<float>> EvaluationBatchOfSequencesUsingOneHot(
    const wchar_t*, const wchar_t*, const wchar_t*, const std::vector<const char*>&,
    std::vector<std::vector<std::string>>&, const CNTK::DeviceDescriptor&);
std::vector<std::vector<float>> EvaluationSingleSequenceUsingSparse(const wchar_t*, const wchar_t*,
                                                                    const char*,
                                                                    const CNTK::DeviceDescriptor&);
std::vector<std::vector<std::vector<float>>> ParallelEvaluationExample(
    const wchar_t*, const std::vector<size_t>&, size_t, const CNTK::DeviceDescriptor&);

namespace {

using CNTK::DeviceDescriptor;
using CNTK::FunctionPtr;
using CNTK::NDShape;
using CNTK::Value;
using CNTK::ValuePtr;
using CNTK::Variable;

const std::string kModels = LOOM_SHARED_DIR "/cntk-models/";
const std::string kLoadAndEval = kModels + "v2_load_and_eval.dnn";
const std::string kOneHidden = kModels + "v1_01_OneHidden.dnn";
const std::string kAtis = kModels + "v2_atis_slot_tagger.cmf";
const char* const kQuery =
    "BOS i would like to find a flight from charlotte to las vegas that makes a stop in st. "
    "louis EOS";

std::wstring Wide(const std::string& ascii) {
  return std::wstring(ascii.begin(), ascii.end());
}

// The words of the vocabulary file (one a line, index = line number).
std::vector<std::string> Words(const std::string& file) {
  std::ifstream in(file);
  return std::vector<std::string>(std::istream_iterator<std::string>(in),
                                  std::istream_iterator<std::string>());
}

std::vector<size_t> QueryIndices(const std::string& sentence) {
  const std::vector<std::string> vocabulary = Words(kModels + "atis_query.wl");
  std::vector<size_t> indices;
  std::istringstream words(sentence);
  for (std::string w; words >> w;)
    indices.push_back(std::find(vocabulary.begin(), vocabulary.end(), w) - vocabulary.begin());
  return indices;
}

void ExpectBitwiseEqual(const std::vector<std::vector<float>>& actual,
                        const std::vector<std::vector<float>>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t s = 0; s < actual.size(); ++s) {
    ASSERT_EQ(actual[s].size(), expected[s].size()) << "sequence " << s;
    EXPECT_EQ(std::memcmp(actual[s].data(), expected[s].data(), actual[s].size() * sizeof(float)),
              0)
        << "sequence " << s;
  }
}

// The ATIS tagger's scores for one-hot sentences, by Loom's own API.
std::vector<std::vector<float>> LoomAtis(const std::vector<std::vector<size_t>>& sentences) {
  loom::ModelRunner runner(kAtis);
  const loom::Variable input = runner.arguments()[0];
  const loom::Value scores =
      runner
          .evaluate(
              loom::ValueMap{{input, loom::Value::one_hot_sequences(input.shape()[0], sentences)}})
          .at(runner.outputs()[0]);
  return scores.as_sequences<float>();
}

template <typename Exception, typename F>
std::string MessageOf(F&& f) {
  try {
    f();
  } catch (const Exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception of the expected type";
  return "";
}

// The samples of a batch as sequences of one step each: how CNTK's CreateBatch made them.
loom::Value OneStepSequences(const loom::NDShape& sample, const std::vector<float>& data) {
  const size_t n = sample.total_size();
  std::vector<std::vector<float>> steps;
  for (size_t s = 0; s < data.size() / n; ++s)
    steps.emplace_back(data.begin() + s * n, data.begin() + (s + 1) * n);
  return loom::Value::create_sequences<float>(sample, steps);
}

TEST(CntkClient, DenseBatchOfAV2ModelMatchesLoom) {
  const std::vector<std::vector<float>> out =
      EvaluationBatchUsingDense(Wide(kLoadAndEval).c_str(), 3, DeviceDescriptor::CPUDevice());

  // Its input has a sequence axis: CNTK reads a batch given to it as sequences of one step.
  loom::ModelRunner runner(kLoadAndEval);
  const loom::Variable input = runner.arguments()[0];
  const size_t n = input.shape().total_size();
  std::vector<float> data(n * 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 7) - 3.0f;
  const loom::Value expected =
      runner.evaluate(loom::ValueMap{{input, OneStepSequences(input.shape(), data)}})
          .at(runner.outputs()[0]);
  ExpectBitwiseEqual(out, expected.as_sequences<float>());
  ASSERT_EQ(out.size(), 3u);
  for (size_t s = 0; s < 3; ++s)
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[s][i], std::abs(data[s * n + i]));  // Abs
}

TEST(CntkClient, IntermediateLayerOfAV1ModelMatchesLoom) {
  const std::vector<std::vector<float>> out = EvaluateIntermediateLayer(
      Wide(kOneHidden).c_str(), L"features", L"ol.z", 2, DeviceDescriptor::CPUDevice());

  const loom::Function model = loom::load_model(kOneHidden);
  loom::Variable scores, features = model.argument("features");
  for (const loom::Variable& o : model.outputs())
    if (o.name() == "ol.z") scores = o;
  loom::ModelRunner runner(loom::combine({scores}));
  std::vector<float> data(features.shape().total_size() * 2);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 255) / 255.0f;
  const loom::Value expected =
      runner.evaluate(loom::ValueMap{{features, OneStepSequences(features.shape(), data)}})
          .at(scores);
  ExpectBitwiseEqual(out, expected.as_sequences<float>());
  ASSERT_EQ(out.size(), 2u);  // a batch of 2 is 2 sequences of one step
  EXPECT_EQ(out[0].size(), scores.shape().total_size());
}

TEST(CntkClient, AtisOneHotSequenceGivesCntksTagsAndLoomsScores) {
  std::vector<std::string> slots;
  const std::vector<std::vector<float>> out = EvaluationSingleSequenceUsingOneHot(
      Wide(kAtis).c_str(), Wide(kModels + "atis_query.wl").c_str(),
      Wide(kModels + "atis_slots.wl").c_str(), kQuery, slots, DeviceDescriptor::CPUDevice());
  ExpectBitwiseEqual(out, LoomAtis({QueryIndices(kQuery)}));

  // What CNTK printed with a tagger of the same recipe (README of the models), but for "louis":
  // that baseline's model file tagged it B-arrive_time.time_relative, this one (more sensibly)
  // as the rest of the stop's city, "st. louis".
  const std::unordered_map<std::string, std::string> tagged = {{"charlotte", "B-fromloc.city_name"},
                                                               {"las", "B-toloc.city_name"},
                                                               {"vegas", "I-toloc.city_name"},
                                                               {"st.", "B-stoploc.city_name"},
                                                               {"louis", "I-stoploc.city_name"}};
  std::istringstream words(kQuery);
  size_t i = 0;
  for (std::string w; words >> w; ++i) {
    ASSERT_LT(i, slots.size());
    EXPECT_EQ(slots[i], tagged.count(w) ? tagged.at(w) : "O") << w;
  }
  EXPECT_EQ(i, slots.size());

  // The same sentence in CNTK's CSC sparse form gives the same scores.
  ExpectBitwiseEqual(EvaluationSingleSequenceUsingSparse(Wide(kAtis).c_str(),
                                                         Wide(kModels + "atis_query.wl").c_str(),
                                                         kQuery, DeviceDescriptor::CPUDevice()),
                     out);
}

TEST(CntkClient, AtisBatchOfSequencesMatchesLoom) {
  const std::vector<const char*> sentences = {kQuery, "BOS flights from new york to seattle EOS"};
  std::vector<std::vector<std::string>> slots;
  const std::vector<std::vector<float>> out = EvaluationBatchOfSequencesUsingOneHot(
      Wide(kAtis).c_str(), Wide(kModels + "atis_query.wl").c_str(),
      Wide(kModels + "atis_slots.wl").c_str(), sentences, slots, DeviceDescriptor::CPUDevice());
  ExpectBitwiseEqual(out, LoomAtis({QueryIndices(sentences[0]), QueryIndices(sentences[1])}));
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[1][3], "B-fromloc.city_name");  // new
  EXPECT_EQ(slots[1][4], "I-fromloc.city_name");  // york
  EXPECT_EQ(slots[1][6], "B-toloc.city_name");    // seattle
}

TEST(CntkClient, FourThreadsEvaluatingShareClonesGiveTheReference) {
  const std::vector<size_t> query = QueryIndices(kQuery);
  const std::vector<std::vector<float>> reference = LoomAtis({query});
  const auto outputs =
      ParallelEvaluationExample(Wide(kAtis).c_str(), query, 4, DeviceDescriptor::CPUDevice());
  ASSERT_EQ(outputs.size(), 4u);
  for (const auto& out : outputs) ExpectBitwiseEqual(out, reference);
}

TEST(CntkShapes, AreTheReverseOfLooms) {
  const loom::Variable x = loom::input_variable({3, 4}, {.name = "x"});
  const loom::Parameter w =
      loom::parameter({4, 2}, loom::glorot_uniform(), loom::DataType::Float32, "W");
  const loom::Function f = loom::times(x, w);
  const auto function = std::make_shared<CNTK::Function>(f);

  const Variable input = function->Arguments()[0];
  EXPECT_EQ(input.Shape(), NDShape({4, 3}));
  EXPECT_EQ(input.Shape().AsString(), L"[4 x 3]");
  EXPECT_EQ(input.Name(), L"x");
  EXPECT_TRUE(input.IsInput());
  EXPECT_EQ(input.GetDataType(), CNTK::DataType::Float);
  ASSERT_EQ(input.DynamicAxes().size(), 1u);
  EXPECT_TRUE(input.DynamicAxes()[0].IsBatchAxis());
  const Variable output = function->Output();
  EXPECT_EQ(output.Shape(), NDShape({2, 3}));
  EXPECT_TRUE(output.IsOutput());

  // CNTK's column-major {4, 3} and Loom's row-major [3, 4] hold the same bytes.
  std::vector<float> data(24);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f - 3.0f;
  const ValuePtr value = Value::CreateBatch(input.Shape(), data, DeviceDescriptor::CPUDevice());
  EXPECT_EQ(value->Shape(), NDShape({4, 3, 2}));
  std::unordered_map<Variable, ValuePtr> outputs = {{output, nullptr}};
  function->Evaluate({{input, value}}, outputs);
  EXPECT_EQ(outputs[output]->Shape(), NDShape({2, 3, 2}));
  std::vector<std::vector<float>> result;
  outputs[output]->CopyVariableValueTo(output, result);
  const loom::Value expected =
      f.eval_one(loom::ValueMap{{x, loom::Value::create_batch(x.shape(), data)}});
  ExpectBitwiseEqual(result, expected.as_sequences<float>());

  // A CNTK model file: Loom's [1, 2] input is CNTK's {2, 1}, with its sequence axis first.
  const Variable loaded = CNTK::Function::Load(Wide(kLoadAndEval))->Arguments()[0];
  EXPECT_EQ(loaded.Shape(), NDShape({2, 1}));
  ASSERT_EQ(loaded.DynamicAxes().size(), 2u);
  EXPECT_TRUE(loaded.DynamicAxes()[0].IsSequenceAxis());
  EXPECT_TRUE(loaded.DynamicAxes()[1].IsBatchAxis());
}

TEST(CntkFunction, NamesGraphAndClones) {
  const FunctionPtr model = CNTK::Function::Load(Wide(kOneHidden));
  EXPECT_EQ(model->Outputs().size(), 4u);
  const FunctionPtr scores = model->FindByName(L"ol.z");
  ASSERT_NE(scores, nullptr);
  EXPECT_EQ(scores->Output().Name(), L"ol.z");
  EXPECT_EQ(model->FindByName(L"no such node"), nullptr);
  EXPECT_EQ(model->RootFunction(), model);  // several outputs: a composite is its own root

  const FunctionPtr atis = CNTK::Function::Load(Wide(kAtis));
  EXPECT_EQ(atis->RootFunction()->Output(), atis->Output());
  EXPECT_TRUE(atis->RootFunction()->IsPrimitive());
  const FunctionPtr shared = atis->Clone(CNTK::ParameterCloningMethod::Share);
  EXPECT_EQ(shared->Arguments()[0], atis->Arguments()[0]);  // Loom's clones share the graph
  const FunctionPtr copied = atis->Clone(CNTK::ParameterCloningMethod::Clone);

  // A copy evaluates as the original.
  const std::vector<size_t> query = QueryIndices(kQuery);
  const Variable input = copied->Arguments()[0], output = copied->Output();
  std::unordered_map<Variable, ValuePtr> outputs = {{output, nullptr}};
  copied->Evaluate({{input, Value::CreateSequence<float>(input.Shape().TotalSize(), query,
                                                         DeviceDescriptor::CPUDevice())}},
                   outputs);
  std::vector<std::vector<float>> result;
  outputs[output]->CopyVariableValueTo(output, result);
  ExpectBitwiseEqual(result, LoomAtis({query}));

  // The whole model's scores need only the features, not the labels of its criterion outputs.
  const Variable modelScores = scores->Output();
  const Variable features = model->Arguments()[0];
  std::unordered_map<Variable, ValuePtr> only = {{modelScores, nullptr}};
  model->Evaluate({{features, Value::CreateBatch(features.Shape(),
                                                 std::vector<float>(features.Shape().TotalSize()),
                                                 DeviceDescriptor::CPUDevice())}},
                  only);
  EXPECT_EQ(only[modelScores]->Shape(), NDShape({10, 1, 1}));
}

TEST(CntkValue, OneHotRoundTripsAndCallerValuesAreWrittenInPlace) {
  const Variable five(loom::input_variable({5}, {.name = "five"}));
  const ValuePtr value = Value::CreateBatch<float>(5, {1, 3}, DeviceDescriptor::CPUDevice());
  EXPECT_TRUE(value->IsSparse());
  std::vector<std::vector<size_t>> indices;
  value->CopyVariableValueTo(five, indices);
  EXPECT_EQ(indices, (std::vector<std::vector<size_t>>{{1}, {3}}));

  // A caller-provided output value receives the result in its own storage, as in CNTK.
  const FunctionPtr model = CNTK::Function::Load(Wide(kLoadAndEval));
  const Variable input = model->Arguments()[0], output = model->Output();
  const ValuePtr in = Value::CreateSequence<float>(input.Shape(), {-1.5f, 2.0f, -3.0f, 4.0f},
                                                   DeviceDescriptor::CPUDevice());
  const ValuePtr mine = Value::CreateSequence<float>(output.Shape(), std::vector<float>(4),
                                                     DeviceDescriptor::CPUDevice());
  const float* storage = mine->Data()->DataBuffer<float>();
  std::unordered_map<Variable, ValuePtr> outputs = {{output, mine}};
  model->Evaluate({{input, in}}, outputs);
  EXPECT_EQ(outputs[output], mine);
  EXPECT_EQ(mine->Data()->DataBuffer<float>(), storage);
  EXPECT_EQ(std::vector<float>(storage, storage + 4), (std::vector<float>{1.5f, 2.0f, 3.0f, 4.0f}));
}

TEST(CntkValue, SequencesHaveCntksShapeMaskAndStartFlags) {
  const FunctionPtr model = CNTK::Function::Load(Wide(kLoadAndEval));
  const Variable input = model->Arguments()[0], output = model->Output();
  const std::vector<std::vector<float>> sequences = {{-1, 2, -3, 4}, {5, -6}};
  const ValuePtr value = Value::CreateBatchOfSequences<float>(
      input.Shape(), sequences, {true, false}, DeviceDescriptor::CPUDevice());
  EXPECT_EQ(value->Shape(), NDShape({2, 1, 2, 2}));  // sample, longest sequence, sequences
  EXPECT_EQ(value->MaskedCount(), 1u);
  const loom::NDMask& mask = *value->LoomValue().mask();
  EXPECT_EQ(mask.at(0, 0), loom::MaskKind::SequenceBegin);
  EXPECT_EQ(mask.at(1, 0), loom::MaskKind::Valid);  // continues a sequence

  std::unordered_map<Variable, ValuePtr> outputs = {{output, nullptr}};
  model->Evaluate({{input, value}}, outputs);
  std::vector<std::vector<float>> result;
  outputs[output]->CopyVariableValueTo(output, result);
  ASSERT_EQ(result.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    ASSERT_EQ(result[s].size(), sequences[s].size());
    for (size_t i = 0; i < result[s].size(); ++i)
      EXPECT_EQ(result[s][i], std::abs(sequences[s][i]));
  }
}

// Loom packs the sequences it copies (loom::Value::create); CNTK's caller may still write an
// input's Data() before evaluating it, and the evaluation reads what was written.
TEST(CntkValue, WritesThroughDataReachTheEvaluation) {
  const FunctionPtr model = CNTK::Function::Load(Wide(kLoadAndEval));
  const Variable input = model->Arguments()[0], output = model->Output();
  const ValuePtr value = Value::CreateBatchOfSequences<float>(
      input.Shape(), {{-1, 2, -3, 4}, {5, -6}}, {true, true}, DeviceDescriptor::CPUDevice());
  float* data = value->Data()->WritableDataBuffer<float>();  // [2 sequences, 2 steps, 2]
  for (size_t i = 0; i < 8; ++i) data[i] *= 10;
  std::unordered_map<Variable, ValuePtr> outputs = {{output, nullptr}};
  model->Evaluate({{input, value}}, outputs);
  std::vector<std::vector<float>> result;
  outputs[output]->CopyVariableValueTo(output, result);
  EXPECT_EQ(result, (std::vector<std::vector<float>>{{10, 20, 30, 40}, {50, 60}}));
}

TEST(CntkFunction, LoadsFromMemoryAndEvaluatesCombinedOutputs) {
  std::ifstream in(kOneHidden, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const FunctionPtr model = CNTK::Function::Load(bytes.data(), bytes.size());
  const Variable scores = model->FindByName(L"ol.z")->Output();
  const Variable hidden = model->FindByName(L"h1.z")->Output();
  const FunctionPtr both = CNTK::Combine({scores, hidden});
  ASSERT_EQ(both->Arguments().size(), 1u);  // the features only
  const Variable features = both->Arguments()[0];
  EXPECT_EQ(features.Name(), L"features");

  std::vector<float> data(features.Shape().TotalSize() * 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 13) / 13.0f;
  std::unordered_map<Variable, ValuePtr> outputs = {{both->Outputs()[0], nullptr},
                                                    {both->Outputs()[1], nullptr}};
  both->Evaluate(
      {{features, Value::CreateBatch(features.Shape(), data, DeviceDescriptor::CPUDevice())}},
      outputs);

  loom::ModelRunner runner(loom::combine({scores.LoomVariable(), hidden.LoomVariable()}));
  const loom::ValueMap expected = runner.evaluate(loom::ValueMap{
      {features.LoomVariable(), OneStepSequences(features.LoomVariable().shape(), data)}});
  for (const Variable& v : {scores, hidden}) {
    std::vector<std::vector<float>> result;
    outputs.at(v)->CopyVariableValueTo(v, result);
    ExpectBitwiseEqual(result, expected.at(v.LoomVariable()).as_sequences<float>());
  }
}

TEST(CntkValue, DoubleDataAndOneHotSkip) {
  const loom::Variable x = loom::input_variable({3}, {.dtype = loom::DataType::Float64});
  const auto function = std::make_shared<CNTK::Function>(loom::negate(x));
  const Variable input = function->Arguments()[0], output = function->Output();
  EXPECT_EQ(input.GetDataType(), CNTK::DataType::Double);
  std::unordered_map<Variable, ValuePtr> outputs = {{output, nullptr}};
  function->Evaluate({{input, Value::CreateBatch(input.Shape(), std::vector<double>{1, -2, 3.5},
                                                 DeviceDescriptor::CPUDevice())}},
                     outputs);
  EXPECT_EQ(outputs[output]->GetDataType(), CNTK::DataType::Double);
  std::vector<std::vector<double>> result;
  outputs[output]->CopyVariableValueTo(output, result);
  EXPECT_EQ(result, (std::vector<std::vector<double>>{{-1, 2, -3.5}}));

  // CNTK's OneHotSkip index is a zero vector.
  const ValuePtr oneHot =
      Value::CreateSequence<float>(3, {2, Value::OneHotSkip}, DeviceDescriptor::CPUDevice());
  std::vector<std::vector<float>> dense;
  oneHot->CopyVariableValueTo(Variable(loom::input_variable({3})), dense);
  EXPECT_EQ(dense, (std::vector<std::vector<float>>{{0, 0, 1, 0, 0, 0}}));
}

TEST(CntkErrors, FilesThatCannotBeLoadedAreRuntimeErrors) {
  EXPECT_NE(MessageOf<std::runtime_error>([] {
              CNTK::Function::Load(L"/no/such/model.dnn");
            }).find("/no/such/model.dnn"),
            std::string::npos);

  std::ifstream in(kAtis, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string damaged = testing::TempDir() + "/cntk_damaged_model.cmf";
  std::ofstream(damaged, std::ios::binary).write(bytes.data(), bytes.size() / 2);
  EXPECT_FALSE(MessageOf<std::runtime_error>([&] { CNTK::Function::Load(Wide(damaged)); }).empty());
  std::filesystem::remove(damaged);
  EXPECT_FALSE(
      MessageOf<std::runtime_error>([&] { CNTK::Function::Load(bytes.data(), 100); }).empty());
  EXPECT_FALSE(MessageOf<std::invalid_argument>([] { CNTK::Function::Load(nullptr, 0); }).empty());
}

TEST(CntkErrors, BadInputsAreInvalidArguments) {
  const FunctionPtr model = CNTK::Function::Load(Wide(kLoadAndEval));
  const FunctionPtr other = CNTK::Function::Load(Wide(kLoadAndEval));
  const Variable input = model->Arguments()[0], output = model->Output();
  const DeviceDescriptor cpu = DeviceDescriptor::CPUDevice();
  const ValuePtr good = Value::CreateBatch(input.Shape(), std::vector<float>(2), cpu);
  auto evaluate = [&](const std::unordered_map<Variable, ValuePtr>& arguments,
                      std::unordered_map<Variable, ValuePtr> outputs) {
    model->Evaluate(arguments, outputs);
  };

  // Data of the wrong size for the sample shape.
  EXPECT_FALSE(MessageOf<std::invalid_argument>([&] {
                 Value::CreateBatch(input.Shape(), std::vector<float>(3), cpu);
               }).empty());
  EXPECT_FALSE(MessageOf<std::invalid_argument>([&] {
                 Value::CreateSequence(input.Shape(), std::vector<float>(3), cpu);
               }).empty());
  // A sample of the wrong shape.
  EXPECT_FALSE(MessageOf<std::invalid_argument>([&] {
                 evaluate({{input, Value::CreateBatch(NDShape({3}), std::vector<float>(3), cpu)}},
                          {{output, nullptr}});
               }).empty());
  // A variable of another function, as argument or as output.
  EXPECT_NE(MessageOf<std::invalid_argument>([&] {
              evaluate({{other->Arguments()[0], good}}, {{output, nullptr}});
            }).find("not an argument"),
            std::string::npos);
  EXPECT_NE(MessageOf<std::invalid_argument>([&] {
              evaluate({{input, good}}, {{other->Output(), nullptr}});
            }).find("not an output"),
            std::string::npos);
  // No output, a missing argument, a null value.
  EXPECT_FALSE(MessageOf<std::invalid_argument>([&] { evaluate({{input, good}}, {}); }).empty());
  EXPECT_NE(MessageOf<std::invalid_argument>([&] {
              evaluate({}, {{output, nullptr}});
            }).find("have not been provided"),
            std::string::npos);
  EXPECT_FALSE(MessageOf<std::invalid_argument>([&] {
                 evaluate({{input, nullptr}}, {{output, nullptr}});
               }).empty());
  // A caller-provided output value of the wrong shape.
  EXPECT_FALSE(MessageOf<std::invalid_argument>([&] {
                 evaluate({{input, good}},
                          {{output, Value::CreateBatch(NDShape({3}), std::vector<float>(3), cpu)}});
               }).empty());
  // Copying out with a variable of another shape, or into the wrong element type.
  std::unordered_map<Variable, ValuePtr> outputs = {{output, nullptr}};
  model->Evaluate({{input, good}}, outputs);
  std::vector<std::vector<float>> floats;
  std::vector<std::vector<double>> doubles;
  const Variable five(loom::input_variable({5}));
  EXPECT_FALSE(MessageOf<std::invalid_argument>([&] {
                 outputs[output]->CopyVariableValueTo(five, floats);
               }).empty());
  EXPECT_FALSE(MessageOf<std::invalid_argument>([&] {
                 outputs[output]->CopyVariableValueTo(output, doubles);
               }).empty());
  // A one-hot index outside the dimension; a GPU.
  EXPECT_FALSE(
      MessageOf<std::invalid_argument>([&] { Value::CreateSequence<float>(5, {7}, cpu); }).empty());
  EXPECT_NE(MessageOf<std::invalid_argument>([] { DeviceDescriptor::GPUDevice(0); }).find("GPU"),
            std::string::npos);
}

TEST(CntkErrors, SeveralOutputsAndNonOneHotDataAreRuntimeErrors) {
  const FunctionPtr model = CNTK::Function::Load(Wide(kOneHidden));
  EXPECT_FALSE(MessageOf<std::runtime_error>([&] { model->Output(); }).empty());
  const Variable five(loom::input_variable({5}));
  const ValuePtr dense = Value::CreateBatch(NDShape({5}), std::vector<float>{0, 2, 0, 0, 0},
                                            DeviceDescriptor::CPUDevice());
  std::vector<std::vector<size_t>> indices;
  EXPECT_FALSE(
      MessageOf<std::runtime_error>([&] { dense->CopyVariableValueTo(five, indices); }).empty());
}

TEST(CntkErrors, EmptyVariablesAndNullFunctionsAreCaught) {
  const FunctionPtr model = CNTK::Function::Load(Wide(kLoadAndEval));
  const Variable input = model->Arguments()[0], output = model->Output(), empty;
  EXPECT_FALSE(empty.IsInitialized());
  EXPECT_NE(MessageOf<std::logic_error>([&] { empty.Shape(); }).find("empty"), std::string::npos);
  const ValuePtr good =
      Value::CreateBatch(input.Shape(), std::vector<float>(2), DeviceDescriptor::CPUDevice());
  std::unordered_map<Variable, ValuePtr> outputs = {{empty, nullptr}};
  EXPECT_FALSE(MessageOf<std::logic_error>([&] {
                 model->Evaluate({{input, good}}, outputs);
               }).empty());
  outputs = {{output, nullptr}};
  EXPECT_FALSE(MessageOf<std::logic_error>([&] {
                 model->Evaluate({{input, good}, {empty, good}}, outputs);
               }).empty());
  EXPECT_FALSE(MessageOf<std::invalid_argument>([] { Variable v{FunctionPtr()}; }).empty());
  EXPECT_FALSE(MessageOf<std::invalid_argument>([] { CNTK::AsComposite(nullptr); }).empty());
}

}  // namespace
