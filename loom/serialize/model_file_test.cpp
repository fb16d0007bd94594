#include "loom/serialize/model_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "loom/core/crc32c.h"
#include "loom/graph/graph_impl.h"
#include "loom/layers/convolution.h"
#include "loom/layers/dense.h"
#include "loom/layers/pooling.h"
#include "loom/layers/recurrent.h"
#include "loom/ops/assign.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/ops.h"
#include "loom/serialize/container.h"
#include "loom/serialize/dictionary_codec.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

class ModelFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("loom_model_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// A graph using every op family: Dense layers (one called twice), sparse input into times,
// sequences, float64, constants, and many outputs.
struct Model {
  Function f;
  ValueMap args;
  Variable loss;
};

Model build_model() {
  set_fixed_random_seed(11);
  Variable x = input_variable({4}, {.name = "x"});
  Variable s = input_variable({10}, {.is_sparse = true, .name = "s"});
  Variable q = sequence::input_variable({3}, {.name = "q"});
  Variable y = input_variable({5}, {.name = "y"});
  Variable x64 = input_variable({3}, {.dtype = DataType::Float64, .name = "x64"});

  Function hidden = Dense(6, {.activation = tanh, .name = "hidden"});
  Function shared = Dense(6, {.name = "shared"});
  Variable h = hidden(x);
  Variable z6 = plus(plus(shared(h), shared(relu(h))), Dense(6, {.activation = sigmoid})(s));
  Constant one = constant(1.0, DataType::Float32, "one");
  Constant c6 = constant(NDArrayView::from_vector<float>({6}, {1, -2, 3, -4, 5, -6}), "c6");
  Variable el = element_min(element_divide(sqrt(abs(z6)), plus(square(z6), one)),
                            minus(exp(negate(z6)), log(sigmoid(z6))));
  el = element_max(element_times(el, tanh(z6)), element_times(c6, z6));
  Variable r = reshape(z6, {2, 3});
  Variable sl = slice(transpose(r), Axis(0), 1, 3);                                // [2,2]
  Variable sp = splice({sl, reshape(slice(z6, Axis(0), 0, 4), {2, 2})}, Axis(0));  // [4,2]
  Variable red1 = reduce_sum(sp, Axis(0));
  Variable red2 = reduce_mean(sp);
  Variable red3 = reduce_max(sp, std::vector<Axis>{Axis(0), Axis(-1)}, false);
  // Random and normalization ops on the loss's path: the loaded model's dropout draws the same
  // masks and its batch normalization updates the same running statistics.
  Variable bn = batch_normalization(
      dropout(z6, 0.5, 5), parameter(NDShape{6}, constant_initializer(2), DataType::Float32),
      parameter(NDShape{6}, zeros(), DataType::Float32),
      constant(NDArrayView::from_vector<float>({6}, {0, 0, 0, 0, 0, 0})),
      constant(NDArrayView::from_vector<float>({6}, {1, 1, 1, 1, 1, 1})),
      constant(NDArrayView::from_vector<float>({1}, {1})), false);
  Variable z5 = Dense(5, {.name = "out"})(
      layer_normalization(bn, parameter(NDShape{6}, constant_initializer(1), DataType::Float32),
                          parameter(NDShape{6}, zeros(), DataType::Float32)));
  Variable sm = softmax(z5);
  Variable lsm = log_softmax(r, Axis(0));
  Variable ce = cross_entropy_with_softmax(z5, y, "ce");
  Variable err = classification_error(z5, y, 2, "err");
  Variable se = squared_error(sm, y);
  Variable bce = binary_cross_entropy(sigmoid(z5), y);
  Variable qd = Dense(4, {.activation = relu})(q);
  Variable sq_last = sequence::last(qd), sq_first = sequence::first(q);
  Variable sq_sum = sequence::reduce_sum(qd);
  // A recurrent loop, whose past_value reads an output the file defines after it, with a
  // learnable initial state; a future_value outside any loop.
  Variable hp = placeholder({4}, DataType::Float32, q.dynamic_axes(), "h_prev");
  Parameter h0 = parameter(NDShape{4}, constant_initializer(0.5), DataType::Float32, "h0");
  Function hq = tanh(plus(qd, times(sequence::past_value(hp, h0), parameter({4, 4}))));
  hq.replace_placeholders({{hp, hq}});
  Variable sq_rec = sequence::last(sequence::future_value(hq, 2));
  // A recurrent layer as one fused op, with every optional input.
  Variable sq_lstm = sequence::last(Recurrence(
      LSTM(4, {.cell_shape = 3, .use_peepholes = true, .enable_self_stabilization = true}),
      {.go_backwards = true,
       .initial_state = {
           parameter(NDShape{}, constant_initializer(0.25), DataType::Float32, "s0")}})(qd));
  // The sequence ops that make new axes (where, gather, slice) or take them back (scatter).
  Variable qc = sequence::input_variable(NDShape(), {.name = "qc"});
  Variable sq_sel =
      sequence::scatter(element_times(sequence::gather(qd, qc), sequence::where(qc)), qc);
  Variable sq_marks = plus(
      element_times(sequence::broadcast_as(sequence::reduce_max(qd), q), sequence::is_first(q)),
      sequence::is_last(q));
  Variable sq_new = sequence::slice(plus(sq_sel, sq_marks), 1, 0);
  // unpack's padded data (free dimension T, through times) and mask.
  const std::vector<Variable> sq_unpacked = sequence::unpack(q, 0.5).outputs();
  Variable sq_pad = times(sq_unpacked[0], parameter({3, 2})), sq_mask = sq_unpacked[1];
  // ... and back onto q's axis.
  Variable sq_like = to_sequence_like(sq_unpacked[0], q);
  // CTC over qd, with labels aligned to q's frames (2 where a label starts).
  Variable ql = sequence::input_variable({4}, {.name = "ql"});
  Variable sq_ctc = forward_backward(labels_to_graph(ql), qd, 3, {.delay_constraint = 1});
  Variable d64 = Dense(NDShape{2, 3}, {.dtype = DataType::Float64})(x64);
  Variable t64 = times(x64, parameter(NDShape{3, 2}, he_normal(), DataType::Float64, "W64"));
  Variable c32 = cast(t64, DataType::Float32);
  // NCE with a seed: the loaded model draws the same noise classes.
  Variable nce = nce_loss(parameter(NDShape{5, 6}, glorot_uniform()), parameter(NDShape{5, 1}), z6,
                          y, constant(NDArrayView::from_vector<float>({5}, {1, 2, 3, 4, 5})),
                          {.num_samples = 3, .seed = 7});
  // Random tensors and class sampling with seeds: the loaded model draws the same values.
  Variable rnd = plus(uniform_random_like(z6, {.seed = 3}),
                      gumbel_random(NDShape{6}, DataType::Float32, {.seed = 4}));
  Constant class_weights = constant(NDArrayView::from_vector<float>({5}, {1, 2, 3, 4, 5}));
  Variable smp = random_sample(class_weights, 2, false, 6);
  Variable inc = random_sample_inclusion_frequency(class_weights, 3, false, 8);
  // assign writes its ref at every evaluation: the model is saved before it is evaluated.
  Parameter acc = parameter(NDArrayView::from_vector<float>({2}, {1, 2}), "acc");
  Variable asg = assign(acc, plus(acc, constant(NDArrayView::from_vector<float>({2}, {3, 4}))));

  // Images: convolution, pooling (max, average, global) and transposed convolution.
  Variable img = input_variable({2, 5, 5}, {.name = "img"});
  Variable cv = Convolution2D({3, 3}, 3, {.activation = relu, .pad = true})(img);  // [3,5,5]
  Variable mp = MaxPooling({2, 2}, {.strides = {2}})(cv);                          // [3,2,2]
  Variable ap = AveragePooling({2, 2}, {.pad = true})(cv);                         // [3,5,5]
  Variable ct = ConvolutionTranspose({2, 2}, 2, {.strides = {2}})(mp);             // [2,4,4]
  Variable gp = GlobalMaxPooling()(ap);                                            // [3,1,1]

  Model m;
  m.f = combine(
      {el,      sp,       red1,   red2,   red3,    sm,     lsm,    ce,      err,    se,  bce,
       sq_last, sq_first, sq_sum, sq_rec, sq_lstm, sq_new, sq_pad, sq_mask, d64,    t64, asg,
       ct,      gp,       c32,    nce,    rnd,     smp,    inc,    sq_ctc,  sq_like},
      "everything");
  m.loss = ce;
  m.args.emplace(x, random_batch({4}, 4, DataType::Float32, 1));
  m.args.emplace(s, Value::one_hot(10, {1, 3, 7, 0}));
  m.args.emplace(y, Value(Value::one_hot(5, {0, 2, 4, 1}).data().to_dense(), false));
  m.args.emplace(q, random_sequences({3}, {2, 4, 1}, DataType::Float32, 2));
  m.args.emplace(
      ql, Value::create_sequences<float>({4}, {{2, 0, 0, 0, 1, 0, 0, 0},
                                               {0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0},
                                               {2, 0, 0, 0}}));
  m.args.emplace(qc, Value::create_sequences<float>(NDShape(), {{1, 0}, {2, 0, 1, 1}, {0}}));
  m.args.emplace(x64, random_batch({3}, 4, DataType::Float64, 3));
  m.args.emplace(img, random_batch({2, 5, 5}, 4, DataType::Float32, 4));
  return m;
}

// The same arguments, bound to the variables of another graph with the same uids.
ValueMap rebind(const ValueMap& args, const Function& g) {
  std::map<std::string, Variable> by_uid;
  for (const Variable& v : g.arguments()) by_uid.emplace(v.uid(), v);
  ValueMap out;
  for (const auto& [v, value] : args) out.emplace(by_uid.at(v.uid()), value);
  return out;
}

void expect_bit_identical(const Value& a, const Value& b, const std::string& what) {
  ASSERT_EQ(a.data().shape(), b.data().shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.is_sequence(), b.is_sequence()) << what;
  ASSERT_EQ(a.mask().has_value(), b.mask().has_value()) << what;
  if (a.mask()) {
    EXPECT_EQ(*a.mask(), *b.mask()) << what;
  }
  NDArrayView da = a.data().to_dense(), db = b.data().to_dense();
  ASSERT_EQ(std::memcmp(da.raw_data(), db.raw_data(), da.size() * size_of(da.dtype())), 0)
      << what << " differs";
}

TEST_F(ModelFileTest, EveryOpFamilyRoundTripsBitIdentically) {
  Model m = build_model();
  save_model(m.f, path("m.loom"));
  Function g = load_model(path("m.loom"));

  EXPECT_EQ(g.uid(), m.f.uid());
  EXPECT_EQ(g.name(), "everything");
  EXPECT_EQ(g.to_string(), m.f.to_string());
  auto fo = m.f.outputs(), go = g.outputs();
  ASSERT_EQ(go.size(), fo.size());
  for (size_t i = 0; i < fo.size(); ++i) {
    EXPECT_EQ(go[i].uid(), fo[i].uid());
    EXPECT_EQ(go[i].name(), fo[i].name());
    EXPECT_EQ(go[i].owner().op_name(), fo[i].owner().op_name());
    EXPECT_EQ(go[i].owner().uid(), fo[i].owner().uid());
    EXPECT_EQ(go[i].owner().attributes().size(), fo[i].owner().attributes().size());
  }
  auto fa = m.f.arguments(), ga = g.arguments();
  ASSERT_EQ(ga.size(), fa.size());
  for (size_t i = 0; i < fa.size(); ++i) {
    EXPECT_EQ(ga[i].uid(), fa[i].uid());
    EXPECT_EQ(ga[i].name(), fa[i].name());
    EXPECT_EQ(ga[i].type_string(), fa[i].type_string());
    EXPECT_EQ(ga[i].dtype(), fa[i].dtype());
    EXPECT_EQ(ga[i].dynamic_axes(), fa[i].dynamic_axes());
  }
  auto fp = m.f.parameters(), gp = g.parameters();
  ASSERT_EQ(gp.size(), fp.size());
  for (size_t i = 0; i < fp.size(); ++i) {
    EXPECT_EQ(gp[i].uid(), fp[i].uid());
    EXPECT_EQ(gp[i].name(), fp[i].name());
    EXPECT_FALSE(gp[i].value().aliases(fp[i].value()));  // a copy, not the same storage
  }
  EXPECT_EQ(g.constants().size(), m.f.constants().size());

  // Every op family; each op the conformance harness (ops/conformance_test.cpp) does not save
  // and load itself used at least once.
  std::set<std::string> used;
  for (const auto& fn : topological_order(g.outputs())) used.insert(fn->op->name());
  for (const OpSchema& s : op_table()) {
    // custom_proxy_test.cpp saves and loads CustomProxyOp, which cannot be evaluated.
    if (s.conformance.empty() && s.op->name() != std::string_view("CustomProxyOp")) {
      EXPECT_TRUE(used.count(s.op->name())) << s.op->name();
    }
  }

  const ValueMap before = m.f.eval(m.args), after = g.eval(rebind(m.args, g));
  for (size_t i = 0; i < fo.size(); ++i)
    expect_bit_identical(before.at(fo[i]), after.at(go[i]), "output " + fo[i].uid());

  // Gradients too.
  Function loss_f = Function(m.loss), loss_g;
  for (const Variable& o : go)
    if (o.uid() == m.loss.uid()) loss_g = o.owner();
  ASSERT_TRUE(loss_g.valid());
  std::vector<Variable> wf, wg;
  for (auto& p : loss_f.parameters()) wf.push_back(p);
  for (auto& p : loss_g.parameters()) wg.push_back(p);
  ASSERT_EQ(wf.size(), wg.size());
  ValueMap gf = loss_f.grad(m.args, wf), gg = loss_g.grad(rebind(m.args, g), wg);
  for (size_t i = 0; i < wf.size(); ++i)
    expect_bit_identical(gf.at(wf[i]), gg.at(wg[i]), "gradient of " + wf[i].uid());

  // Saving the loaded model gives the same bytes.
  EXPECT_EQ(save_model_to_bytes(g), save_model_to_bytes(m.f));
}

TEST_F(ModelFileTest, LoadedModelContinuesTheDropoutMasks) {
  Variable x = input_variable({1000}, {.name = "x"});
  Function f = dropout(x, 0.5, 7, "drop");
  const ValueMap args{{x, Value::create_batch<float>({1000}, std::vector<float>(4000, 1.0f))}};
  auto masks = [&](const Function& m, const ValueMap& a) {
    return m.forward(a).second.at(m.output()).data().to_vector<float>();
  };
  masks(f, args);  // the generator has moved on from its seed
  save_model(f, path("drop.loom"));
  Function g = load_model(path("drop.loom"));
  const auto next = masks(f, args);
  EXPECT_EQ(masks(g, rebind(args, g)), next);
  EXPECT_NE(masks(g, rebind(args, g)), next);
  // A generator where the op draws none is refused.
  Dictionary d = model_to_dictionary(relu(x));
  DictionaryVector fns = d.get<DictionaryVector>("functions");
  DictionaryMap relu_fn = fns[0].get<DictionaryMap>();
  relu_fn["random"] = RandomGenerator(1).checkpoint();
  fns[0] = relu_fn;
  d["functions"] = fns;
  EXPECT_THROW(model_from_dictionary(d, "test"), DataError);
}

// A file from before TopK had two outputs (testdata/top_k_before_one_op.model, saved by Python's
// combine([plus(t.outputs[0], 1, name='shifted'), t.outputs[1]]) of t = top_k(x, 2,
// name='top'), x (3, 4)): its TopK (the values) and TopKIndices (the positions) load as outputs
// of TopK, and compute what they did.
TEST_F(ModelFileTest, FilesWithTopKIndicesLoad) {
  const Function f =
      load_model(LOOM_SOURCE_DIR "/loom/serialize/testdata/top_k_before_one_op.model");
  ASSERT_EQ(f.outputs().size(), 2u);
  const Function values = f.outputs()[0].producer().inputs()[0].producer();
  const Function positions = f.outputs()[1].producer();
  EXPECT_EQ(values.op().name(), std::string("TopK"));
  EXPECT_EQ(positions.op().name(), std::string("TopK"));
  EXPECT_EQ(values.outputs()[0], f.outputs()[0].producer().inputs()[0]);
  EXPECT_EQ(positions.outputs()[1], f.outputs()[1]);
  EXPECT_EQ(positions.name(), "top_TopKIndexMask");
  const Variable x = f.arguments().at(0);
  const ValueMap out =
      f.eval({{x, Value::create_batch<float>({3, 4}, {1, 5, 3, 2, 9, 8, 7, 6, 0, -1, 4, 4})}});
  EXPECT_EQ(out.at(f.outputs()[0]).data().to_vector<double>(),
            (std::vector<double>{6, 4, 10, 9, 5, 5}));
  EXPECT_EQ(out.at(f.outputs()[1]).data().to_vector<double>(),
            (std::vector<double>{1, 2, 0, 1, 2, 3}));
  // Saved again, each TopK has both outputs.
  const Function again = load_model_from_bytes(save_model_to_bytes(f));
  EXPECT_EQ(again.outputs()[1].producer().outputs().size(), 2u);
}

TEST_F(ModelFileTest, SharedParametersStayOneParameter) {
  Variable x1 = input_variable({2}, {.name = "x1"}), x2 = input_variable({2}, {.name = "x2"});
  Function d = Dense(3);
  Function both = plus(d(x1), d(x2));
  ASSERT_EQ(both.parameters().size(), 2u);
  Function g = load_model_from_bytes(save_model_to_bytes(both));
  auto ps = g.parameters();
  ASSERT_EQ(ps.size(), 2u);
  // Both calls read the one loaded W: changing it changes both.
  size_t uses = 0;
  for (const auto& fn : topological_order(g.outputs()))
    for (const Variable& in : fn->inputs) uses += in.impl() == ps[0].impl();
  EXPECT_EQ(uses, 2u);
}

TEST_F(ModelFileTest, UncalledLayerKeepsItsInitializerAndGenerator) {
  set_fixed_random_seed(3);
  Function d = Dense(5, {.init = glorot_normal(0.5)});
  Function loaded = load_model_from_bytes(save_model_to_bytes(d));
  EXPECT_EQ(loaded.to_string(), "Dense(x: Sequence[tensor]) -> Sequence[tensor]");
  EXPECT_EQ(loaded.parameters()[0].shape().to_string(), "[-1,5]");
  EXPECT_FALSE(loaded.parameters()[0].impl()->value.has_value());
  // Calling both infers W and draws its values from the same generator state.
  Function a = d(input_variable({4})), b = loaded(input_variable({4}));
  NDArrayView wa = a.parameters()[0].value(), wb = b.parameters()[0].value();
  ASSERT_EQ(wa.shape(), (NDShape{4, 5}));
  EXPECT_EQ(wa.to_vector<float>(), wb.to_vector<float>());
}

TEST_F(ModelFileTest, PrimitiveRootAndLeafRoot) {
  Variable x = input_variable({3}, {.name = "x"});
  Function r = relu(x, "act");
  Function g = load_model_from_bytes(save_model_to_bytes(r));
  EXPECT_FALSE(g.is_composite());
  EXPECT_EQ(g.op_name(), "ReLU");
  EXPECT_EQ(g.uid(), r.uid());
  EXPECT_EQ(g.name(), "act");
  Function leaf = Function(x);  // a composite of an input alone
  Function h = load_model_from_bytes(save_model_to_bytes(leaf));
  EXPECT_TRUE(h.is_composite());
  EXPECT_EQ(h.arguments()[0].uid(), x.uid());
}

TEST_F(ModelFileTest, TwoLoadedCopiesCannotBeSavedTogether) {
  Variable x = input_variable({3});
  auto bytes = save_model_to_bytes(Dense(2)(x));
  Function a = load_model_from_bytes(bytes), b = load_model_from_bytes(bytes);
  Function both = combine({a.output(), b.output()});
  try {
    save_model_to_bytes(both);
    FAIL();
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("share the uid"), std::string::npos) << e.what();
  }
}

