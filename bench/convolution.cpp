// Per-layer speed of seed 002's convnet kernels at minibatch 256 (float32, oneDNN): the three
// convolutions (forward, gradient of the input, gradient of the kernel) and the two max
// poolings (forward with workspace, backward), for each activation layout the kernels can
// compute in (kernels::ConvLayout: NCHW directly, oneDNN's blocked nChw16c or NHWC, the last
// two with reorders from and to Loom's NCHW around every call). Also times those reorders
// alone, so "blocked" splits into compute and conversion. Also times batch normalization (not
// in seed 002's net) in training, of conv1's output [N, 32, 28, 28] and per element of
// [N, 1024], in either layout Loom may hold the activation. Prints ms per call (best of
// --repeats, each the mean of enough calls for ~0.2 s) and GFLOP/s (2 FLOP per MAC).
// --cpu-time measures the process's CPU time instead of wall time: on a loaded machine, with
// --threads 1, it still compares layouts fairly (it excludes time the process waits for a core).
// Variants of conv1 with 3 to 16 input channels show where bf16 starts to pay. --bf16 runs the
// convolutions in bf16 mixed precision (ConvShape::bf16: bf16 operands, float32 results; AMX
// where the CPU has it, in NHWC, which is what the auto layout gives bf16), float32 below
// kernels::kMinBf16Channels input channels (conv1).
//
//   bench_convolution [--batch N] [--threads N] [--repeats N] [--cpu-time] [--bf16]
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "loom/core/threads.h"
#include "loom/kernels/batch_norm.h"
#include "loom/kernels/convolution.h"
#include "loom/kernels/onednn.h"
#include "loom/kernels/pooling.h"

using namespace loom;
using namespace loom::kernels;

namespace {

int repeats = 5;
bool cpu_time = false;

// Seconds of wall time, or of the process's CPU time with --cpu-time.
double now() {
  if (!cpu_time)
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Best over repeats of the mean ms per call.
double time_ms(const std::function<void()>& f) {
  f();  // creates the primitives
  const double t0 = now();
  f();
  const double once = now() - t0;
  const int calls = std::max(1, int(0.2 / std::max(once, 1e-6)));
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double start = now();
    for (int i = 0; i < calls; ++i) f();
    best = std::min(best, (now() - start) * 1e3 / calls);
  }
  return best;
}

SpatialAxis axis(size_t in, size_t k, size_t stride, long pad) {
  return {in, k, (in + 2 * pad - k) / stride + 1, stride, 1, pad, pad};
}

const char* layout_name(ConvLayout l) {
  static const char* names[] = {"auto", "nchw", "blocked", "nhwc"};
  return names[int(l)];
}

// ms of a reorder of an [n, c, h, w] tensor from NCHW to `to` and back.
double reorder_ms(size_t n, size_t c, size_t h, size_t w, dnnl::memory::format_tag to) {
  namespace dnn = onednn;
  const dnn::dims d{long(n), long(c), long(h), long(w)};
  const dnnl::memory::desc plain = dnn::plain_desc(d), other(d, dnnl::memory::data_type::f32, to);
  std::vector<float> a(n * c * h * w, 1.0f), b(other.get_size() / sizeof(float));
  return time_ms([&] {
    dnn::reorder(dnn::wrap(plain, a.data()), dnn::wrap(other, b.data()));
    dnn::reorder(dnn::wrap(other, b.data()), dnn::wrap(plain, a.data()));
  });
}

}  // namespace

