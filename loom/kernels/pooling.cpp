#include "loom/kernels/pooling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <immintrin.h>

#include "loom/core/error.h"
#include "loom/kernels/cpu_isa.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/onednn.h"
#include "loom/kernels/window.h"

namespace loom::kernels {

namespace {

// ---- Reference loops (double, and float where oneDNN cannot run) ----

// The input positions [begin, end) of output position o's window along axis x that lie inside
// the input (pooling has no dilation).
struct InputRange {
  size_t begin, end;
};
InputRange window_inside(const SpatialAxis& x, size_t o) {
  const long first = long(o * x.stride) - x.pad_lower;
  const long begin = std::max(first, 0L), end = std::min(first + long(x.kernel), long(x.input));
  return {size_t(begin), size_t(std::max(begin, end))};
}

// Per output element of one channel plane, the input offset of its window's maximum (the first
// of equal maxima in row-major order, as in oneDNN and CNTK; NaN is passed over unless first),
// or kNoInput for a window entirely in the padding. The window's bounds are computed once and
// the best value kept in a register from the window's first element on, so that the loop is one
// comparison and compiles to selects (a test per tap of the bounds and of "none yet" made
// branches that the data mispredicted: Unpooling at 0.78-0.92x PyTorch's speed).
template <typename T>
void plane_argmax(const std::array<SpatialAxis, 3>& a, const T* xp, ArgMax* where) {
  const size_t in_h = a[1].input, in_w = a[2].input;
  for (size_t od = 0, o = 0; od < a[0].output; ++od) {
    const InputRange d = window_inside(a[0], od);
    for (size_t oh = 0; oh < a[1].output; ++oh) {
      const InputRange h = window_inside(a[1], oh);
      for (size_t ow = 0; ow < a[2].output; ++ow, ++o) {
        const InputRange w = window_inside(a[2], ow);
        if (d.begin == d.end || h.begin == h.end || w.begin == w.end) {
          where[o] = kNoInput;
          continue;
        }
        ArgMax best = ArgMax((d.begin * in_h + h.begin) * in_w + w.begin);
        T best_value = xp[best];
        for (size_t id = d.begin; id < d.end; ++id)
          for (size_t ih = h.begin; ih < h.end; ++ih)
            for (size_t iw = w.begin; iw < w.end; ++iw) {
              const size_t i = (id * in_h + ih) * in_w + iw;
              const bool take = xp[i] > best_value;
              best = take ? ArgMax(i) : best;
              best_value = take ? xp[i] : best_value;
            }
        where[o] = best;
      }
    }
  }
}

template <typename T>
void ref_forward(const PoolShape& s, PoolKind kind, const T* x, T* y, void* workspace) {
  const auto a = detail::axes3(s.axes);
  const size_t in_sp = detail::spatial(s.axes, &SpatialAxis::input),
               out_sp = detail::spatial(s.axes, &SpatialAxis::output),
               window = detail::spatial(s.axes, &SpatialAxis::kernel);
  const size_t planes = s.batch * s.channels;
  detail::parallel_for(planes, s.output_size() * window, [&](size_t b, size_t e) {
    std::vector<ArgMax> where(out_sp);
    std::vector<size_t> count(out_sp);
    for (size_t p = b; p < e; ++p) {
      const T* xp = x + p * in_sp;
      T* yp = y + p * out_sp;
      std::fill(count.begin(), count.end(), 0);
      if (kind == PoolKind::Max) {
        plane_argmax(a, xp, where.data());
        // A window entirely in the padding has no maximum; it gives 0.
        for (size_t o = 0; o < out_sp; ++o) yp[o] = where[o] == kNoInput ? T(0) : xp[where[o]];
        if (workspace)
          std::copy(where.begin(), where.end(), static_cast<ArgMax*>(workspace) + p * out_sp);
      } else {
        std::fill(yp, yp + out_sp, T(0));
        detail::for_each_tap(a, [&](size_t o, size_t i, size_t) { yp[o] += xp[i], ++count[o]; });
        for (size_t o = 0; o < out_sp; ++o) {
          const size_t n = kind == PoolKind::AverageIncludePad ? window : count[o];
          if (n) yp[o] /= T(n);
        }
      }
    }
  });
}

template <typename T>
void ref_backward(const PoolShape& s, PoolKind kind, const T* dy, const void* workspace, T* dx,
                  bool accumulate) {
  const auto a = detail::axes3(s.axes);
  const size_t in_sp = detail::spatial(s.axes, &SpatialAxis::input),
               out_sp = detail::spatial(s.axes, &SpatialAxis::output),
               window = detail::spatial(s.axes, &SpatialAxis::kernel);
  if (!accumulate) std::fill(dx, dx + s.input_size(), T(0));
  const size_t planes = s.batch * s.channels;
  detail::parallel_for(planes, s.output_size() * window, [&](size_t b, size_t e) {
    std::vector<size_t> count(out_sp);
    for (size_t p = b; p < e; ++p) {
      const T* dyp = dy + p * out_sp;
      T* dxp = dx + p * in_sp;
      if (kind == PoolKind::Max) {
        const ArgMax* where = static_cast<const ArgMax*>(workspace) + p * out_sp;
        for (size_t o = 0; o < out_sp; ++o)
          if (where[o] != kNoInput) dxp[where[o]] += dyp[o];
        continue;
      }
      std::fill(count.begin(), count.end(), 0);
      if (kind == PoolKind::Average)
        detail::for_each_tap(a, [&](size_t o, size_t, size_t) { ++count[o]; });
      detail::for_each_tap(a, [&](size_t o, size_t i, size_t) {
        dxp[i] += dyp[o] / T(kind == PoolKind::AverageIncludePad ? window : count[o]);
      });
    }
  });
}

// ---- Max pooling in the blocked layout (float) ----
// oneDNN's max pooling in training ran 4x below the memory's speed (seed 002's first pooling at
// minibatch 256: 2.1 ms forward, 2.3 backward; bench/README.md), so Loom pools blocked activations
// itself in training (its inference primitive keeps up with the memory). Each block of
// kChannelBlock channels of a sample is a [spatial..., 16] array; the forward takes each
// output's 16 maxima with one vector per tap, and the workspace keeps per output element the
// window's tap where its maximum came from. The backward gathers: each input element sums the
// gradients of the outputs whose windows cover it and chose it, in output order (the
// reference's order), writing dx once. Shapes with a window entirely in the padding never come
// here (see has_empty_window).

using Tap = uint8_t;  // windows of at most 256 taps
constexpr size_t kLanes = kChannelBlock;

// Whether max pooling in training runs Loom's kernel: activations held blocked, small windows.
bool pools_blocked(const PoolShape& s, PoolKind kind) {
  return kind == PoolKind::Max && s.input_blocked && s.output_blocked &&
         (s.layout == ConvLayout::Auto || s.layout == ConvLayout::Blocked) &&
         detail::spatial(s.axes, &SpatialAxis::kernel) <=
             size_t(std::numeric_limits<Tap>::max()) + 1;
}

// [first, last): along one axis, a window's taps or an input position's outputs.
struct Range {
  size_t first, last;
};

// The taps of output o's window along one axis that fall inside the input.
Range taps_of(const SpatialAxis& a, size_t o) {
  const long start = long(o * a.stride) - a.pad_lower;  // input position of tap 0
  const long first = std::max(0L, -start), last = std::min(long(a.kernel), long(a.input) - start);
  return {size_t(first), size_t(std::max(first, last))};
}

// The outputs along one axis whose windows cover input position i (the tap of i in output o's
// window is i + pad_lower - o * stride).
Range covering(const SpatialAxis& a, size_t i) {
  const long shifted = long(i) + a.pad_lower;  // i's position in the padded input
  const long lo = shifted - long(a.kernel) + 1, stride = long(a.stride);
  const long first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  const long last = std::min(shifted < 0 ? -1 : shifted / stride, long(a.output) - 1) + 1;
  return {size_t(first), size_t(std::max(first, last))};
}

// The two kernels are compiled twice (pooling_blocked.inc): for the build's instruction set,
// a block's 16 lanes in two vectors of 8 (one AVX2 register each with -march=x86-64-v3; a
// 64-byte vector would be taken apart lane by lane there), and for AVX-512, in one vector of 16,
// which made seed 002's convnet train 5-13 % faster (bench/README.md). Each copy widens a
// vector's taps to 32-bit lanes with its own instruction (GCC 12 widens a vector of bytes lane
// by lane).
namespace baseline {
constexpr size_t kVector = 8;
#include "loom/kernels/pooling_blocked.inc"
void widen(Ints& v, const Tap* p) {
#ifdef __AVX2__
  v = Ints(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
  for (size_t l = 0; l < kVector; ++l) v[l] = p[l];
#endif
}
}  // namespace baseline

LOOM_AVX512_BEGIN
namespace avx512 {
constexpr size_t kVector = 16;
#include "loom/kernels/pooling_blocked.inc"
// (The masked form: GCC 12 warns that the plain one's undefined source may be uninitialized.)
void widen(Ints& v, const Tap* p) {
  v = Ints(
      _mm512_maskz_cvtepu8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
}  // namespace avx512
LOOM_AVX512_END

// ---- oneDNN (float) ----

namespace dnn = onednn;
using dnnl::memory;
using tag = memory::format_tag;

struct PoolPrimitives {
  dnnl::pooling_forward::primitive_desc train_pd, infer_pd;
  dnnl::pooling_forward train, infer;
  dnnl::pooling_backward::primitive_desc bwd_pd;
  dnnl::pooling_backward bwd;
  memory::desc src, dst;  // Loom's layouts
};

dnnl::algorithm algorithm(PoolKind kind) {
  switch (kind) {
    case PoolKind::Max:
      return dnnl::algorithm::pooling_max;
    case PoolKind::Average:
      return dnnl::algorithm::pooling_avg_exclude_padding;
    case PoolKind::AverageIncludePad:
      break;
  }
  return dnnl::algorithm::pooling_avg_include_padding;
}

PoolPrimitives make_primitives(const PoolShape& s, PoolKind kind) {
  const auto i = [](size_t v) { return memory::dim(v); };
  const size_t r = s.axes.size();
  memory::dims src{i(s.batch), i(s.channels)}, dst{i(s.batch), i(s.channels)};
  memory::dims strides, kernel, pad_l, pad_r;
  for (const SpatialAxis& a : s.axes) {
    src.push_back(i(a.input));
    dst.push_back(i(a.output));
    kernel.push_back(i(a.kernel));
    strides.push_back(i(a.stride));
    pad_l.push_back(a.pad_lower);
    pad_r.push_back(a.pad_upper);
  }
  // Pooling takes no `any` source: the blocked layout is named (16 channels: AVX-512).
  static constexpr std::array<tag, 3> blocked{tag::nCw16c, tag::nChw16c, tag::nCdhw16c},
      channels_last{tag::nwc, tag::nhwc, tag::ndhwc};
  // Auto is the layout of Loom's input (see ConvLayout); an output held otherwise is reordered.
  const ConvLayout layout = s.layout != ConvLayout::Auto ? s.layout
                            : s.input_blocked            ? ConvLayout::Blocked
                                                         : ConvLayout::Plain;
  const tag act = layout == ConvLayout::Blocked        ? blocked[r - 1]
                  : layout == ConvLayout::ChannelsLast ? channels_last[r - 1]
                                                       : dnn::plain_tag(r + 2);
  const memory::desc src_md(src, memory::data_type::f32, act),
      dst_md(dst, memory::data_type::f32, act);
  const dnnl::algorithm alg = algorithm(kind);
  const dnnl::engine& eng = dnn::engine();
  dnnl::pooling_forward::primitive_desc train_pd(
      {dnnl::prop_kind::forward_training, alg, src_md, dst_md, strides, kernel, pad_l, pad_r}, eng);
  dnnl::pooling_forward::primitive_desc infer_pd(
      {dnnl::prop_kind::forward_inference, alg, src_md, dst_md, strides, kernel, pad_l, pad_r},
      eng);
  dnnl::pooling_backward::primitive_desc bwd_pd(
      {alg, src_md, dst_md, strides, kernel, pad_l, pad_r}, eng, train_pd);
  return {train_pd,
          infer_pd,
          dnnl::pooling_forward(train_pd),
          dnnl::pooling_forward(infer_pd),
          bwd_pd,
          dnnl::pooling_backward(bwd_pd),
          dnn::activation_desc(src, s.input_blocked),
          dnn::activation_desc(dst, s.output_blocked)};
}

PoolPrimitives& primitives(const PoolShape& s, PoolKind kind) {
  memory::dims k{memory::dim(s.batch),         memory::dim(s.channels),       memory::dim(s.layout),
                 memory::dim(s.input_blocked), memory::dim(s.output_blocked), memory::dim(kind)};
  for (const SpatialAxis& a : s.axes)
    k.insert(k.end(), {memory::dim(a.input), memory::dim(a.kernel), memory::dim(a.output),
                       memory::dim(a.stride), a.pad_lower, a.pad_upper});
  return dnn::cached<PoolPrimitives>(dnn::key("pool", {k}),
                                     [&] { return make_primitives(s, kind); });
}

}  // namespace

size_t PoolShape::input_size() const {
  return batch * channels * detail::spatial(axes, &SpatialAxis::input);
}
size_t PoolShape::output_size() const {
  return batch * channels * detail::spatial(axes, &SpatialAxis::output);
}

void check_pool_shape(const PoolShape& s, const char* what) {
  for (const SpatialAxis& a : s.axes)
    LOOM_CHECK(a.dilation == 1, ShapeError, what, ": pooling windows are not dilated");
  check_conv_shape({s.batch, s.channels, s.channels, 1, s.axes}, what);
  LOOM_CHECK(detail::spatial(s.axes, &SpatialAxis::input) <= kNoInput, ShapeError, what,
             ": more than 2^32 - 1 elements per channel");
}

// Whether some window lies entirely in the padding. Its maximum is 0 in Loom (the reference
// loops), where oneDNN gives -FLT_MAX, so such shapes run the reference loops.
static bool has_empty_window(const PoolShape& s) {
  return std::any_of(s.axes.begin(), s.axes.end(), [](const SpatialAxis& a) {
    return a.pad_lower >= long(a.kernel) ||
           long((a.output - 1) * a.stride) - a.pad_lower >= long(a.input);
  });
}

bool can_block(const PoolShape& s) {
  return detail::onednn_runs(s.axes) && !has_empty_window(s) && s.channels % kChannelBlock == 0;
}

// The float kernels run the reference loops where oneDNN cannot, on row-major data only.
static bool use_reference(const PoolShape& s) {
  if (detail::onednn_runs(s.axes) && !has_empty_window(s)) return false;
  LOOM_CHECK(!s.input_blocked && !s.output_blocked, ArgumentError,
             "pooling: blocked activations for a shape oneDNN does not run (see can_block)");
  return true;
}

template <>
size_t pooling_workspace_bytes<double>(const PoolShape& s, PoolKind kind) {
  return kind == PoolKind::Max ? s.output_size() * sizeof(ArgMax) : 0;
}
template <>
size_t pooling_workspace_bytes<float>(const PoolShape& s, PoolKind kind) {
  if (kind != PoolKind::Max) return 0;
  if (use_reference(s)) return s.output_size() * sizeof(ArgMax);
  if (pools_blocked(s, kind)) return s.output_size() * sizeof(Tap);
  return primitives(s, kind).train_pd.workspace_desc().get_size();
}

template <>
void pooling_forward<double>(const PoolShape& s, PoolKind kind, const double* x, double* y,
                             void* workspace) {
  ref_forward(s, kind, x, y, workspace);
}
template <>
void pooling_backward<double>(const PoolShape& s, PoolKind kind, const double* dy,
                              const void* workspace, double* dx, bool accumulate) {
  ref_backward(s, kind, dy, workspace, dx, accumulate);
}

template <>
void pooling_forward<float>(const PoolShape& s, PoolKind kind, const float* x, float* y,
                            void* workspace) {
  if (use_reference(s)) return ref_forward(s, kind, x, y, workspace);
  // Inference (no workspace) runs oneDNN's primitive, which keeps up with the memory.
  if (workspace && pools_blocked(s, kind))
    return use_avx512() ? avx512::blocked_max_forward(s, x, y, static_cast<Tap*>(workspace))
                        : baseline::blocked_max_forward(s, x, y, static_cast<Tap*>(workspace));
  PoolPrimitives& p = primitives(s, kind);
  // Average pooling keeps nothing for backward, so it always runs the inference primitive.
  const bool train = workspace && kind == PoolKind::Max;
  const auto& pd = train ? p.train_pd : p.infer_pd;
  memory src = dnn::to_layout(p.src, x, pd.src_desc(), 0);
  dnn::Output dst(pd.dst_desc(), p.dst, y, false, 1);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst.mem()}};
  if (train) args.emplace(DNNL_ARG_WORKSPACE, dnn::wrap(pd.workspace_desc(), workspace));
  dnn::execute(train ? p.train : p.infer, args, "pooling forward");
  dst.finish();
}

template <>
void pooling_backward<float>(const PoolShape& s, PoolKind kind, const float* dy,
                             const void* workspace, float* dx, bool accumulate) {
  if (use_reference(s)) return ref_backward(s, kind, dy, workspace, dx, accumulate);
  if (pools_blocked(s, kind))
    return use_avx512() ? avx512::blocked_max_backward(s, dy, static_cast<const Tap*>(workspace),
                                                       dx, accumulate)
                        : baseline::blocked_max_backward(s, dy, static_cast<const Tap*>(workspace),
                                                         dx, accumulate);
  PoolPrimitives& p = primitives(s, kind);
  memory diff_dst = dnn::to_layout(p.dst, dy, p.bwd_pd.diff_dst_desc(), 0);
  dnn::Output diff_src(p.bwd_pd.diff_src_desc(), p.src, dx, accumulate, 1);
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, diff_dst},
                                       {DNNL_ARG_DIFF_SRC, diff_src.mem()}};
  if (kind == PoolKind::Max)
    args.emplace(DNNL_ARG_WORKSPACE, dnn::wrap(p.train_pd.workspace_desc(), workspace));
  dnn::execute(p.bwd, args, "pooling backward");
  diff_src.finish();
}