TEST_F(ModelFileTest, SaveReplacesAtomicallyAndReportsIOErrors) {
  Variable x = input_variable({3});
  save_model(relu(x), path("m.loom"));
  save_model(sigmoid(x), path("m.loom"));
  EXPECT_EQ(load_model(path("m.loom")).op_name(), "Sigmoid");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
  EXPECT_THROW(save_model(relu(x), path("missing/m.loom")), IOError);
  EXPECT_THROW(load_model(path("nothing.loom")), IOError);
}

// ---- damaged files ----

std::string load_error(std::span<const uint8_t> bytes) {
  try {
    load_model_from_bytes(bytes, "m.loom");
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

std::vector<uint8_t> small_model_bytes() {
  set_fixed_random_seed(5);
  Variable x = input_variable({3}, {.name = "x"});
  return save_model_to_bytes(Dense(2, {.activation = relu})(x));
}

TEST_F(ModelFileTest, TruncatedFilesAreDataErrors) {
  auto bytes = small_model_bytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string e = load_error(std::span(bytes.data(), n));
    ASSERT_NE(e.find("'m.loom': truncated"), std::string::npos) << n << ": " << e;
  }
  // Through a file as well.
  std::ofstream(path("t.loom"), std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size() / 2));
  try {
    load_model(path("t.loom"));
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(
        std::string(e.what()).find(path("t.loom") + "': truncated: the header says the file has"),
        std::string::npos)
        << e.what();
  }
}

