// Packed Values: sequences held as rows in SequenceLayout's order read the same as padded ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "loom/core/value.h"

namespace loom {
namespace {

// Ragged sequences of samples [2] (one empty, two continuing one from the previous minibatch)
// as one array per sequence, and the same sequences padded by hand with their mask.
struct Ragged {
  std::vector<size_t> lengths{3, 0, 5, 2, 5};
  std::vector<bool> starts{true, true, false, true, false};
  std::vector<NDArrayView> sequences;
  Value padded = Value(NDArrayView(DataType::Float64, {1, 1}), false);

  Ragged() {
    const size_t T = 5;
    NDArrayView data(DataType::Float64, {lengths.size(), T, 2});
    NDMask mask(lengths.size(), T);
    double next = 1;
    for (size_t b = 0; b < lengths.size(); ++b) {
      std::vector<double> steps;
      for (size_t t = 0; t < lengths[b]; ++t)
        for (size_t j = 0; j < 2; ++j) {
          data.data<double>()[(b * T + t) * 2 + j] = next;
          steps.push_back(next++);
        }
      sequences.push_back(NDArrayView::from_vector<double>({lengths[b], 2}, steps));
      for (size_t t = lengths[b]; t < T; ++t) mask.set(b, t, MaskKind::Invalid);
      if (!starts[b] && lengths[b] > 0) mask.set(b, 0, MaskKind::Valid);
    }
    padded = Value(data, true, mask);
  }
};

bool same_bytes(const NDArrayView& a, const NDArrayView& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.size() * size_of(a.dtype())) == 0;
}

TEST(PackedValue, ReadsAsThePaddedValueBitForBit) {
  const Ragged r;
  const Value v = Value::create(r.sequences, r.starts);
  ASSERT_TRUE(v.is_packed());
  EXPECT_FALSE(r.padded.is_packed());
  EXPECT_EQ(v.packed_rows().shape(), (NDShape{15, 2}));
  EXPECT_EQ(v.sample_shape(), r.padded.sample_shape());
  EXPECT_EQ(v.num_sequences(), 5u);
  EXPECT_EQ(v.max_sequence_length(), 5u);
  EXPECT_EQ(v.sequence_lengths(), r.lengths);
  EXPECT_EQ(v.number_of_samples(), r.padded.number_of_samples());
  EXPECT_TRUE(same_bytes(v.data(), r.padded.data()));
  EXPECT_EQ(v.mask(), r.padded.mask());
  for (size_t b = 0; b < 5; ++b) {
    EXPECT_EQ(v.sequence_length(b), r.padded.sequence_length(b));
    EXPECT_TRUE(same_bytes(v[b], r.padded[b])) << "sequence " << b;
    if (r.lengths[b] > 0) {
      EXPECT_EQ(v.begins_sequence(b), r.padded.begins_sequence(b));
    }
    EXPECT_EQ(v.begins_sequence(b), bool(r.starts[b]));
  }
  EXPECT_EQ(v.as_sequences<double>(), r.padded.as_sequences<double>());
  EXPECT_EQ(v.as_sequences<float>(), r.padded.as_sequences<float>());
  EXPECT_EQ(v.argmax(), r.padded.argmax());
  EXPECT_EQ(v.to_string(), r.padded.to_string());
  // The rows: step 0 of the sequences by decreasing length (2, 4, 0, 3), then step 1, ...
  const std::vector<double> rows = v.packed_rows().to_vector<double>();
  EXPECT_EQ(std::vector<double>(rows.begin(), rows.begin() + 10),
            (std::vector<double>{7, 8, 21, 22, 1, 2, 17, 18, 9, 10}));
}

TEST(PackedValue, TheConstructorsThatCopyPack) {
  const Value lists = Value::create_sequences<float>({2}, {{1, 2, 3, 4}, {5, 6}});
  const Value flat = Value::create_sequences<float>({2}, {1, 2, 3, 4, 5, 6}, {2, 1});
  ASSERT_TRUE(lists.is_packed() && flat.is_packed());
  EXPECT_EQ(lists.packed_rows().to_vector<float>(), (std::vector<float>{1, 2, 5, 6, 3, 4}));
  EXPECT_TRUE(same_bytes(lists.packed_rows(), flat.packed_rows()));
  EXPECT_EQ(lists.data().to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 0, 0}));
  // Sparse sequences and batches stay as they are.
  EXPECT_FALSE(
      Value::create({NDArrayView::sparse_csr<float>({1, 3}, {0, 1}, {2}, {4})}).is_packed());
  const Value batch = Value::create_batch<float>({2}, {1, 2, 3, 4});
  EXPECT_FALSE(batch.is_packed());
  EXPECT_THROW(batch.packed_rows(), StateError);
  // No sequences at all, and sequences that are all empty.
  const Value none = Value::create_sequences<float>({2}, std::vector<std::vector<float>>{});
  EXPECT_EQ(none.data().shape(), (NDShape{0, 0, 2}));
  const Value empty = Value::create_sequences<float>({2}, std::vector<std::vector<float>>(2));
  EXPECT_EQ(empty.data().shape(), (NDShape{2, 0, 2}));
  EXPECT_EQ(empty.number_of_samples(), 0u);
}