// ---- Max unpooling ----

template <typename T>
void max_unpooling_forward(const PoolShape& s, const T* x, const T* pooling_input, T* y,
                           ArgMax* where) {
  const auto a = detail::axes3(s.axes);
  const size_t in_sp = detail::spatial(s.axes, &SpatialAxis::input),
               out_sp = detail::spatial(s.axes, &SpatialAxis::output),
               window = detail::spatial(s.axes, &SpatialAxis::kernel);
  detail::parallel_for(s.batch * s.channels, s.output_size() * window, [&](size_t b, size_t e) {
    std::vector<bool> taken(in_sp);
    for (size_t p = b; p < e; ++p) {
      ArgMax* wp = where + p * out_sp;
      T* yp = y + p * in_sp;
      plane_argmax(a, pooling_input + p * in_sp, wp);
      std::fill(yp, yp + in_sp, T(0));
      std::fill(taken.begin(), taken.end(), false);
      // The later window's value stays: walk back, and a position taken already is lost.
      for (size_t o = out_sp; o-- > 0;) {
        if (wp[o] == kNoInput) continue;
        if (taken[wp[o]]) {
          wp[o] = kNoInput;
          continue;
        }
        taken[wp[o]] = true;
        yp[wp[o]] = x[p * out_sp + o];
      }
    }
  });
}

