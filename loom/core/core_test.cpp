#include <gtest/gtest.h>

#include "loom/core/dictionary.h"
#include "loom/core/random.h"
#include "loom/core/shared.h"
#include "loom/core/threads.h"
#include "loom/core/value.h"

namespace loom {
namespace {

TEST(NDShape, PrintsAndCounts) {
  NDShape s{28, 28};
  EXPECT_EQ(s.total_size(), 784u);
  EXPECT_EQ(s.to_string(), "[28,28]");
  EXPECT_EQ(NDShape{}.total_size(), 1u);
  EXPECT_EQ((NDShape{NDShape::kInferred, 5}).to_string(), "[-1,5]");
  EXPECT_TRUE((NDShape{NDShape::kInferred, 5}).has_inferred());
  EXPECT_EQ(s.prepend(4), (NDShape{4, 28, 28}));
  EXPECT_THROW(s.sub_shape(1, 3), ArgumentError);
}

TEST(NDArrayView, DenseRoundTripAndAliasing) {
  auto v = NDArrayView::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  NDArrayView alias = v;
  alias.data<float>()[0] = 10;
  EXPECT_EQ(v.to_vector<float>()[0], 10);
  NDArrayView copy = v.deep_clone();
  copy.data<float>()[1] = 20;
  EXPECT_EQ(v.to_vector<float>()[1], 2);
  EXPECT_THROW(v.data<double>(), ShapeError);
  EXPECT_THROW(NDArrayView::from_vector<float>({2, 2}, {1, 2, 3}), ShapeError);
  EXPECT_EQ(v.reshaped({3, 2}).shape(), (NDShape{3, 2}));
}

// From kParallelBytes on, a copy splits in a piece per thread; an odd length and three
// threads make pieces of unequal, unaligned lengths.
TEST(NDArrayView, LargeCopyEqualsTheSourceForAnyThreadCount) {
  const size_t n = kParallelBytes / sizeof(float) + 12345;
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = float(i % 1000003) * 0.5f;
  const auto source = NDArrayView::from_vector<float>({n}, values);
  const int before = get_max_num_cpu_threads();
  for (int threads : {1, 2, 3}) {
    set_max_num_cpu_threads(threads);
    NDArrayView target(DataType::Float32, {n});
    target.copy_from(source);
    EXPECT_EQ(target.to_vector<float>(), values) << threads << " threads";
    EXPECT_EQ(source.deep_clone().to_vector<float>(), values) << threads << " threads";
  }
  set_max_num_cpu_threads(before);
}

TEST(NDArrayView, SparseCsrDensifiesAndValidates) {
  auto s = NDArrayView::sparse_csr<float>({2, 4}, {0, 1, 3}, {2, 0, 3}, {1.f, 2.f, 3.f});
  EXPECT_TRUE(s.is_sparse());
  EXPECT_EQ(s.nnz(), 3u);
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{0, 0, 1, 0, 2, 0, 0, 3}));
  EXPECT_THROW(NDArrayView::sparse_csr<float>({2, 4}, {0, 1, 1}, {4}, {1.f}), ShapeError);
  EXPECT_THROW(NDArrayView::sparse_csr<float>({2, 4}, {0, 1}, {1}, {1.f}), ShapeError);
  EXPECT_THROW(s.raw_data(), StateError);
}

TEST(Value, SequencesArePaddedWithMask) {
  auto v = Value::create_sequences<float>({2}, {{1, 2, 3, 4, 5, 6}, {7, 8}});
  EXPECT_TRUE(v.is_sequence());
  EXPECT_EQ(v.data().shape(), (NDShape{2, 3, 2}));
  EXPECT_EQ(v.sequence_lengths(), (std::vector<size_t>{3, 1}));
  EXPECT_EQ(v.number_of_samples(), 4u);
  EXPECT_EQ(v.mask()->at(1, 0), MaskKind::SequenceBegin);
  EXPECT_EQ(v.mask()->at(1, 1), MaskKind::Invalid);
  auto back = v.as_sequences<float>();
  EXPECT_EQ(back[1], (std::vector<float>{7, 8}));
}