int main(int argc, char** argv) {
  size_t batch = 256;
  int threads = 2;
  bool bf16 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cpu-time") {
      cpu_time = true;
    } else if (a == "--bf16") {
      bf16 = true;
    } else if (i + 1 < argc && (a == "--batch" || a == "--threads" || a == "--repeats")) {
      const int v = std::atoi(argv[++i]);
      if (a == "--batch") batch = size_t(v);
      if (a == "--threads") threads = v;
      if (a == "--repeats") repeats = v;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--batch N] [--threads N] [--repeats N] [--cpu-time] [--bf16]\n",
                   argv[0]);
      return 2;
    }
  }
  set_max_num_cpu_threads(threads);
  std::printf("seed 002 convnet layers, minibatch %zu, %d thread(s), best of %d, %s time%s\n",
              batch, threads, repeats, cpu_time ? "CPU" : "wall",
              bf16 ? ", convolutions in bf16 mixed precision" : "");

  struct Conv {
    const char* name;
    ConvShape s;
    bool variant = false;  // not in seed 002's net: timed in the auto layout only, not summed
  };
  const std::vector<Conv> convs = {
      {"conv1 5x5 1->32 28x28 pad2", {batch, 1, 32, 1, {axis(28, 5, 1, 2), axis(28, 5, 1, 2)}}},
      {"conv2 3x3 32->48 13->11", {batch, 32, 48, 1, {axis(13, 3, 1, 0), axis(13, 3, 1, 0)}}},
      {"conv3 3x3 48->64 5->3", {batch, 48, 64, 1, {axis(5, 3, 1, 0), axis(5, 3, 1, 0)}}},
      // conv1 with more input channels: where bf16 starts to pay (kernels::kMinBf16Channels)
      {"conv1 variant 3->32", {batch, 3, 32, 1, {axis(28, 5, 1, 2), axis(28, 5, 1, 2)}}, true},
      {"conv1 variant 4->32", {batch, 4, 32, 1, {axis(28, 5, 1, 2), axis(28, 5, 1, 2)}}, true},
      {"conv1 variant 8->32", {batch, 8, 32, 1, {axis(28, 5, 1, 2), axis(28, 5, 1, 2)}}, true},
      {"conv1 variant 16->32", {batch, 16, 32, 1, {axis(28, 5, 1, 2), axis(28, 5, 1, 2)}}, true},
  };
  struct Pool {
    const char* name;
    PoolShape s;
  };
  const std::vector<Pool> pools = {
      {"pool1 3x3/2 32ch 28->13", {batch, 32, {axis(28, 3, 2, 0), axis(28, 3, 2, 0)}}},
      {"pool2 3x3/2 48ch 11->5", {batch, 48, {axis(11, 3, 2, 0), axis(11, 3, 2, 0)}}},
  };

  constexpr size_t kLayouts = 4;
  double total[kLayouts] = {};
  const ConvLayout layouts[] = {ConvLayout::Auto, ConvLayout::Plain, ConvLayout::Blocked,
                                ConvLayout::ChannelsLast};
  std::printf("\n%-28s %-8s %9s %9s %9s   GFLOP/s fwd / bwd-data / bwd-weights\n", "layer",
              "layout", "fwd ms", "bwd-d ms", "bwd-w ms");
  for (const Conv& c : convs) {
    double macs = double(c.s.output_size()) * double(c.s.in_channels / c.s.groups);
    for (const SpatialAxis& a : c.s.axes) macs *= double(a.kernel);
    const double gflop = 2 * macs / 1e9;
    std::vector<float> x(c.s.input_size(), 0.5f), w(c.s.weight_size(), 0.1f), y(c.s.output_size()),
        dy(c.s.output_size(), 0.2f), dx(c.s.input_size()), dw(c.s.weight_size());
    for (size_t li = 0; li < kLayouts; ++li) {
      if ((bf16 || c.variant) && layouts[li] != ConvLayout::Auto) continue;  // bf16: NHWC
      ConvShape s = c.s;
      s.layout = layouts[li];
      s.bf16 = bf16;
      const double f =
          time_ms([&] { convolution_forward<float>(s, x.data(), w.data(), nullptr, y.data()); });
      const double bd = time_ms(
          [&] { convolution_backward_data<float>(s, dy.data(), w.data(), dx.data(), false); });
      const double bw = time_ms([&] {
        convolution_backward_weights<float>(s, x.data(), dy.data(), dw.data(), nullptr, false);
      });
      if (!c.variant) total[li] += f + bd + bw;
      std::printf("%-28s %-8s %9.3f %9.3f %9.3f   %6.1f / %6.1f / %6.1f\n", c.name,
                  layout_name(layouts[li]), f, bd, bw, gflop / f * 1e3, gflop / bd * 1e3,
                  gflop / bw * 1e3);
    }
  }
  std::printf("\n%-28s %-8s %9s %9s\n", "layer", "layout", "fwd ms", "bwd ms");
  for (const Pool& p : pools) {
    std::vector<float> x(p.s.input_size(), 0.5f), y(p.s.output_size()), dy(p.s.output_size(), 0.2f),
        dx(p.s.input_size());
    for (size_t li = 0; li < kLayouts; ++li) {
      PoolShape s = p.s;
      s.layout = layouts[li];
      std::vector<char> ws(pooling_workspace_bytes<float>(s, PoolKind::Max));
      const double f =
          time_ms([&] { pooling_forward<float>(s, PoolKind::Max, x.data(), y.data(), ws.data()); });
      const double b = time_ms([&] {
        pooling_backward<float>(s, PoolKind::Max, dy.data(), ws.data(), dx.data(), false);
      });
      total[li] += f + b;
      std::printf("%-28s %-8s %9.3f %9.3f\n", p.name, layout_name(layouts[li]), f, b);
    }
  }
  // The first layer's input gradient is not needed in training (the input is data).
  std::printf("\nsum of the calls of one training step (ms; conv1 bwd-data included):");
  for (size_t li = 0; li < kLayouts; ++li)
    std::printf(" %s %.2f", layout_name(layouts[li]), total[li]);
  std::printf("\n");

  // What the blocked layout pays for conversions: NCHW -> nChw16c -> NCHW of each activation.
  using tag = dnnl::memory::format_tag;
  std::printf("\nreorder NCHW -> nChw16c -> NCHW (ms): ");
  const size_t acts[][3] = {{32, 28, 28}, {32, 13, 13}, {48, 11, 11}, {48, 5, 5}, {64, 3, 3}};
  double reorders = 0;
  for (const auto& a : acts) {
    const double ms = reorder_ms(batch, a[0], a[1], a[2], tag::nChw16c);
    reorders += ms;
    std::printf("[%zu,%zu,%zu] %.3f  ", a[0], a[1], a[2], ms);
  }
  std::printf("\n  one round trip of each activation: %.2f ms\n", reorders);

  // Forward with the minibatch's statistics; backward gives dx, dscale and dbias in one call.
  struct Norm {
    const char* name;
    size_t channels, spatial;
  };
  std::printf("\n%-28s %-8s %9s %9s\n", "layer", "layout", "fwd ms", "bwd ms");
  for (const Norm& n :
       {Norm{"batch norm 32ch 28x28", 32, 28 * 28}, Norm{"batch norm 1024 per element", 1024, 1}}) {
    const size_t C = n.channels;
    std::vector<float> x(batch * C * n.spatial, 0.5f), y(x.size()), dy(x.size(), 0.2f),
        dx(x.size()), scale(C, 1.0f), bias(C, 0.0f), mean(C), var(C), dscale(C), dbias(C);
    for (bool blocked : {false, true}) {
      const BatchNormShape s{batch, C, n.spatial, blocked, blocked};
      const double f = time_ms([&] {
        batch_norm_forward<float>(s, x.data(), scale.data(), bias.data(), 1e-5, true, mean.data(),
                                  var.data(), y.data());
      });
      const double b = time_ms([&] {
        batch_norm_backward<float>(s, x.data(), dy.data(), mean.data(), var.data(), scale.data(),
                                   bias.data(), 1e-5, true, dx.data(), false, dscale.data(),
                                   dbias.data());
      });
      std::printf("%-28s %-8s %9.3f %9.3f\n", n.name, blocked ? "blocked" : "nchw", f, b);
    }
  }
  return 0;
}
