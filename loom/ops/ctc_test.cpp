// labels_to_graph and forward_backward (CNTK's CTC): the loss against every alignment enumerated
// (with and without the delay constraint), against PyTorch's ctc_loss, gradients against finite
// differences, ragged and threaded minibatches against one sequence at a time, save and load, and
// the errors. CNTK's own tests have no numbers for these ops. The conformance harness checks
// both ops in its modes (ForwardBackward on labels with repeats, blank-only sequences and the
// fewest frames an alignment needs), not against these values.
#include "loom/ops/ctc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "loom/ops/ops_test_util.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

using V = std::vector<double>;

// One sequence: its frames and its labels, token k starting at frame starts[k].
struct Seq {
  size_t frames;
  std::vector<size_t> tokens, starts;
};

// CNTK's frame-aligned label rows [frames, classes]: 2 at a label's first frame, 1 at its later
// frames; frames before the first label are zero.
V label_rows(const Seq& s, size_t classes) {
  V rows(s.frames * classes, 0.0);
  for (size_t k = 0; k < s.tokens.size(); ++k) {
    const size_t end = k + 1 < s.tokens.size() ? s.starts[k + 1] : s.frames;
    for (size_t t = s.starts[k]; t < end; ++t)
      rows[t * classes + s.tokens[k]] = t == s.starts[k] ? 2 : 1;
  }
  return rows;
}

// Features 2 sin(1 + 0.7 t + 1.3 c + 2.1 b) of sequence b (the PyTorch case's).
V sine_features(const Seq& s, size_t classes, size_t b) {
  V z(s.frames * classes);
  for (size_t t = 0; t < s.frames; ++t)
    for (size_t c = 0; c < classes; ++c)
      z[t * classes + c] = 2 * std::sin(1 + 0.7 * double(t) + 1.3 * double(c) + 2.1 * double(b));
  return z;
}

// -log of the summed probability of every path of classes^frames that collapses to the tokens
// (repeats merged, blanks dropped) and holds each state within the delay constraint: a token at
// most until the next token's start + delay, the blank before it one frame less (the sequence's
// length for the last token and the final blank).
double enumerated_loss(const V& z, const Seq& s, size_t classes, size_t blank, int64_t delay) {
  const size_t tokens = s.tokens.size();
  auto last_frame = [&](size_t state) {  // state 2k: the blank before token k; 2k + 1: token k
    const size_t next = state / 2 + 1;
    const int64_t bound = next < tokens ? int64_t(s.starts[next]) : int64_t(s.frames);
    return delay < 0 ? std::numeric_limits<int64_t>::max()
                     : bound + delay - (state % 2 == 0 ? 1 : 0);
  };
  std::vector<size_t> path(s.frames, 0);
  double total = 0;
  for (;;) {
    bool ok = true;
    size_t emitted = 0;
    double p = 1;
    for (size_t t = 0; t < s.frames && ok; ++t) {
      const size_t c = path[t];
      size_t state;
      if (c == blank) {
        state = 2 * emitted;
      } else if (t > 0 && c == path[t - 1]) {
        state = 2 * emitted - 1;
      } else {
        ok = emitted < tokens && s.tokens[emitted] == c;
        state = 2 * ++emitted - 1;
      }
      ok = ok && int64_t(t) <= last_frame(state);
      double norm = 0;
      for (size_t k = 0; k < classes; ++k) norm += std::exp(z[t * classes + k]);
      p *= std::exp(z[t * classes + c]) / norm;
    }
    if (ok && emitted == tokens) total += p;
    size_t t = 0;  // the next path, as a number in base `classes`
    while (t < s.frames && ++path[t] == classes) path[t++] = 0;
    if (t == s.frames) break;
  }
  return -std::log(total);
}

// forward_backward of labels and features of the given sequences, in a data type.
struct Ctc {
  Variable labels, features;
  Function f;
  ValueMap arguments;
};