template <typename T>
void max_unpooling_backward(const PoolShape& s, const T* dy, const ArgMax* where, T* dx,
                            bool accumulate) {
  const size_t in_sp = detail::spatial(s.axes, &SpatialAxis::input),
               out_sp = detail::spatial(s.axes, &SpatialAxis::output);
  detail::parallel_for(s.batch * s.channels, s.output_size(), [&](size_t b, size_t e) {
    for (size_t p = b; p < e; ++p)
      for (size_t o = p * out_sp; o < (p + 1) * out_sp; ++o) {
        const T g = where[o] == kNoInput ? T(0) : dy[p * in_sp + where[o]];
        dx[o] = accumulate ? dx[o] + g : g;
      }
  });
}

// ---- ROI pooling ----

namespace {

// The cells of one region along one axis: cell k covers [first(k), last(k)) of the map's
// extent, CNTK's (and Fast R-CNN's) rounding.
struct RoiAxis {
  long begin;   // the region's first position in the map
  double cell;  // the extent of a cell
  size_t extent;

  RoiAxis(double from, double to, double scale, size_t cells, size_t extent)
      : begin(std::lround(from * scale)), extent(extent) {
    const long end = std::lround(to * scale);
    cell = double(std::max(end - begin + 1, 1L)) / double(cells);
  }
  size_t clip(long v) const { return size_t(std::clamp(v + begin, 0L, long(extent))); }
  size_t first(size_t k) const { return clip(long(std::floor(double(k) * cell))); }
  size_t last(size_t k) const { return clip(long(std::ceil(double(k + 1) * cell))); }
};

}  // namespace