TEST(PackedValue, RejectsRowsThatAreNotTheLayouts) {
  const SequenceLayout l = SequenceLayout::from_lengths({2, 1});
  EXPECT_THROW(Value::packed(NDArrayView(DataType::Float32, {2, 4}), l), ShapeError);
  EXPECT_THROW(Value::packed(NDArrayView::sparse_csr<float>({3, 2}, {0, 0, 0, 0}, {}, {}), l),
               ArgumentError);
  SequenceLayout short_begins = l;
  short_begins.begins = {true};
  EXPECT_THROW(Value::packed(NDArrayView(DataType::Float32, {3, 4}), short_begins), ArgumentError);
}

// Sequence b's steps [length, sample...], from packed rows, padded data and sparse data alike.
TEST(ValueSequence, GivesEachSequencesStepsDenseInStorageOfItsOwn) {
  const Ragged r;  // float64, lengths 3, 0, 5, 2, 5
  const Value packed = Value::create(r.sequences, r.starts);
  for (const Value* v : {&packed, &r.padded})
    for (size_t b = 0; b < r.lengths.size(); ++b) {
      const NDArrayView s = v->sequence(b);
      EXPECT_TRUE(same_bytes(s, r.sequences[b])) << "sequence " << b;
      EXPECT_FALSE(s.aliases(v->is_packed() ? v->packed_rows() : v->data()));
    }
  EXPECT_THROW(packed.sequence(5), ArgumentError);
  // float32, an empty sequence first.
  const std::vector<size_t> lengths{0, 2, 1};
  const Value f = Value::create_sequences<float>({2}, {1, 2, 3, 4, 5, 6}, lengths);
  const Value f_padded(f.data(), true, f.mask());
  for (const Value* v : {&f, &f_padded}) {
    EXPECT_EQ(v->sequence(0).shape(), (NDShape{0, 2}));
    EXPECT_EQ(v->sequence(1).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(v->sequence(2).to_vector<float>(), (std::vector<float>{5, 6}));
  }
  // A batch's sample, and sparse sequences densified.
  const Value batch = Value::create_batch<float>({2}, {1, 2, 3, 4});
  EXPECT_EQ(batch.sequence(1).shape(), (NDShape{1, 2}));
  EXPECT_EQ(batch.sequence(1).to_vector<float>(), (std::vector<float>{3, 4}));
  const Value one_hot = Value::one_hot_sequences(3, {{2, 0}, {}, {1}}, DataType::Float64);
  EXPECT_EQ(one_hot.sequence(0).to_vector<double>(), (std::vector<double>{0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(one_hot.sequence(1).shape(), (NDShape{0, 3}));
  EXPECT_EQ(one_hot.sequence(2).to_vector<double>(), (std::vector<double>{0, 1, 0}));
}

// A sequence of 10 MB (above the threads' grain) is split over threads, each step copied once.
TEST(ValueSequence, GathersALongSequenceBitForBit) {
  const size_t n = size_t{1} << 19;  // floats a step: 2 MB
  const std::vector<size_t> lengths{5, 0, 2};
  std::vector<float> data(7 * n);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i % 1000003);
  const Value v = Value::create_sequences<float>({n}, data, lengths);
  const std::vector<float> first = v.sequence(0).to_vector<float>();
  EXPECT_TRUE(std::equal(first.begin(), first.end(), data.begin()));
  const std::vector<float> last = v.sequence(2).to_vector<float>();
  EXPECT_TRUE(std::equal(last.begin(), last.end(), data.begin() + 5 * ptrdiff_t(n)));
  EXPECT_EQ(last.size(), 2 * n);
}

// Reading the shape, the lengths, the mask, a sequence or the rows leaves a packed Value's
// padded form unmade; data() makes it, for every copy.
TEST(PackedValue, PadsOnlyWhenItsDataIsAskedFor) {
  const Ragged r;
  const Value v = Value::create(r.sequences, r.starts), copy = v;
  EXPECT_EQ(v.shape(), r.padded.shape());
  EXPECT_EQ(v.sequence_lengths(), r.lengths);
  EXPECT_EQ(v.mask(), r.padded.mask());
  EXPECT_TRUE(same_bytes(v.sequence(2), r.padded.sequence(2)));
  EXPECT_EQ(v.as_sequences<double>(), r.padded.as_sequences<double>());
  EXPECT_EQ(v.argmax(), r.padded.argmax());
  EXPECT_EQ(v.packed_rows().shape(), (NDShape{15, 2}));
  EXPECT_FALSE(v.has_padded_form());
  EXPECT_TRUE(same_bytes(copy.data(), r.padded.data()));
  EXPECT_TRUE(v.has_padded_form());
  EXPECT_FALSE(r.padded.has_padded_form());  // not packed: its data is its own
}

// Copies share the padded form, made once: two threads asking at once get the same one.
TEST(PackedValue, CopiesPadOnceFromAnyThread) {
  const Ragged r;
  for (int round = 0; round < 20; ++round) {
    const Value v = Value::create(r.sequences, r.starts);
    const Value a = v, b = v;
    const NDArrayView* seen[2] = {};
    const std::optional<NDMask>* masks[2] = {};
    std::thread one([&] { seen[0] = &a.data(), masks[0] = &a.mask(); });
    std::thread two([&] { masks[1] = &b.mask(), seen[1] = &b.data(); });
    one.join();
    two.join();
    EXPECT_EQ(seen[0], seen[1]);
    EXPECT_EQ(masks[0], masks[1]);
    EXPECT_EQ(&v.data(), seen[0]);
    EXPECT_TRUE(same_bytes(*seen[0], r.padded.data()));
    EXPECT_EQ(*masks[0], r.padded.mask());
  }
}

}  // namespace
}  // namespace loom