Ctc make_ctc(const std::vector<Seq>& seqs, const std::vector<V>& features, size_t classes,
             size_t blank, int64_t delay = -1, DataType dtype = kF64) {
  Ctc c;
  c.labels = sequence::input_variable({classes}, {.dtype = dtype, .name = "labels"});
  c.features = sequence::input_variable(
      {classes}, {.dtype = dtype, .name = "features", .needs_gradient = true});
  c.f = forward_backward(labels_to_graph(c.labels), c.features, blank, {.delay_constraint = delay});
  std::vector<V> label_data;
  for (const Seq& s : seqs) label_data.push_back(label_rows(s, classes));
  dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    auto cast_all = [](const std::vector<V>& v) {
      std::vector<std::vector<T>> out;
      for (const V& x : v) out.emplace_back(x.begin(), x.end());
      return out;
    };
    c.arguments.emplace(c.labels, Value::create_sequences<T>({classes}, cast_all(label_data)));
    c.arguments.emplace(c.features, Value::create_sequences<T>({classes}, cast_all(features)));
  });
  return c;
}

// The minibatch's loss: CNTK's one number.
double loss_of(const Ctc& c) {
  const V value = values(c.f.eval_one(c.arguments));
  EXPECT_EQ(value.size(), 1u);
  return value[0];
}

TEST(ForwardBackward, LossIsMinusTheLogOfEveryAlignmentSummed) {
  struct Case {
    Seq seq;
    size_t blank;
    int64_t delay;
  };
  const std::vector<Case> cases = {
      {{4, {0, 1}, {0, 2}}, 2, -1},
      {{5, {1, 1}, {0, 3}}, 0, -1},
      {{3, {}, {}}, 2, -1},
      {{6, {0, 1, 0}, {0, 2, 4}}, 2, -1},
      {{6, {0, 1, 0}, {0, 2, 4}}, 2, 0},
      {{6, {0, 1, 0}, {0, 2, 4}}, 2, 1},
      {{6, {1, 0}, {1, 3}}, 2, 0},
      {{5, {0, 0}, {0, 1}}, 2, 2},
      {{5, {0}, {2}}, 1, 0},
      {{2, {1}, {0}}, 0, 0},
  };
  const size_t classes = 3;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const Case& k = cases[i];
    const V z = sine_features(k.seq, classes, i);
    const Ctc c = make_ctc({k.seq}, {z}, classes, k.blank, k.delay);
    EXPECT_NEAR(loss_of(c), enumerated_loss(z, k.seq, classes, k.blank, k.delay), 1e-12);
  }
}

TEST(ForwardBackward, TheValueIsTheSumOverTheSequencesAScalarWithoutDynamicAxes) {
  const Seq s{4, {0, 1}, {0, 2}}, r{3, {1}, {1}};
  const V z = sine_features(s, 3, 0), y = sine_features(r, 3, 1);
  const Ctc c = make_ctc({s, r}, {z, y}, 3, 2);
  EXPECT_EQ(c.f.output().shape(), NDShape{});
  EXPECT_TRUE(c.f.output().dynamic_axes().empty());
  EXPECT_NEAR(loss_of(c), enumerated_loss(z, s, 3, 2, -1) + enumerated_loss(y, r, 3, 2, -1), 1e-12);
}

// PyTorch 1.13's torch.nn.functional.ctc_loss(log_softmax(z), ..., blank=3, reduction='none')
// and the gradient of its sum with respect to z, in float64, computed by
//   /usr/bin/python3 - <<EOF
//   import math, torch
//   C, blank, lengths, labels = 4, 3, [5, 3], [[0, 1, 1], [2]]
//   for b, T in enumerate(lengths):
//       z = torch.tensor([[2 * math.sin(1 + 0.7 * t + 1.3 * c + 2.1 * b) for c in range(C)]
//                         for t in range(T)], dtype=torch.float64, requires_grad=True)
//       loss = torch.nn.functional.ctc_loss(z.log_softmax(1)[:, None, :],
//           torch.tensor([labels[b]]), [T], [len(labels[b])], blank=blank, reduction='none')
//       loss.sum().backward()
//       print('%.17g' % loss.item(), ', '.join('%.17g' % v for v in z.grad.flatten().tolist()))
//   EOF
TEST(ForwardBackward, MatchesPyTorchsCtcLossAndItsGradient) {
  const std::vector<Seq> seqs = {{5, {0, 1, 1}, {0, 2, 4}}, {3, {2}, {0}}};
  const V torch_losses = {6.9756656621280255, 1.0060249180323739};
  const std::vector<V> torch_gradients = {
      {-0.47219674165294367, 0.4281686310481122,   0.039768128690470327, 0.0042599819143611878,
       0.4399644749098342,   -0.47516592463929946, 0.017711424827543405, 0.01749002490192186,
       0.71650047467360301,  -0.37854573274509734, 0.027265004660972071, -0.36521974658947776,
       0.20546155455328524,  -0.33563171368131367, 0.062848465779224538, 0.06732169334880389,
       0.032938315522182141, -0.62634701462288533, 0.14137992599118418,  0.45202877310951911},
      {0.20546155455328521, 0.028187918420044113, -0.034270479894507017, -0.19937899307882231,
       0.032938315522182127, 0.017579316338604177, -0.13957177420988426, 0.089054142349097948,
       0.013666284783553426, 0.03812185392343851, -0.35303492324865282, 0.30124678454166087}};
  const Ctc c = make_ctc(seqs, {sine_features(seqs[0], 4, 0), sine_features(seqs[1], 4, 1)}, 4, 3);
  EXPECT_NEAR(loss_of(c), torch_losses[0] + torch_losses[1], 1e-12);
  for (size_t b = 0; b < seqs.size(); ++b)
    EXPECT_NEAR(loss_of(make_ctc({seqs[b]}, {sine_features(seqs[b], 4, b)}, 4, 3)), torch_losses[b],
                1e-12);
  const auto g = c.f.grad(c.arguments, {c.features}).at(c.features).as_sequences<double>();
  for (size_t b = 0; b < seqs.size(); ++b)
    expect_all_near(g[b], torch_gradients[b], 1e-12, "gradient of sequence " + std::to_string(b));
}