template <typename T>
void roi_pooling_forward(const RoiPoolShape& s, const T* x, const T* rois, T* y, ArgMax* where) {
  const size_t plane = s.height * s.width, cells = s.pooled_height * s.pooled_width;
  detail::parallel_for(s.batch * s.rois, s.output_size() * 4, [&](size_t b, size_t e) {
    // Each cell's rows [h0, h1) and columns [w0, w1), computed once a region (not per step of
    // every channel's loops), and the best value kept in a register rather than read again
    // through its index, updated by selects (ROIPooling was 0.67-0.81x PyTorch's speed).
    std::vector<size_t> h0(s.pooled_height), h1(s.pooled_height), w0(s.pooled_width),
        w1(s.pooled_width);
    for (size_t r = b; r < e; ++r) {
      const T* roi = rois + r * 4;
      const T* xn = x + r / s.rois * s.channels * plane;
      const RoiAxis rows{double(roi[1]), double(roi[3]), s.spatial_scale, s.pooled_height,
                         s.height},
          cols{double(roi[0]), double(roi[2]), s.spatial_scale, s.pooled_width, s.width};
      for (size_t ph = 0; ph < s.pooled_height; ++ph) {
        h0[ph] = rows.first(ph);
        h1[ph] = rows.last(ph);
      }
      for (size_t pw = 0; pw < s.pooled_width; ++pw) {
        w0[pw] = cols.first(pw);
        w1[pw] = cols.last(pw);
      }
      for (size_t c = 0; c < s.channels; ++c)
        for (size_t ph = 0; ph < s.pooled_height; ++ph)
          for (size_t pw = 0; pw < s.pooled_width; ++pw) {
            const size_t o = (r * s.channels + c) * cells + ph * s.pooled_width + pw;
            if (h0[ph] == h1[ph] || w0[pw] == w1[pw]) {
              where[o] = kNoInput;
              y[o] = T(0);
              continue;
            }
            const T* xp = xn + c * plane;
            // The cell's first element, then each larger one: a comparison with no other
            // condition, which compiles to selects (with a test of "none yet" it compiled to a
            // branch that the data mispredicted: 0.41x PyTorch's speed).
            ArgMax best = ArgMax(h0[ph] * s.width + w0[pw]);
            T best_value = xp[best];
            for (size_t h = h0[ph]; h < h1[ph]; ++h)
              for (size_t w = w0[pw]; w < w1[pw]; ++w) {
                const T v = xp[h * s.width + w];
                const bool take = v > best_value;
                best = take ? ArgMax(h * s.width + w) : best;
                best_value = take ? v : best_value;
              }
            where[o] = best;
            y[o] = best_value;
          }
    }
  });
}