TEST_F(ModelFileTest, EveryFlippedByteIsADataError) {
  auto good = small_model_bytes();
  std::mt19937 gen(9);
  for (size_t i = 0; i < good.size(); ++i) {
    auto bytes = good;
    bytes[i] ^= uint8_t(1 + gen() % 255);
    std::string e = load_error(bytes);
    ASSERT_FALSE(e.empty()) << "damage at byte " << i << " was not noticed";
    ASSERT_EQ(e.rfind("'m.loom'", 0), 0u) << e;
  }
}

TEST_F(ModelFileTest, ForeignAndFutureFilesAreNamed) {
  std::string png("\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10\0\0\0\x10\x08\x06\0\0\0", 29);
  std::ofstream(path("image.png"), std::ios::binary) << png;
  std::ofstream(path("notes.txt")) << "This is not a model.\n";
  try {
    load_model(path("image.png"));
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("image.png': not a Loom file: it starts with 89 50 4E 47"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("(a PNG image)"), std::string::npos) << e.what();
  }
  try {
    load_model(path("notes.txt"));
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("not a Loom file: it starts with 54 68 69 73 20 69 73 "
                                         "20 (text)"),
              std::string::npos)
        << e.what();
  }
  auto future = small_model_bytes();
  future[8] = 2;
  uint32_t crc = crc32c(future.data(), 36);
  std::memcpy(future.data() + 36, &crc, 4);
  EXPECT_NE(load_error(future).find("'m.loom': format version 2 is newer than this Loom reads"),
            std::string::npos)
      << load_error(future);
}

