#include "loom/kernels/convolution.h"

#include <algorithm>
#include <array>
#include <optional>
#include <unordered_map>

#include "loom/core/error.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/onednn.h"
#include "loom/kernels/window.h"

namespace loom::kernels {

namespace {

// ---- Reference loops (double, and float where oneDNN cannot run) ----

struct RefDims {
  size_t cg, og, in_sp, out_sp, k_sp;  // channels per group, spatial sizes
};

RefDims ref_dims(const ConvShape& s) {
  return {s.in_channels / s.groups, s.out_channels / s.groups,
          detail::spatial(s.axes, &SpatialAxis::input),
          detail::spatial(s.axes, &SpatialAxis::output),
          detail::spatial(s.axes, &SpatialAxis::kernel)};
}

template <typename T>
void ref_forward(const ConvShape& s, const T* x, const T* w, const T* bias, T* y, bool accumulate) {
  const RefDims d = ref_dims(s);
  const auto a = detail::axes3(s.axes);
  if (!accumulate) std::fill(y, y + s.output_size(), T(0));
  // Each (sample, output channel) plane belongs to one thread.
  const size_t planes = s.batch * s.out_channels;
  detail::parallel_for(planes, s.output_size() * d.cg * d.k_sp, [&](size_t b, size_t e) {
    for (size_t p = b; p < e; ++p) {
      const size_t n = p / s.out_channels, oc = p % s.out_channels, g = oc / d.og;
      T* yp = y + p * d.out_sp;
      if (bias)
        for (size_t o = 0; o < d.out_sp; ++o) yp[o] += bias[oc];
      for (size_t ic = 0; ic < d.cg; ++ic) {
        const T* xp = x + (n * s.in_channels + g * d.cg + ic) * d.in_sp;
        const T* wp = w + (oc * d.cg + ic) * d.k_sp;
        detail::for_each_tap(a, [&](size_t o, size_t i, size_t k) { yp[o] += xp[i] * wp[k]; });
      }
    }
  });
}

template <typename T>
void ref_backward_data(const ConvShape& s, const T* dy, const T* w, T* dx, bool accumulate) {
  const RefDims d = ref_dims(s);
  const auto a = detail::axes3(s.axes);
  if (!accumulate) std::fill(dx, dx + s.input_size(), T(0));
  // Each (sample, input channel) plane belongs to one thread.
  const size_t planes = s.batch * s.in_channels;
  detail::parallel_for(planes, s.output_size() * d.cg * d.k_sp, [&](size_t b, size_t e) {
    for (size_t p = b; p < e; ++p) {
      const size_t n = p / s.in_channels, c = p % s.in_channels, g = c / d.cg, ic = c % d.cg;
      T* dxp = dx + p * d.in_sp;
      for (size_t j = 0; j < d.og; ++j) {
        const size_t oc = g * d.og + j;
        const T* dyp = dy + (n * s.out_channels + oc) * d.out_sp;
        const T* wp = w + (oc * d.cg + ic) * d.k_sp;
        detail::for_each_tap(a, [&](size_t o, size_t i, size_t k) { dxp[i] += dyp[o] * wp[k]; });
      }
    }
  });
}

template <typename T>
void ref_backward_weights(const ConvShape& s, const T* x, const T* dy, T* dw, bool accumulate) {
  const RefDims d = ref_dims(s);
  const auto a = detail::axes3(s.axes);
  if (!accumulate) std::fill(dw, dw + s.weight_size(), T(0));
  // Each (output channel, input channel) filter belongs to one thread.
  const size_t filters = s.out_channels * d.cg;
  detail::parallel_for(filters, s.output_size() * d.cg * d.k_sp, [&](size_t b, size_t e) {
    for (size_t f = b; f < e; ++f) {
      const size_t oc = f / d.cg, ic = f % d.cg, g = oc / d.og;
      T* dwp = dw + f * d.k_sp;
      for (size_t n = 0; n < s.batch; ++n) {
        const T* xp = x + (n * s.in_channels + g * d.cg + ic) * d.in_sp;
        const T* dyp = dy + (n * s.out_channels + oc) * d.out_sp;
        detail::for_each_tap(a, [&](size_t o, size_t i, size_t k) { dwp[k] += xp[i] * dyp[o]; });
      }
    }
  });
}

template <typename T>
void ref_backward_bias(const ConvShape& s, const T* dy, T* db, bool accumulate) {
  const size_t out_sp = detail::spatial(s.axes, &SpatialAxis::output);
  detail::parallel_for(s.out_channels, s.output_size(), [&](size_t b, size_t e) {
    for (size_t oc = b; oc < e; ++oc) {
      T sum = 0;
      for (size_t n = 0; n < s.batch; ++n) {
        const T* dyp = dy + (n * s.out_channels + oc) * out_sp;
        for (size_t o = 0; o < out_sp; ++o) sum += dyp[o];
      }
      db[oc] = accumulate ? db[oc] + sum : sum;
    }
  });
}

// ---- oneDNN (float) ----

namespace dnn = onednn;
using dnnl::memory;
using tag = memory::format_tag;

struct ConvPrimitives {
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_backward_weights bwd_weights;
  memory::desc src, weights, bias, dst;  // Loom's layouts
};

tag activation_tag(ConvLayout layout, size_t spatial_rank) {
  static constexpr tag channels_last[] = {tag::nwc, tag::nhwc, tag::ndhwc};
  switch (layout) {
    case ConvLayout::Blocked:
      return tag::any;
    case ConvLayout::ChannelsLast:
      return channels_last[spatial_rank - 1];
    case ConvLayout::Auto:
    case ConvLayout::Plain:
      break;
  }
  return dnn::plain_tag(spatial_rank + 2);
}

// s as the primitive runs it: ConvLayout::Auto replaced by a layout (see ConvLayout), and bf16
// kept only where it pays (see ConvShape::bf16).
ConvShape resolve(ConvShape s, bool backward_data) {
  if (s.layout == ConvLayout::Auto)
    s.layout =
        backward_data && s.in_channels / s.groups < 16 ? ConvLayout::Plain : ConvLayout::Blocked;
  s.bf16 = s.bf16 && s.in_channels / s.groups >= kMinBf16Channels;
  return s;
}

ConvPrimitives make_primitives(const ConvShape& s) {
  const auto i = [](size_t v) { return memory::dim(v); };
  const size_t r = s.axes.size();
  memory::dims src{i(s.batch), i(s.in_channels)}, dst{i(s.batch), i(s.out_channels)};
  memory::dims w = s.groups > 1 ? memory::dims{i(s.groups), i(s.out_channels / s.groups),
                                               i(s.in_channels / s.groups)}
                                : memory::dims{i(s.out_channels), i(s.in_channels)};
  memory::dims strides, dilates, pad_l, pad_r;
  for (const SpatialAxis& a : s.axes) {
    src.push_back(i(a.input));
    dst.push_back(i(a.output));
    w.push_back(i(a.kernel));
    strides.push_back(i(a.stride));
    dilates.push_back(i(a.dilation) - 1);  // oneDNN counts the gaps
    pad_l.push_back(a.pad_lower);
    pad_r.push_back(a.pad_upper);
  }
  const tag act = activation_tag(s.layout, r);
  // What the primitives read (x, w, dy) is bf16 in bf16 mode; what they write is float32.
  const auto f32 = memory::data_type::f32;
  const auto in_type = s.bf16 ? memory::data_type::bf16 : f32;
  const memory::desc src_md(src, in_type, act), dst_md(dst, f32, act), diff_src_md(src, f32, act),
      diff_dst_md(dst, in_type, act), w_md(w, in_type, tag::any), diff_w_md(w, f32, tag::any),
      b_md = s.bias ? dnn::plain_desc({i(s.out_channels)}) : memory::desc();
  const auto alg = dnnl::algorithm::convolution_direct;
  const auto fwd = dnnl::prop_kind::forward_training;
  const dnnl::engine& eng = dnn::engine();
  using Fwd = dnnl::convolution_forward;
  using BwdWeights = dnnl::convolution_backward_weights;
  Fwd::primitive_desc fwd_pd(
      s.bias ? Fwd::desc(fwd, alg, src_md, w_md, b_md, dst_md, strides, dilates, pad_l, pad_r)
             : Fwd::desc(fwd, alg, src_md, w_md, dst_md, strides, dilates, pad_l, pad_r),
      eng);
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd(
      {alg, diff_src_md, w_md, diff_dst_md, strides, dilates, pad_l, pad_r}, eng, fwd_pd);
  BwdWeights::primitive_desc bwd_weights_pd(
      s.bias
          ? BwdWeights::desc(alg, src_md, diff_w_md, b_md, diff_dst_md, strides, dilates, pad_l,
                             pad_r)
          : BwdWeights::desc(alg, src_md, diff_w_md, diff_dst_md, strides, dilates, pad_l, pad_r),
      eng, fwd_pd);
  // Loom's weights [O, C/G, k...] are goihw's memory when G > 1 (O = G * O/G).
  const tag w_plain =
      s.groups > 1 ? std::array{tag::goiw, tag::goihw, tag::goidhw}[r - 1] : dnn::plain_tag(r + 2);
  return {fwd_pd,
          dnnl::convolution_forward(fwd_pd),
          bwd_data_pd,
          dnnl::convolution_backward_data(bwd_data_pd),
          bwd_weights_pd,
          dnnl::convolution_backward_weights(bwd_weights_pd),
          dnn::activation_desc(src, s.input_blocked),
          memory::desc(w, memory::data_type::f32, w_plain),
          b_md,
          dnn::activation_desc(dst, s.output_blocked)};
}

ConvPrimitives& primitives(const ConvShape& s) {
  memory::dims k{
      memory::dim(s.batch),          memory::dim(s.in_channels), memory::dim(s.out_channels),
      memory::dim(s.groups),         memory::dim(s.layout),      memory::dim(s.input_blocked),
      memory::dim(s.output_blocked), memory::dim(s.bias),        memory::dim(s.bf16)};
  for (const SpatialAxis& a : s.axes)
    k.insert(k.end(), {memory::dim(a.input), memory::dim(a.kernel), memory::dim(a.output),
                       memory::dim(a.stride), memory::dim(a.dilation), a.pad_lower, a.pad_upper});
  return dnn::cached<ConvPrimitives>(dnn::key("conv", {k}), [&] { return make_primitives(s); });
}

}  // namespace

size_t ConvShape::input_size() const {
  return batch * in_channels * detail::spatial(axes, &SpatialAxis::input);
}
size_t ConvShape::output_size() const {
  return batch * out_channels * detail::spatial(axes, &SpatialAxis::output);
}
size_t ConvShape::weight_size() const {
  return out_channels * (groups ? in_channels / groups : 0) *
         detail::spatial(axes, &SpatialAxis::kernel);
}

void check_conv_shape(const ConvShape& s, const char* what) {
  LOOM_CHECK(!s.axes.empty() && s.axes.size() <= 3, ShapeError, what, ": ", s.axes.size(),
             " spatial axes; 1 to 3 are supported");
  LOOM_CHECK(s.groups >= 1 && s.in_channels % s.groups == 0 && s.out_channels % s.groups == 0,
             ShapeError, what, ": ", s.in_channels, " input and ", s.out_channels,
             " output channels are not divisible by groups=", s.groups);
  for (const SpatialAxis& a : s.axes) {
    LOOM_CHECK(a.stride >= 1 && a.dilation >= 1 && a.kernel >= 1, ShapeError, what,
               ": stride, dilation and kernel extent must be at least 1");
    if (a.input == 0 && a.output == 0) continue;  // an empty axis, no windows
    const long extent = long((a.kernel - 1) * a.dilation + 1);
    const long last = long((a.output - 1) * a.stride) - a.pad_lower + extent - 1;
    LOOM_CHECK(a.output >= 1 && last <= long(a.input) - 1 + a.pad_upper, ShapeError, what,
               ": output extent ", a.output, " does not fit input extent ", a.input,
               " with kernel ", a.kernel);
  }
}

bool can_block(const ConvShape& s, size_t channels) {
  return detail::onednn_runs(s.axes) && channels % kChannelBlock == 0;
}

template <>
void convolution_forward<double>(const ConvShape& s, const double* x, const double* w,
                                 const double* b, double* y, bool accumulate) {
  ref_forward(s, x, w, s.bias ? b : nullptr, y, accumulate);
}
template <>
void convolution_backward_data<double>(const ConvShape& s, const double* dy, const double* w,
                                       double* dx, bool accumulate) {
  ref_backward_data(s, dy, w, dx, accumulate);
}
template <>
void convolution_backward_weights<double>(const ConvShape& s, const double* x, const double* dy,
                                          double* dw, double* db, bool accumulate) {
  ref_backward_weights(s, x, dy, dw, accumulate);
  if (s.bias) ref_backward_bias(s, dy, db, accumulate);
}
template <>
void convolution_backward_bias<double>(const ConvShape& s, const double* dy, double* db,
                                       bool accumulate) {
  ref_backward_bias(s, dy, db, accumulate);
}

// The float kernels run the reference loops where oneDNN cannot, on row-major data only.
static bool use_reference(const ConvShape& s) {
  if (detail::onednn_runs(s.axes)) return false;
  LOOM_CHECK(!s.input_blocked && !s.output_blocked, ArgumentError,
             "convolution: blocked activations for a shape oneDNN does not run (see can_block)");
  return true;
}

template <>
void convolution_forward<float>(const ConvShape& s, const float* x, const float* w, const float* b,
                                float* y, bool accumulate) {
  if (use_reference(s)) return ref_forward(s, x, w, s.bias ? b : nullptr, y, accumulate);
  ConvPrimitives& p = primitives(resolve(s, false));
  memory src = dnn::to_layout(p.src, x, p.fwd_pd.src_desc(), 0);
  memory wei = dnn::to_layout(p.weights, w, p.fwd_pd.weights_desc(), 1);
  dnn::Output dst(p.fwd_pd.dst_desc(), p.dst, y, accumulate, 2);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst.mem()}};
  if (s.bias) args.emplace(DNNL_ARG_BIAS, dnn::wrap(p.bias, b));
  dnn::execute(p.fwd, args, "convolution forward");
  dst.finish();
}