TEST(ForwardBackward, GradientsMatchFiniteDifferences) {
  const std::vector<Seq> seqs = {{5, {0, 1, 1}, {0, 2, 4}}, {3, {2}, {0}}, {4, {}, {}}};
  std::vector<V> z;
  for (size_t b = 0; b < seqs.size(); ++b) z.push_back(sine_features(seqs[b], 4, b));
  for (int64_t delay : {-1, 0, 2}) {
    SCOPED_TRACE("delayConstraint " + std::to_string(delay));
    const Ctc c = make_ctc(seqs, z, 4, 3, delay);
    expect_gradients_match(c.f, c.arguments, {c.features});
  }
}

TEST(ForwardBackward, Float32MatchesFloat64) {
  const std::vector<Seq> seqs = {{6, {0, 1, 0}, {0, 2, 4}}, {2, {1}, {1}}};
  std::vector<V> z;
  for (size_t b = 0; b < seqs.size(); ++b) z.push_back(sine_features(seqs[b], 3, b));
  expect_float32_matches_float64([&](DataType dtype) {
    const Ctc c = make_ctc(seqs, z, 3, 2, 1, dtype);
    return OpCase{c.f, c.arguments, {c.features}};
  });
}

// Ragged minibatches, and one large enough for the kernel's threads, give what each sequence
// gives alone: the loss their sum, the gradients each sequence's.
TEST(ForwardBackward, PackedSequencesMatchOneAtATime) {
  for (const size_t n : {size_t{3}, size_t{9}}) {
    const size_t classes = n == 3 ? 4 : 64, blank = classes - 1;
    std::vector<Seq> seqs;
    std::vector<V> z;
    for (size_t b = 0; b < n; ++b) {
      Seq s{n == 3 ? 2 + 2 * b : 40 + 7 * b, {}, {}};
      for (size_t t = 0; t < s.frames; t += 3) {
        s.tokens.push_back((b + t) % blank);
        s.starts.push_back(t);
      }
      seqs.push_back(s);
      z.push_back(random_array({s.frames, classes}, kF64, 10 + b, -3, 3).to_vector<double>());
    }
    for (int64_t delay : {-1, 1}) {
      SCOPED_TRACE(std::to_string(n) + " sequences, delayConstraint " + std::to_string(delay));
      const Ctc all = make_ctc(seqs, z, classes, blank, delay);
      const auto gradients =
          all.f.grad(all.arguments, {all.features}).at(all.features).as_sequences<double>();
      double sum = 0;
      for (size_t b = 0; b < n; ++b) {
        const Ctc one = make_ctc({seqs[b]}, {z[b]}, classes, blank, delay);
        sum += loss_of(one);
        expect_all_near(
            gradients[b],
            one.f.grad(one.arguments, {one.features}).at(one.features).as_sequences<double>()[0],
            1e-12, "gradient of sequence " + std::to_string(b));
      }
      EXPECT_NEAR(loss_of(all), sum, 1e-12 * sum);
    }
  }
}