TEST(Value, OneHotIsSparse) {
  auto v = Value::one_hot(3, {2, 0});
  EXPECT_TRUE(v.is_sparse());
  EXPECT_EQ(v.data().to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 0, 0}));
  auto s = Value::one_hot_sequences(4, {{1, 2}, {3}});
  EXPECT_EQ(s.data().shape(), (NDShape{2, 2, 4}));
  EXPECT_EQ(s.sequence_lengths(), (std::vector<size_t>{2, 1}));
  EXPECT_THROW(Value::one_hot(3, {3}), ArgumentError);
}

TEST(Value, OneHotSkipGivesAZeroVector) {
  auto v = Value::one_hot(3, {2, Value::kOneHotSkip});
  EXPECT_EQ(v.data().to_vector<float>(), (std::vector<float>{0, 0, 1, 0, 0, 0}));
  auto s = Value::one_hot_sequences(2, {{Value::kOneHotSkip, 1}, {0}}, DataType::Float64);
  EXPECT_EQ(s.sequence_lengths(), (std::vector<size_t>{2, 1}));
  EXPECT_EQ(s.data().to_vector<double>(), (std::vector<double>{0, 0, 0, 1, 1, 0, 0, 0}));
}

TEST(Value, SequencesFromFlatDataAndLengths) {
  auto v = Value::create_sequences<double>({2}, {1, 2, 3, 4, 5, 6, 7, 8}, {3, 0, 1});
  EXPECT_EQ(v.data().shape(), (NDShape{3, 3, 2}));
  EXPECT_EQ(v.sequence_lengths(), (std::vector<size_t>{3, 0, 1}));
  EXPECT_EQ(v.as_sequences<double>(),
            (std::vector<std::vector<double>>{{1, 2, 3, 4, 5, 6}, {}, {7, 8}}));
  try {
    Value::create_sequences<float>({2}, {1, 2, 3}, {1, 1});
    ADD_FAILURE() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("3 values are not the 2 steps of shape [2]"),
              std::string::npos)
        << e.what();
  }
}

TEST(Value, CreateFromOneDenseArrayPerSequence) {
  auto a = NDArrayView::from_vector<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  auto b = NDArrayView::from_vector<float>({1, 2}, {7, 8});
  auto v = Value::create({a, b});
  EXPECT_TRUE(v.is_sequence());
  EXPECT_FALSE(v.is_sparse());
  EXPECT_EQ(v.data().shape(), (NDShape{2, 3, 2}));
  EXPECT_EQ(v.sequence_lengths(), (std::vector<size_t>{3, 1}));
  EXPECT_EQ(v.data().to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0}));
  EXPECT_TRUE(v.mask()->begins_sequence(0));
  // A continuation of a sequence cut off by the previous minibatch begins Valid.
  auto c = Value::create({a, b}, {true, false});
  EXPECT_TRUE(c.mask()->begins_sequence(0));
  EXPECT_EQ(c.mask()->at(1, 0), MaskKind::Valid);
  EXPECT_EQ(c.sequence_lengths(), (std::vector<size_t>{3, 1}));
}

