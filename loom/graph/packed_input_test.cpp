// Packed sequences through the executor: a packed input is read where it lies (and kept for
// backward), a packed root gradient too, and outputs and gradients come back packed, the same
// as from padded inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "loom/core/error_test_util.h"
#include "loom/graph/executor.h"
#include "loom/graph/graph_test_util.h"
#include "loom/ops/ops.h"

namespace loom {
namespace {

bool same_bytes(const NDArrayView& a, const NDArrayView& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.size() * size_of(a.dtype())) == 0;
}

// y = x tanh(x) + past_value(x): elementwise, and a step that reads the one before it.
struct Net {
  Variable x = sequence::input_variable({3}, {.name = "x"});
  Function y = plus(element_times(x, tanh(x)), sequence::past_value(x));
};

const std::vector<size_t> kLengths{3, 0, 5, 2};

TEST(PackedInput, GivesWhatThePaddedFormGives) {
  const Net n;
  const Value packed = Value::create_sequences<float>({3}, random_floats(30, 1), kLengths);
  const Value padded(packed.data(), true, packed.mask());
  ASSERT_TRUE(packed.is_packed());
  ASSERT_FALSE(padded.is_packed());
  Executor a({n.y}, {n.x}), b({n.y}, {n.x});
  a.forward({{n.x, packed}}, true);
  b.forward({{n.x, padded}}, true);
  a.backward(n.y);
  b.backward(n.y);
  for (const auto& [from_packed, from_padded] :
       {std::pair{a.output_value(n.y), b.output_value(n.y)},
        std::pair{a.gradient_value(n.x), b.gradient_value(n.x)}}) {
    ASSERT_TRUE(from_packed.is_packed() && from_padded.is_packed());  // outputs are packed
    EXPECT_TRUE(same_bytes(from_packed.packed_rows(), from_padded.packed_rows()));
    EXPECT_EQ(from_packed.sequence_lengths(), kLengths);
    EXPECT_EQ(from_packed.mask(), packed.mask());
  }
}

TEST(PackedInput, IsReadInPlaceAndKeptForABackwardCalledLater) {
  const Net n;
  const std::vector<float> xs = random_floats(30, 2);
  Executor exec({n.y}, {n.x});
  {
    const Value x = Value::create_sequences<float>({3}, xs, kLengths);
    exec.forward({{n.x, x}}, true);
    EXPECT_EQ(exec.tensor(n.x).data, x.packed_rows().raw_data());  // no staging copy
  }  // the caller's value is gone; backward still reads x
  exec.backward(n.y);
  // dy/dx_t = tanh(x_t) + x_t (1 - tanh(x_t)^2), plus 1 where step t + 1 reads x_t.
  std::vector<std::vector<float>> want;
  for (size_t s = 0, from = 0; s < kLengths.size(); from += kLengths[s] * 3, ++s) {
    std::vector<float>& g = want.emplace_back();
    for (size_t i = 0; i < kLengths[s] * 3; ++i) {
      const float v = xs[from + i], t = std::tanh(v);
      g.push_back(t + v * (1 - t * t) + (i / 3 + 1 < kLengths[s] ? 1.f : 0.f));
    }
  }
  const auto got = exec.gradient_value(n.x).as_sequences<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < got.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size());
    for (size_t i = 0; i < got[s].size(); ++i)
      EXPECT_NEAR(got[s][i], want[s][i], 1e-5f) << "sequence " << s << " element " << i;
  }
}

TEST(PackedInput, APackedRootGradientIsReadUnchanged) {
  Variable x = sequence::input_variable({3}, {.name = "x"});
  Function y = tanh(x);
  const std::vector<float> xs = random_floats(30, 3), dys = random_floats(30, 4);
  Executor exec({y}, {x});
  exec.forward({{x, Value::create_sequences<float>({3}, xs, kLengths)}}, true);
  {
    const Value dy = Value::create_sequences<float>({3}, dys, kLengths);
    exec.backward(y, &dy);
    EXPECT_EQ(dy.as_sequences<float>(),
              Value::create_sequences<float>({3}, dys, kLengths).as_sequences<float>());
  }  // gone: the executor keeps what it read
  const auto got = exec.gradient_value(x).as_sequences<float>();
  EXPECT_EQ(exec.gradient_value(y).as_sequences<float>(),
            Value::create_sequences<float>({3}, dys, kLengths).as_sequences<float>());
  for (size_t s = 0, from = 0; s < kLengths.size(); from += kLengths[s] * 3, ++s)
    for (size_t i = 0; i < got[s].size(); ++i) {
      const float t = std::tanh(xs[from + i]);
      EXPECT_NEAR(got[s][i], dys[from + i] * (1 - t * t), 1e-6f);
    }
}