// A file with a valid container around a graph dictionary edited by the test.
std::vector<uint8_t> file_with_graph(const Dictionary& g) {
  ContainerWriter w(ContentKind::Model);
  w.add_section(SectionKind::Graph, encode_dictionary(g));
  return w.bytes();
}

// g[list][index][key] = value.
Dictionary edit(Dictionary g, const std::string& list, size_t index, const std::string& key,
                DictionaryValue value) {
  DictionaryVector items = g.get<DictionaryVector>(list);
  DictionaryMap item = items.at(index).get<DictionaryMap>();
  item[key] = std::move(value);
  items[index] = std::move(item);
  g[list] = std::move(items);
  return g;
}

TEST_F(ModelFileTest, InconsistentGraphsAreNamed) {
  Variable x = input_variable({3}, {.name = "x"});
  Parameter W = parameter(NDShape{3, 2}, glorot_uniform(), DataType::Float32, "W");
  Function f = relu(times(x, W, 1, -1, "mul"), "act");
  const Dictionary g = model_to_dictionary(f);
  ASSERT_NO_THROW(load_model_from_bytes(file_with_graph(g)));
  // functions[0] is times, functions[1] relu; variables[0] is x, variables[1] W.
  auto expect = [&](const Dictionary& bad, const std::string& message) {
    std::string e = load_error(file_with_graph(bad));
    EXPECT_NE(e.find(message), std::string::npos) << "got: " << e << "\nwanted: " << message;
    EXPECT_EQ(e.rfind("'m.loom' section graph: ", 0), 0u) << e;
  };
  expect(edit(g, "functions", 0, "op", "Frobnicate"), "unknown op 'Frobnicate'");
  DictionaryVector outs = g.get<DictionaryVector>("functions")[0]
                              .get<DictionaryMap>()
                              .at("outputs")
                              .get<DictionaryVector>();
  DictionaryMap out0 = outs[0].get<DictionaryMap>();
  out0["shape"] = NDShape{7};
  expect(edit(g, "functions", 0, "outputs", DictionaryVector{out0}),
         "functions[0].outputs[0]: stored shape [7] differs from the [2] that Times infers");
  out0["shape"] = NDShape{2};
  out0["dtype"] = int64_t(2);
  expect(edit(g, "functions", 0, "outputs", DictionaryVector{out0}),
         "stored data type float64 differs from the float32");
  // relu reading its own output: a cycle, which the file order cannot express.
  const std::string relu_out = f.output().uid();
  expect(edit(g, "functions", 1, "inputs", DictionaryVector{relu_out}),
         "functions[1]: input 0 '" + relu_out + "' is not defined before its use");
  expect(edit(g, "functions", 0, "inputs", DictionaryVector{x.uid()}), "cannot re-create Times");
  expect(edit(g, "variables", 1, "uid", x.uid()), "uid '" + x.uid() + "' is defined twice");
  expect(edit(g, "variables", 1, "value", NDArrayView(DataType::Float32, NDShape{2, 3})),
         "variables[1]: value of shape [2,3] for a variable of shape [3,2]");
  expect(edit(g, "variables", 1, "value", int64_t(5)),
         "variables[1]: 'value' holds int64 where NDArrayView is expected");
  expect(edit(g, "variables", 0, "kind", "Wizard"), "variable kind 'Wizard'");
  expect(edit(g, "variables", 0, "dtype", int64_t(9)), "data type 9 is not 1");
  expect(edit(g, "variables", 0, "shape", NDShape{uint64_t(1) << 30, uint64_t(1) << 30}),
         "has more than 2^40 elements");
  expect(edit(g, "variables", 0, "dynamic_axes", DictionaryVector{"defaultDynamicAxis"}),
         "the first dynamic axis is 'defaultDynamicAxis', not the batch axis");
  // W with its input axis inferred again: loading would allocate [2^40, 2] for it.
  expect(edit(g, "variables", 1, "shape", NDShape{NDShape::kInferred, 2}),
         "variables[1]: value of shape [3,2] for a variable of shape [-1,2]");
  Dictionary deferred = edit(g, "variables", 1, "shape", NDShape{NDShape::kInferred, 2});
  DictionaryVector vars = deferred.get<DictionaryVector>("variables");
  DictionaryMap w = vars[1].get<DictionaryMap>();
  w.erase("value");
  vars[1] = w;
  DictionaryMap big_x = vars[0].get<DictionaryMap>();
  big_x["shape"] = NDShape{uint64_t(1) << 40};
  vars[0] = big_x;
  deferred["variables"] = vars;
  expect(deferred, "functions[0]: input 1 '" + W.uid() +
                       "' is a parameter of shape [-1,2] with inferred dimensions");
  Dictionary newer = g;
  newer["graph_version"] = int64_t(3);
  expect(newer, "graph version 3 is not one this Loom reads");
  Dictionary no_root = g;
  DictionaryMap root = g.get<DictionaryMap>("root");
  root["outputs"] = DictionaryVector{"nope"};
  no_root["root"] = root;
  expect(no_root, "graph.root: output 0 'nope' is not defined");
  Dictionary missing(DictionaryMap{{"graph_version", int64_t(1)}});
  expect(missing, "graph: missing 'variables'");
}

}  // namespace
}  // namespace loom