template <typename T>
void roi_pooling_backward(const RoiPoolShape& s, const T* dy, const ArgMax* where, T* dx,
                          bool accumulate) {
  if (!accumulate) std::fill(dx, dx + s.input_size(), T(0));
  const size_t plane = s.height * s.width, cells = s.pooled_height * s.pooled_width;
  // One image per task: its regions may overlap.
  detail::parallel_for(s.batch, s.output_size(), [&](size_t b, size_t e) {
    for (size_t n = b; n < e; ++n)
      for (size_t r = n * s.rois; r < (n + 1) * s.rois; ++r)
        for (size_t c = 0; c < s.channels; ++c)
          for (size_t o = (r * s.channels + c) * cells; o < (r * s.channels + c + 1) * cells; ++o)
            if (where[o] != kNoInput) dx[(n * s.channels + c) * plane + where[o]] += dy[o];
  });
}

#define LOOM_POOLING_INSTANTIATE(T)                                                             \
  template void max_unpooling_forward<T>(const PoolShape&, const T*, const T*, T*, ArgMax*);    \
  template void max_unpooling_backward<T>(const PoolShape&, const T*, const ArgMax*, T*, bool); \
  template void roi_pooling_forward<T>(const RoiPoolShape&, const T*, const T*, T*, ArgMax*);   \
  template void roi_pooling_backward<T>(const RoiPoolShape&, const T*, const ArgMax*, T*, bool);
LOOM_POOLING_INSTANTIATE(float)
LOOM_POOLING_INSTANTIATE(double)
#undef LOOM_POOLING_INSTANTIATE

}  // namespace loom::kernels