TEST(PackedInput, ARootGradientOfAnotherFormIsAnError) {
  Variable x = sequence::input_variable({3}, {.name = "x"});
  Function y = tanh(x);
  Executor exec({y}, {x});
  exec.forward({{x, Value::create_sequences<float>({3}, random_floats(30, 9), kLengths)}}, true);
  const Value other_lengths = Value::create_sequences<float>({3}, random_floats(30, 10), {5, 5});
  const Value other_sample = Value::create_sequences<float>({5}, random_floats(50, 11), kLengths);
  const Value padded = Value::create_sequences<float>({3}, random_floats(30, 12), kLengths);
  for (const Value* g : {&other_lengths, &other_sample})
    EXPECT_NE(message_of<ShapeError>([&] { exec.backward(y, g); }).find("does not match"),
              std::string::npos);
  const Value padded_dy(padded.data(), true, padded.mask());  // the same sequences, padded
  exec.backward(y, &padded_dy);
  EXPECT_EQ(exec.gradient_value(y).as_sequences<float>(), padded.as_sequences<float>());
}

// The executor takes a packed input's layout as it is, and keeps a padded input's from one
// minibatch to the next while the sequences are the same.
TEST(PackedInput, ItsLayoutIsTakenAsItIs) {
  const Net n;
  Executor exec({n.y}, {n.x});
  const Value packed = Value::create_sequences<float>({3}, random_floats(30, 5), kLengths);
  exec.forward({{n.x, packed}}, false);
  EXPECT_EQ(exec.tensor(n.x).layout, packed.packed_layout().get());
  const std::vector<size_t> others{3, 2, 5};
  const auto padded = [&](uint64_t seed) {
    const Value v = Value::create_sequences<float>({3}, random_floats(30, seed), others);
    return std::pair{v, Value(v.data(), true, v.mask())};
  };
  const auto [packed_6, padded_6] = padded(6);
  exec.forward({{n.x, padded_6}}, false);
  const SequenceLayout* first = exec.tensor(n.x).layout;
  EXPECT_EQ(first->lengths, others);
  EXPECT_EQ(exec.output_value(n.y).as_sequences<float>(), [&] {
    Executor fresh({n.y});
    fresh.forward({{n.x, packed_6}}, false);
    return fresh.output_value(n.y).as_sequences<float>();
  }());
  exec.forward({{n.x, padded(7).second}}, false);
  EXPECT_EQ(exec.tensor(n.x).layout, first);  // the same sequences
}

// Outputs and gradients come back on the executor's layouts, shared rather than copied: the
// packed input's own, or one an op made (sequence::slice).
TEST(PackedInput, OutputsShareTheirLayout) {
  const Net n;
  const Function tail = sequence::slice(n.y, 1, 0);
  Executor exec({n.y, tail}, {n.x});
  const std::vector<float> xs = random_floats(30, 9);
  const Value packed = Value::create_sequences<float>({3}, xs, kLengths);
  exec.forward({{n.x, packed}}, true);
  exec.backward(n.y);
  const Value y = exec.output_value(n.y), t = exec.output_value(tail);
  EXPECT_EQ(y.packed_layout(), packed.packed_layout());
  EXPECT_EQ(exec.gradient_value(n.x).packed_layout(), packed.packed_layout());
  EXPECT_EQ(t.packed_layout(), exec.output_value(tail).packed_layout());
  EXPECT_EQ(t.packed_layout().get(), exec.tensor(tail).layout);
  EXPECT_EQ(t.sequence_lengths(), (std::vector<size_t>{2, 0, 4, 1}));
  const auto ys = y.as_sequences<float>(), ts = t.as_sequences<float>();
  for (size_t s = 0; s < kLengths.size(); ++s)
    EXPECT_EQ(ts[s],
              std::vector<float>(ys[s].begin() + std::min<ptrdiff_t>(3, ptrdiff_t(ys[s].size())),
                                 ys[s].end()));
}

TEST(PackedInput, InputsOnOneAxisNeedTheSameLengths) {
  Variable x = sequence::input_variable({3}, {.name = "x"});
  Variable z = sequence::input_variable({3}, {.name = "z"});
  Function y = plus(x, z);
  Executor exec({y});
  const std::vector<float> xs = random_floats(30, 7), zs = random_floats(30, 8);
  const Value a = Value::create_sequences<float>({3}, xs, kLengths);
  const Value b = Value::create_sequences<float>({3}, zs, {3, 1, 5, 1});
  EXPECT_NE(message_of<ShapeError>([&] {
              exec.forward({{x, a}, {z, b}}, false);
            }).find("their sequences differ: lengths [3,0,5,2] and [3,1,5,1]"),
            std::string::npos);
  // The same lengths, one packed and one padded: the padded one is packed in a's order.
  const Value c = Value::create_sequences<float>({3}, zs, kLengths);
  exec.forward({{x, a}, {z, Value(c.data(), true, c.mask())}}, false);
  const auto sums = exec.output_value(y).as_sequences<float>();
  for (size_t s = 0, from = 0; s < kLengths.size(); from += kLengths[s] * 3, ++s)
    for (size_t i = 0; i < kLengths[s] * 3; ++i) EXPECT_EQ(sums[s][i], xs[from + i] + zs[from + i]);
}

}  // namespace
}  // namespace loom
