// NDArrayView's numpy-like reading: print as seed 002's arrays print, index, argmax.
#include <gtest/gtest.h>

#include <sstream>

#include "loom/core/value.h"

namespace loom {
namespace {

TEST(NDArrayFormat, PrintsAsTheSeedsNumpy) {
  // Seed 002: print('data =\n', X_train_lr[:4]) of float32 data.
  auto data =
      NDArrayView::from_vector<float>({4, 2}, {2.2741797f, 3.56347561f, 5.12873602f, 5.79089499f,
                                               1.3574543f, 5.5718112f, 3.54340553f, 2.46254587f});
  EXPECT_EQ(data.to_string(),
            "[[ 2.2741797   3.56347561]\n"
            " [ 5.12873602  5.79089499]\n"
            " [ 1.3574543   5.5718112 ]\n"
            " [ 3.54340553  2.46254587]]");
  // print(model_lr.W.value)
  auto W = NDArrayView::from_vector<double>({2, 2},
                                            {-1.25055373, -0.53687984, -0.99188507, -0.30086043});
  EXPECT_EQ(W.to_string(), "[[-1.25055373 -0.53687984]\n [-0.99188507 -0.30086043]]");
  EXPECT_EQ(NDArrayView::from_vector<float>({2, 2}, {1, 0, 0, 1}).to_string(),
            "[[ 1.  0.]\n [ 0.  1.]]");
  EXPECT_EQ(NDArrayView::from_vector<double>({3}, {-0.5, 2, 0.25}).to_string(),
            "[-0.5   2.    0.25]");
}

TEST(NDArrayFormat, ScalarsExponentsWrappingAndSummaries) {
  EXPECT_EQ(NDArrayView::from_vector<float>(NDShape{}, {1.5f}).to_string(), " 1.5");
  EXPECT_EQ(NDArrayView::from_vector<double>({2}, {1e-5, 1}).to_string(), "[ 1.e-05  1.e+00]");
  EXPECT_EQ(NDArrayView::from_vector<double>({2}, {1.5e-5, 1}).to_string(), "[ 1.5e-05  1.0e+00]");
  // Ten scores need two lines of at most 75 characters.
  std::vector<float> scores(10, 0.12345678f);
  std::string s = NDArrayView::from_vector<float>({1, 10}, scores).to_string();
  ASSERT_NE(s.find('\n'), std::string::npos);
  EXPECT_LE(s.find('\n'), 75u);
  EXPECT_EQ(s.substr(0, 27), "[[ 0.12345678  0.12345678  ");
  std::vector<float> big(2000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = float(i % 7);
  EXPECT_EQ(NDArrayView::from_vector<float>({2000}, big).to_string(),
            "[ 0.  1.  2. ...,  2.  3.  4.]");  // i % 7
  EXPECT_EQ(NDArrayView::from_vector<float>({2, 1000}, big).to_string(),
            "[[ 0.  1.  2. ...,  3.  4.  5.]\n [ 6.  0.  1. ...,  2.  3.  4.]]");
  std::ostringstream out;
  out << Value::one_hot(3, {2});
  EXPECT_EQ(out.str(), "[[ 0.  0.  1.]]");
}

TEST(NDArrayFormat, ItemsAndArgmax) {
  auto a = NDArrayView::from_vector<float>({2, 3}, {1, 5, 2, 7, 0, 7});
  EXPECT_EQ(a[1].to_vector<float>(), (std::vector<float>{7, 0, 7}));
  EXPECT_EQ(a[1].argmax(), 0u);  // the first of equals, as numpy
  EXPECT_EQ(a.argmax(), 3u);
  EXPECT_EQ(a[1].data<float>(), a.data<float>() + 3);  // a view, not a copy
  EXPECT_EQ(Value::one_hot(4, {3, 1})[1].to_vector<float>(), (std::vector<float>{0, 1, 0, 0}));
  EXPECT_EQ(Value(a, false).argmax(), (std::vector<size_t>{1, 0}));
  EXPECT_THROW(a[2], ArgumentError);
}

}  // namespace
}  // namespace loom
