// Convolution and pooling, forward and backward in float32, against PyTorch 1.13 (Debian's
// python3-torch, run as /usr/bin/python3 loom/ops/testdata/torch_conv_pool.py). Skipped
// when python3 or torch is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "loom/ops/convolution.h"
#include "loom/ops/gradient_check.h"
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
  std::string op;  // conv, max, average
  NDShape x, w_or_window;
  std::vector<size_t> strides{1, 1}, dilation{1, 1};
  std::vector<bool> auto_padding{false, false};
  size_t groups = 1;
};

std::vector<Case> cases() {
  return {
      {"conv", {3, 9, 8}, {4, 3, 3, 2}, {2, 1}, {1, 1}, {true, true}},
      {"conv", {4, 10, 7}, {6, 2, 4, 3}, {1, 2}, {2, 1}, {true, false}, 2},
      {"conv", {1, 28, 28}, {8, 1, 5, 5}, {1, 1}, {1, 1}, {true, true}},
      {"max", {3, 11, 11}, {3, 3}, {2, 2}},
      {"max", {2, 8, 7}, {3, 2}, {2, 1}, {1, 1}, {true, true}},
      {"average", {2, 9, 6}, {4, 3}, {2, 2}, {1, 1}, {true, true}},
  };
}

// Loom's results of one case, to compare once PyTorch has run.
struct Results {
  std::vector<double> y, dx, dw;
};

// Builds case c in Loom, computes its results and writes its inputs into folder d.
Results prepare(const Case& c, const std::string& d) {
  constexpr size_t kBatch = 3;
  Variable x = input_variable(c.x, {.name = "x"});
  const bool conv = c.op == "conv";
  const NDShape window = conv ? c.w_or_window.sub_shape(2) : c.w_or_window;
  Parameter W = parameter(random_array(conv ? c.w_or_window : NDShape{1}, DataType::Float32, 1));
  Function f = conv ? convolution(W, x,
                                  {.strides = c.strides,
                                   .auto_padding = c.auto_padding,
                                   .dilation = c.dilation,
                                   .groups = c.groups})
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
  const Value xv = random_batch(c.x, kBatch, DataType::Float32, 2);
  // weighted_output's weights, the same for every sample, are the output gradient.
  const auto weights =
      random_array(f.output().shape(), DataType::Float32, 7, 0.5, 1.5).to_vector<double>();
  std::vector<double> dy;
  for (size_t b = 0; b < kBatch; ++b) dy.insert(dy.end(), weights.begin(), weights.end());
  const ValueMap grads = weighted_output(f).grad(
      {{x, xv}}, conv ? std::vector<Variable>{x, W} : std::vector<Variable>{x});
  Results r{f.eval_one({{x, xv}}).data().to_vector<double>(),
            grads.at(x).data().to_vector<double>(),
            conv ? grads.at(W).data().to_vector<double>() : std::vector<double>{}};
  write_floats(d + "/x.bin", xv.data().to_vector<double>());
  write_floats(d + "/dy.bin", dy);
  if (conv) write_floats(d + "/w.bin", W.value().to_vector<double>());
  std::ofstream(d + "/case.txt") << "op=" << c.op << "\nx=" << kBatch << "," << join(c.x.dims())
                                 << "\nw=" << join(c.w_or_window.dims())
                                 << "\nwindow=" << join(window.dims())
                                 << "\nstride=" << join(c.strides)
                                 << "\ndilation=" << join(c.dilation) << "\ngroups=" << c.groups
                                 << "\npads=" << join(pads) << "\n";
  return r;
}

TEST(TorchCrossCheck, ConvolutionAndPoolingMatchPyTorch) {
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
    if (c.op == "conv")
      expect_all_near(r.dw, read_floats(d + "/dw.bin", r.dw.size()), 1e-4, "kernel gradient");
  }
}

}  // namespace
}  // namespace loom