TEST(ForwardBackward, ReadsALabelWhereAFramesFirstLargestEntryIs2) {
  // Frame rows [2, 2, 0] (a tie: the first, class 0), [0, 1, 0] (no new label) and [0, 0, 2]:
  // the labels are 0, 2; with blank 1.
  const Variable labels = sequence::input_variable({3}, f64("labels"));
  const Variable z = sequence::input_variable({3}, f64("z"));
  const Function f = forward_backward(labels_to_graph(labels), z, 1);
  const V rows = {2, 2, 0, 0, 1, 0, 0, 0, 2};
  const Seq read{3, {0, 2}, {0, 2}};
  const V zs = sine_features(read, 3, 0);
  const V out = values(f.eval_one({{labels, Value::create_sequences<double>({3}, {rows})},
                                   {z, Value::create_sequences<double>({3}, {zs})}}));
  expect_all_near(out, {enumerated_loss(zs, read, 3, 1, -1)}, 1e-12, "loss");
}

TEST(ForwardBackward, SavesAndLoads) {
  const std::vector<Seq> seqs = {{5, {0, 1, 1}, {0, 2, 4}}, {3, {2}, {0}}};
  const Ctc c =
      make_ctc(seqs, {sine_features(seqs[0], 4, 0), sine_features(seqs[1], 4, 1)}, 4, 3, 2);
  const Function loaded = load_model_from_bytes(save_model_to_bytes(c.f));
  EXPECT_EQ(loaded.op().name(), std::string("ForwardBackward"));
  EXPECT_EQ(loaded.attributes().get<int64_t>("blankTokenId"), 3);
  EXPECT_EQ(loaded.attributes().get<int64_t>("delayConstraint"), 2);
  ValueMap args;
  for (const Variable& a : loaded.arguments())
    args.emplace(a, c.arguments.at(a.name() == "labels" ? c.labels : c.features));
  EXPECT_EQ(values(loaded.eval_one(args)), values(c.f.eval_one(c.arguments)));
}

TEST(ForwardBackward, LabelsToGraphIsACopyWithThePassedGradient) {
  const Variable x = input_variable({2}, {.dtype = kF64, .needs_gradient = true});
  const Function g = labels_to_graph(x);
  const Value v = Value::create_batch<double>({2}, {0, 2, 1, 0});
  EXPECT_EQ(values(g.eval_one({{x, v}})), (V{0, 2, 1, 0}));
  EXPECT_EQ(values(g.grad({{x, v}}, {x}).at(x)), (V{1, 1, 1, 1}));
}

TEST(ForwardBackward, RefusesBadInputs) {
  const Variable labels = sequence::input_variable({4}, f64("labels"));
  const Variable z = sequence::input_variable({4}, f64("z"));
  const Function graph = labels_to_graph(labels);
  expect_argument_error([&] { forward_backward(labels, z, 3); },
                        {"forward_backward", "must be labels_to_graph(labels)"});
  expect_shape_error([&] { forward_backward(graph, input_variable({4}, f64("frame")), 3); },
                     {"forward_backward", "same dynamic axes", "repeating its last label"});
  expect_shape_error([&] { forward_backward(graph, sequence::input_variable({5}, f64()), 3); },
                     {"forward_backward", "same sample size"});
  expect_argument_error([&] { forward_backward(graph, z, 4); },
                        {"forward_backward", "blankTokenId 4"});
  expect_argument_error([&] { forward_backward(graph, z, 3, {.delay_constraint = -2}); },
                        {"forward_backward", "delayConstraint", "-2"});

  auto eval = [&](const Seq& s, size_t frames) {
    const Function f = forward_backward(graph, z, 3);
    f.eval_one({{labels, Value::create_sequences<double>({4}, {label_rows(s, 4)})},
                {z, Value::create_sequences<double>({4}, {V(frames * 4, 0.5)})}});
  };
  expect_error<DataError>(
      [&] {
        eval({3, {0, 3}, {0, 1}}, 3);
      },
      {"forward_backward", "sequence 0", "blank", "frame 1"});
  // 1, blank, 1 needs three frames.
  expect_error<DataError>(
      [&] {
        eval({2, {1, 1}, {0, 1}}, 2);
      },
      {"forward_backward", "sequence 0", "2 labels", "2 frames"});
  // The executor compares the sequences of inputs on one axis.
  expect_shape_error([&] { eval({3, {1}, {0}}, 4); }, {"sequences differ"});
}

}  // namespace
}  // namespace loom
