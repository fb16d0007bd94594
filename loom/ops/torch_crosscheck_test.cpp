// Convolution (with and without bias), pooling and batch normalization (training mode),
// forward and backward in float32, against PyTorch 1.13 (Debian's python3-torch, run as
// /usr/bin/python3 loom/ops/testdata/torch_conv_pool.py). Skipped when python3 or torch is
// missing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "loom/graph/executor.h"
#include "loom/ops/convolution.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/normalization.h"
#include "loom/ops/pooling.h"

namespace loom {
namespace {

const std::string& case_dir() {
  static const std::string dir = [] {
    auto d =
        std::filesystem::path(::testing::TempDir()) / ("loom_torch_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

// The folder of case i.
std::string dir_of(size_t i) {
  const std::string d = case_dir() + "/" + std::to_string(i);
  std::filesystem::create_directories(d);
  return d;
}

void write_floats(const std::string& path, const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(f.data()), std::streamsize(f.size() * sizeof(float)));
}

std::vector<double> read_floats(const std::string& path, size_t n) {
  std::vector<float> f(n);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(f.data()), std::streamsize(n * sizeof(float)));
  EXPECT_EQ(size_t(in.gcount()), n * sizeof(float)) << path;
  return {f.begin(), f.end()};
}

std::string join(const std::vector<size_t>& v) {
  std::string s;
  for (size_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// Runs the script on the folders of cases 0..n-1; false when python3 or torch is missing.
bool run_torch(size_t n) {
  if (access("/usr/bin/python3", X_OK) != 0) return false;
  std::string cmd = "/usr/bin/python3 " LOOM_SOURCE_DIR "/loom/ops/testdata/torch_conv_pool.py";
  for (size_t i = 0; i < n; ++i) cmd += " " + dir_of(i);
  const int status = std::system(cmd.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return false;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << " failed";
  return true;
}

struct Case {
  std::string op;  // conv, max, average, bn (spatial), bn_elementwise (per element)
  NDShape x, w_or_window;
  std::vector<size_t> strides{1, 1}, dilation{1, 1};
  std::vector<bool> auto_padding{false, false};
  size_t groups = 1;
  bool bias = false;  // conv
};

std::vector<Case> cases() {
  return {
      {"conv", {3, 9, 8}, {4, 3, 3, 2}, {2, 1}, {1, 1}, {true, true}},
      {"conv", {4, 10, 7}, {6, 2, 4, 3}, {1, 2}, {2, 1}, {true, false}, 2},
      {"conv", {1, 28, 28}, {8, 1, 5, 5}, {1, 1}, {1, 1}, {true, true}},
      {"max", {3, 11, 11}, {3, 3}, {2, 2}},
      {"max", {2, 8, 7}, {3, 2}, {2, 1}, {1, 1}, {true, true}},
      {"average", {2, 9, 6}, {4, 3}, {2, 2}, {1, 1}, {true, true}},
      // The seed's second layer with its bias, 32 -> 48 channels (oneDNN's blocked kernels).
      {"conv", {32, 7, 6}, {48, 32, 3, 3}, {1, 1}, {1, 1}, {false, false}, 1, true},
      {"bn", {16, 5, 4}, {16}},
      {"bn_elementwise", {3, 2, 2}, {3, 2, 2}},
  };
}

// Loom's results of one case, to compare once PyTorch has run: dw and db are the kernel's
// and bias's gradients, or batch normalization's scale's and bias's.
struct Results {
  std::vector<double> y, dx, dw, db;
};

constexpr size_t kBatch = 3;

// Batch normalization in training mode (what Function::eval and grad do not run): the output
// and the gradients for output gradient dy, through an executor.
Results batch_norm_results(const Case& c, const Variable& x, const Value& xv,
                           const std::vector<double>& dy) {
  const bool spatial = c.op == "bn";
  const NDShape stats = c.w_or_window;
  Parameter scale = parameter(random_array(stats, DataType::Float32, 3, 0.5, 1.5), "scale");
  Parameter bias = parameter(random_array(stats, DataType::Float32, 4), "bias");
  Function f = batch_normalization(x, scale, bias, constant(NDArrayView(DataType::Float32, stats)),
                                   constant(NDArrayView(DataType::Float32, stats)),
                                   constant(NDArrayView(DataType::Float32, {1})), spatial);
  Executor ex({f.output()}, {x, scale, bias});
  ex.forward({{x, xv}}, /*is_training=*/true);
  const Value dy_value(NDArrayView::from_vector<float>(c.x.prepend(kBatch),
                                                       std::vector<float>(dy.begin(), dy.end())),
                       false);
  ex.backward(f.output(), &dy_value);
  return {ex.output_value(f.output()).data().to_vector<double>(),
          ex.gradient_value(x).data().to_vector<double>(),
          ex.parameter_gradient(scale).to_vector<double>(),
          ex.parameter_gradient(bias).to_vector<double>()};
}

// Builds case c in Loom, computes its results and writes its inputs into folder d.
Results prepare(const Case& c, const std::string& d) {
  Variable x = input_variable(c.x, {.name = "x"});
  const Value xv = random_batch(c.x, kBatch, DataType::Float32, 2);
  write_floats(d + "/x.bin", xv.data().to_vector<double>());
  if (c.op.rfind("bn", 0) == 0) {
    // The output gradient: one random weight per element of the batch.
    const auto dy = random_array(c.x.prepend(kBatch), DataType::Float32, 7).to_vector<double>();
    write_floats(d + "/dy.bin", dy);
    const Results r = batch_norm_results(c, x, xv, dy);
    // scale and bias were drawn with the seeds batch_norm_results used.
    write_floats(d + "/w.bin",
                 random_array(c.w_or_window, DataType::Float32, 3, 0.5, 1.5).to_vector<double>());
    write_floats(d + "/b.bin",
                 random_array(c.w_or_window, DataType::Float32, 4).to_vector<double>());
    std::ofstream(d + "/case.txt") << "op=" << c.op << "\nx=" << kBatch << "," << join(c.x.dims())
                                   << "\nw=" << join(c.w_or_window.dims()) << "\n";
    return r;
  }
  const bool conv = c.op == "conv";
  const NDShape window = conv ? c.w_or_window.sub_shape(2) : c.w_or_window;
  Parameter W = parameter(random_array(conv ? c.w_or_window : NDShape{1}, DataType::Float32, 1));
  std::optional<Variable> b;
  if (c.bias) b = parameter(random_array({c.w_or_window[0], 1, 1}, DataType::Float32, 3));
  Function f = conv ? convolution(W, x,
                                  {.strides = c.strides,
                                   .auto_padding = c.auto_padding,
                                   .dilation = c.dilation,
                                   .groups = c.groups,
                                   .bias = b})
                    : pooling(x, c.op == "max" ? PoolingType::Max : PoolingType::Average, window,
                              {.strides = c.strides, .auto_padding = c.auto_padding});
  // The pads Loom's geometry chose, spelled out for PyTorch.
  std::vector<size_t> pads;
  for (size_t i = 0; i < 2; ++i) {
    const auto a = conv_detail::window_axis("test", c.x[1 + i], window[i], c.strides[i],
                                            c.dilation[i], c.auto_padding[i], 0, 0);
    EXPECT_GE(a.pad_lower, 0);
    EXPECT_GE(a.pad_upper, 0);
    pads.push_back(size_t(a.pad_lower));
    pads.push_back(size_t(a.pad_upper));
  }
  // weighted_output's weights, the same for every sample, are the output gradient.
  const auto weights =
      random_array(f.output().shape(), DataType::Float32, 7, 0.5, 1.5).to_vector<double>();
  std::vector<double> dy;
  for (size_t n = 0; n < kBatch; ++n) dy.insert(dy.end(), weights.begin(), weights.end());
  std::vector<Variable> wrt{x};
  if (conv) wrt.push_back(W);
  if (b) wrt.push_back(*b);
  const ValueMap grads = weighted_output(f).grad({{x, xv}}, wrt);
  Results r{f.eval_one({{x, xv}}).data().to_vector<double>(),
            grads.at(x).data().to_vector<double>(),
            conv ? grads.at(W).data().to_vector<double>() : std::vector<double>{},
            b ? grads.at(*b).data().to_vector<double>() : std::vector<double>{}};
  write_floats(d + "/dy.bin", dy);
  if (conv) write_floats(d + "/w.bin", W.value().to_vector<double>());
  if (b) write_floats(d + "/b.bin", b->value().to_vector<double>());
  std::ofstream(d + "/case.txt") << "op=" << c.op << "\nx=" << kBatch << "," << join(c.x.dims())
                                 << "\nw=" << join(c.w_or_window.dims())
                                 << "\nwindow=" << join(window.dims())
                                 << "\nstride=" << join(c.strides)
                                 << "\ndilation=" << join(c.dilation) << "\ngroups=" << c.groups
                                 << "\npads=" << join(pads) << "\nbias=" << int(c.bias) << "\n";
  return r;
}

TEST(TorchCrossCheck, ConvolutionPoolingAndBatchNormMatchPyTorch) {
  const std::vector<Case> all = cases();
  std::vector<Results> loom_results;
  for (size_t i = 0; i < all.size(); ++i) loom_results.push_back(prepare(all[i], dir_of(i)));
  if (!run_torch(all.size()))
    GTEST_SKIP() << "/usr/bin/python3 with torch (Debian's python3-torch) is missing";
  using gradient_check_detail::expect_all_near;
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& c = all[i];
    const Results& r = loom_results[i];
    const std::string d = dir_of(i);
    SCOPED_TRACE(c.op + " " + c.x.to_string() + " " + c.w_or_window.to_string());
    expect_all_near(r.y, read_floats(d + "/y.bin", r.y.size()), 1e-5, "output");
    expect_all_near(r.dx, read_floats(d + "/dx.bin", r.dx.size()), 1e-5, "input gradient");
    if (!r.dw.empty())
      expect_all_near(r.dw, read_floats(d + "/dw.bin", r.dw.size()), 1e-4, "kernel/scale gradient");
    if (!r.db.empty())
      expect_all_near(r.db, read_floats(d + "/db.bin", r.db.size()), 1e-4, "bias gradient");
  }
}

}  // namespace
}  // namespace loom