TEST(Value, CreateFromOneCsrMatrixPerSequence) {
  // [[0 1 0], [2 0 3]] and [[0 0 4]]: rows are steps.
  auto a = NDArrayView::sparse_csr<double>({2, 3}, {0, 1, 3}, {1, 0, 2}, {1, 2, 3});
  auto b = NDArrayView::sparse_csr<double>({1, 3}, {0, 1}, {2}, {4});
  auto v = Value::create({b, a});
  EXPECT_TRUE(v.is_sparse());
  EXPECT_EQ(v.data().shape(), (NDShape{2, 2, 3}));
  EXPECT_EQ(v.sequence_lengths(), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(v.data().to_vector<double>(),
            (std::vector<double>{0, 0, 4, 0, 0, 0, 0, 1, 0, 2, 0, 3}));
  EXPECT_EQ(v.as_sequences<double>()[0], (std::vector<double>{0, 0, 4}));
  // Samples of two axes: a step is two CSR rows.
  auto m = NDArrayView::sparse_csr<float>({1, 2, 2}, {0, 1, 2}, {1, 0}, {5, 6});
  auto n = NDArrayView::sparse_csr<float>({2, 2, 2}, {0, 0, 1, 1, 2}, {0, 1}, {7, 8});
  auto w = Value::create({m, n});
  EXPECT_EQ(w.data().shape(), (NDShape{2, 2, 2, 2}));
  EXPECT_EQ(w.data().to_vector<float>(),
            (std::vector<float>{0, 5, 6, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 8}));
}

TEST(Value, CreateRejectsMixedSequences) {
  auto dense = NDArrayView::from_vector<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto sparse = NDArrayView::sparse_csr<double>({1, 3}, {0, 1}, {2}, {4});
  auto wide = NDArrayView::from_vector<double>({1, 4}, {1, 2, 3, 4});
  auto single = NDArrayView::from_vector<float>({1, 3}, {1, 2, 3});
  for (const auto& other : {sparse, wide, single}) {
    try {
      Value::create({dense, other});
      ADD_FAILURE() << "expected ShapeError";
    } catch (const ShapeError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("sequence 1 is"), std::string::npos) << msg;
      EXPECT_NE(msg.find(other.shape().to_string()), std::string::npos) << msg;
      EXPECT_NE(msg.find("sequence 0 is float64 of shape [2,3]"), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(Value::create({}), ArgumentError);
  EXPECT_THROW(Value::create({dense}, {true, false}), ArgumentError);
}

TEST(Dictionary, NestedTypedValues) {
  Dictionary inner;
  inner["count"] = uint64_t{7};
  Dictionary d;
  d["inner"] = inner;
  d["name"] = "sgd";
  d["list"] = DictionaryVector{1.5, std::string("x")};
  EXPECT_EQ(d.get_dictionary("inner").get<uint64_t>("count"), 7u);
  EXPECT_EQ(d.get<std::string>("name"), "sgd");
  EXPECT_EQ(d.get<DictionaryVector>("list")[0].get<double>(), 1.5);
  EXPECT_THROW(d.get<double>("name"), StateError);
  EXPECT_THROW(d.at("missing"), StateError);
}

TEST(Random, CounterBasedAndRestorable) {
  RandomGenerator a(42, 1);
  for (int i = 0; i < 5; ++i) a.uniform();
  Dictionary state = a.checkpoint();
  double next = a.uniform();
  RandomGenerator b;
  b.restore(state);
  EXPECT_EQ(b.uniform(), next);
  RandomGenerator c(42, 2);
  EXPECT_NE(RandomGenerator(42, 1).next_u32(), c.next_u32());
  double sum = 0, sq = 0;
  RandomGenerator n(1);
  for (int i = 0; i < 20000; ++i) {
    double x = n.normal();
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / 20000, 0.0, 0.03);
  EXPECT_NEAR(sq / 20000, 1.0, 0.05);
}

TEST(Random, FixedSeedGivesSameStreams) {
  set_fixed_random_seed(3);
  auto g1 = next_default_generator(), g2 = next_default_generator();
  set_fixed_random_seed(3);
  EXPECT_EQ(next_default_generator().next_u32(), g1.next_u32());
  EXPECT_EQ(next_default_generator().next_u32(), g2.next_u32());
}

}  // namespace
}  // namespace loom

#include "loom/core/threads.h"

namespace loom {
namespace {

TEST(Threads, ConfigurableAndValidated) {
  int before = get_max_num_cpu_threads();
  EXPECT_GE(before, 1);
  set_max_num_cpu_threads(1);
  EXPECT_EQ(get_max_num_cpu_threads(), 1);
  EXPECT_THROW(set_max_num_cpu_threads(0), ArgumentError);
  set_max_num_cpu_threads(before);
  EXPECT_EQ(get_max_num_cpu_threads(), before);
}

// A borrowed object is used in place and never deleted; a shared one is owned.
TEST(Shared, BorrowsAReferenceAndSharesASharedPtr) {
  std::string owned_by_caller = "value";
  Shared<std::string> borrowed = owned_by_caller;
  EXPECT_EQ(borrowed.get(), &owned_by_caller);
  EXPECT_EQ(borrowed.use_count(), 0);  // no control block: nothing to delete
  Shared<std::string> shared = std::make_shared<std::string>("shared");
  EXPECT_EQ(*shared, "shared");
  EXPECT_EQ(shared.use_count(), 1);
  const std::shared_ptr<std::string> copy = shared;
  EXPECT_EQ(shared.use_count(), 2);
}

}  // namespace
}  // namespace loom