template <>
void convolution_backward_data<float>(const ConvShape& s, const float* dy, const float* w,
                                      float* dx, bool accumulate) {
  if (use_reference(s)) return ref_backward_data(s, dy, w, dx, accumulate);
  ConvPrimitives& p = primitives(resolve(s, true));
  memory diff_dst = dnn::to_layout(p.dst, dy, p.bwd_data_pd.diff_dst_desc(), 0);
  memory wei = dnn::to_layout(p.weights, w, p.bwd_data_pd.weights_desc(), 1);
  dnn::Output diff_src(p.bwd_data_pd.diff_src_desc(), p.src, dx, accumulate, 2);
  dnn::execute(
      p.bwd_data,
      {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_SRC, diff_src.mem()}},
      "convolution backward (data)");
  diff_src.finish();
}

template <>
void convolution_backward_weights<float>(const ConvShape& s, const float* x, const float* dy,
                                         float* dw, float* db, bool accumulate) {
  if (use_reference(s)) {
    ref_backward_weights(s, x, dy, dw, accumulate);
    if (s.bias) ref_backward_bias(s, dy, db, accumulate);
    return;
  }
  ConvPrimitives& p = primitives(resolve(s, false));
  memory src = dnn::to_layout(p.src, x, p.bwd_weights_pd.src_desc(), 0);
  memory diff_dst = dnn::to_layout(p.dst, dy, p.bwd_weights_pd.diff_dst_desc(), 1);
  dnn::Output diff_w(p.bwd_weights_pd.diff_weights_desc(), p.weights, dw, accumulate, 2);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, diff_w.mem()}};
  std::optional<dnn::Output> diff_b;
  if (s.bias) {
    diff_b.emplace(p.bias, p.bias, db, accumulate, 3);
    args.emplace(DNNL_ARG_DIFF_BIAS, diff_b->mem());
  }
  dnn::execute(p.bwd_weights, args, "convolution backward (weights)");
  if (diff_b) diff_b->finish();  // before diff_w's, which may use buffer 3 for a reorder
  diff_w.finish();
}

template <>
void convolution_backward_bias<float>(const ConvShape& s, const float* dy, float* db,
                                      bool accumulate) {
  if (!s.output_blocked) return ref_backward_bias(s, dy, db, accumulate);
  memory::dims dst{memory::dim(s.batch), memory::dim(s.out_channels)};
  for (const SpatialAxis& a : s.axes) dst.push_back(memory::dim(a.output));
  memory plain = dnn::to_layout(dnn::activation_desc(dst, true), dy, dnn::plain_desc(dst), 0);
  ref_backward_bias(s, static_cast<const float*>(plain.get_data_handle()), db, accumulate);
}

}  // namespace loom::kernels
