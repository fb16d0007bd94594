#include "loom/ops/crop.h"

#include <cmath>
#include <unordered_map>

#include "loom/graph/graph_impl.h"
#include "loom/graph/op.h"
#include "loom/kernels/crop.h"

namespace loom {

namespace {

constexpr const char* kOffsetX = "offset_x";
constexpr const char* kOffsetY = "offset_y";

// Attributes: offset_x and offset_y (ints >= 0), the window's left and top.
class CropOp : public OpDef {
 public:
  const char* name() const override { return "Crop"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable &x = in[0], &ref = in[1];
    LOOM_CHECK(x.shape().rank() >= 2 && ref.shape().rank() >= 2, ShapeError, "crop: node_input ",
               x.describe(), " and node_referent ", ref.describe(),
               " must both have at least two static axes (height and width last)");
    LOOM_CHECK(ref.dynamic_axes().empty() || ref.dynamic_axes() == x.dynamic_axes(), ShapeError,
               "crop: node_referent ", ref.describe(),
               " must have node_input's dynamic axes or none (node_input ", x.describe(), ")");
    const int64_t ox = a.get<int64_t>(kOffsetX), oy = a.get<int64_t>(kOffsetY);
    LOOM_CHECK(ox >= 0 && oy >= 0, ArgumentError, "crop: offsets (", ox, ", ", oy,
               ") must be >= 0");
    std::vector<size_t> dims = x.shape().dims();
    const size_t r = dims.size(), rr = ref.shape().rank();
    const size_t h = ref.shape()[rr - 2], w = ref.shape()[rr - 1];
    LOOM_CHECK(size_t(oy) + h <= dims[r - 2] && size_t(ox) + w <= dims[r - 1], ShapeError,
               "crop: a window of node_referent's ", h, " x ", w, " at offset_y ", oy,
               " and offset_x ", ox, " does not fit in node_input ", x.describe());
    dims[r - 2] = h;
    dims[r - 1] = w;
    return {{NDShape(std::move(dims)), x.dtype(), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    const kernels::CropGeometry g = geometry(*call.inputs[0], *call.output, call.attributes);
    dispatch(call.output->dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::crop_forward<T>(g, call.inputs[0]->ptr<T>(), call.output->ptr<T>());
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const kernels::CropGeometry g = geometry(dx, *call.output, call.attributes);
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::crop_backward<T>(g, call.output_gradient->ptr<T>(), dx.ptr<T>(), accumulate);
    });
  }

  OpTraits traits(const Dictionary&) const override {
    OpTraits t;
    t.differentiable = InputSet::only(0);
    t.backward_reads_inputs = InputSet::none();
    t.backward_reads_output = false;
    return t;
  }

  // node_input's positions move up and left by the offsets.
  std::optional<SpatialTransform> spatial_transform(size_t index, const std::vector<Variable>&,
                                                    const Dictionary& a) const override {
    if (index != 0) return std::nullopt;
    return SpatialTransform{AxisTransform{1, -double(a.get<int64_t>(kOffsetY))},
                            AxisTransform{1, -double(a.get<int64_t>(kOffsetX))}};
  }

 private:
  static kernels::CropGeometry geometry(const Tensor& x, const Tensor& y, const Dictionary& a) {
    const std::vector<size_t>& in = x.shape.dims();
    const std::vector<size_t>& out = y.shape.dims();
    const size_t r = in.size();
    kernels::CropGeometry g;
    g.height = in[r - 2];
    g.width = in[r - 1];
    g.outer = g.height * g.width == 0 ? 0 : x.size() / (g.height * g.width);
    g.window_height = out[r - 2];
    g.window_width = out[r - 1];
    g.top = size_t(a.get<int64_t>(kOffsetY));
    g.left = size_t(a.get<int64_t>(kOffsetX));
    return g;
  }
};

const CropOp kCrop;

// For each variable reached from `start` against the data flow: the map from its positions to
// start's (CNTK's ComputeCropOffsets, one side).
using Transforms = std::unordered_map<const VariableImpl*, SpatialTransform>;

// Adds the inputs of v's producer to `transforms` (and `pending`), composed with v's map.
void visit_inputs(const Variable& v, Transforms& transforms, std::vector<Variable>& pending) {
  if (!v.is_output()) return;  // an input, parameter or constant: nothing above it
  const Function f = v.producer();
  const FunctionImpl& impl = *f.impl();
  const OpDef& op = *impl.op;
  const SpatialTransform& to_start = transforms.at(v.impl().get());
  bool any = false;
  for (size_t i = 0; i < impl.inputs.size(); ++i) {
    const auto t = op.spatial_transform(i, impl.inputs, impl.attributes);
    if (!t) continue;
    any = true;
    const Variable& u = impl.inputs[i];
    const SpatialTransform composed{to_start[0].after((*t)[0]), to_start[1].after((*t)[1])};
    auto [it, inserted] = transforms.emplace(u.impl().get(), composed);
    if (inserted)
      pending.push_back(u);
    else
      LOOM_CHECK(it->second == composed, ArgumentError, "crop_automatic: ", u.describe(),
                 " reaches the crop along paths that place it differently");
  }
  LOOM_CHECK(any, ArgumentError, "crop_automatic: the path between the crop's inputs crosses ",
             op.name(), " (", f.to_string(),
             "), which has no spatial map; give the offsets with crop_manual");
}

struct Offsets {
  size_t x = 0, y = 0;
};

Offsets automatic_offsets(const Variable& input, const Variable& referent,
                          const Variable* ancestor_input, const Variable* ancestor_referent) {
  LOOM_CHECK(input.has_known_shape() && referent.has_known_shape(), ArgumentError,
             "crop_automatic: the offsets are computed when the crop is built, from known "
             "shapes; node_input ",
             input.describe(), " or node_referent ", referent.describe(), " has none yet");
  Transforms from_input{{input.impl().get(), SpatialTransform{}}};
  std::vector<Variable> pending{input};
  while (!pending.empty()) {
    Variable v = pending.back();
    pending.pop_back();
    visit_inputs(v, from_input, pending);
  }
  Transforms from_referent{{referent.impl().get(), SpatialTransform{}}};
  pending = {referent};
  while (!pending.empty()) {
    Variable v = pending.back();
    pending.pop_back();
    const SpatialTransform* first = nullptr;
    if (auto it = from_input.find(v.impl().get()); it != from_input.end()) {
      first = &it->second;
    } else if (ancestor_referent && v == *ancestor_referent) {
      auto a = from_input.find(ancestor_input->impl().get());
      LOOM_CHECK(a != from_input.end(), ArgumentError,
                 "crop_automatic_with_ancestors: ", ancestor_input->describe(),
                 " is not an ancestor of node_input ", input.describe(),
                 " through ops with spatial maps");
      first = &a->second;
    }
    if (first) {
      const SpatialTransform& to_referent = from_referent.at(v.impl().get());
      const SpatialTransform t = {to_referent[0].after((*first)[0].inverse()),
                                  to_referent[1].after((*first)[1].inverse())};
      for (const AxisTransform& a : t)
        LOOM_CHECK(a.scale == 1 && a.translate <= 0, ArgumentError,
                   "crop_automatic: node_referent ", referent.describe(), " is ",
                   a.scale != 1 ? "scaled against" : "not inside", " node_input ", input.describe(),
                   " (map ", a.scale, " p + ", a.translate, "); give the offsets with crop_manual");
      // CNTK's offsets are whole pixels: truncated.
      return {size_t(-t[1].translate), size_t(-t[0].translate)};
    }
    visit_inputs(v, from_referent, pending);
  }
  throw ArgumentError(detail::concat(
      "crop_automatic: node_input ", input.describe(), " and node_referent ", referent.describe(),
      " have no common ancestor through ops with spatial maps; name two aligned ancestors "
      "with crop_automatic_with_ancestors, or give the offsets with crop_manual"));
}

}  // namespace

Function crop_manual(const Variable& node_input, const Variable& node_referent, size_t offset_x,
                     size_t offset_y, const std::string& name) {
  return make_primitive(kCrop, {node_input, node_referent},
                        Dictionary({{kOffsetX, int64_t(offset_x)}, {kOffsetY, int64_t(offset_y)}}),
                        name);
}

Function crop_automatic(const Variable& node_input, const Variable& node_referent,
                        const std::string& name) {
  const Offsets o = automatic_offsets(node_input, node_referent, nullptr, nullptr);
  return crop_manual(node_input, node_referent, o.x, o.y, name);
}

Function crop_automatic_with_ancestors(const Variable& node_input, const Variable& node_referent,
                                       const Variable& ancestor_input,
                                       const Variable& ancestor_referent, const std::string& name) {
  const Offsets o =
      automatic_offsets(node_input, node_referent, &ancestor_input, &ancestor_referent);
  return crop_manual(node_input, node_referent, o.x, o.y, name);
}

std::vector<OpSchema> crop_schemas() {
  OpSchema s{&kCrop, 2, 2};
  s.python = "crop_manual";
  s.params = {
      {"node_input"}, {"node_referent"}, {kOffsetX, ParamType::Int}, {kOffsetY, ParamType::Int}};
  s.doc = "node_input's window of node_referent's height and width at (offset_y, offset_x)";
  s.onnx = {"Slice"};  // of the two trailing axes
  ConformanceCase image{{{NDShape{2, 5, 6}}, {NDShape{1, 3, 4}, false}},
                        Dictionary({{kOffsetX, int64_t{2}}, {kOffsetY, int64_t{1}}})};
  ConformanceCase corner{{{NDShape{4, 3}}, {NDShape{2, 3}}},
                         Dictionary({{kOffsetX, int64_t{0}}, {kOffsetY, int64_t{2}}})};
  s.conformance = {image, corner};
  // The referents descend from the inputs through Plus (which keeps image positions), so the
  // offsets found are 0: a window the size of the input.
  const ConformanceInput image_input{NDShape{2, 4, 3}};
  return {
      s,
      {.op = nullptr,
       .min_inputs = 2,
       .max_inputs = 2,
       .python = "crop_automatic",
       .params = {{"node_input"}, {"node_referent"}},
       .doc = "node_input cropped to node_referent's height and width (the two trailing axes) at "
              "the offsets that align them, found from the ops between the two and their common "
              "ancestor",
       .conformance = {{{image_input,
                         {.shape = NDShape{1, 4, 3},
                          .through = "Plus",
                          .through_with = 0,
                          .differentiated = false}}}},
       .build = [](std::vector<Variable> in, const Dictionary&,
                   const std::string& name) { return crop_automatic(in[0], in[1], name); }},
      {.op = nullptr,
       .min_inputs = 4,
       .max_inputs = 4,
       .python = "crop_automatic_with_ancestors",
       .params = {{"node_input"}, {"node_referent"}, {"ancestor_input"}, {"ancestor_referent"}},
       .doc = "crop_automatic() where node_input and node_referent descend from different, "
              "aligned nodes: ancestor_input (above node_input) and ancestor_referent (above "
              "node_referent) count as one",
       .conformance = {{{{.shape = NDShape{2, 4, 3}, .through = "Plus", .through_with = 2},
                         {.shape = NDShape{1, 4, 3},
                          .through = "Plus",
                          .through_with = 3,
                          .differentiated = false},
                         image_input,
                         {.shape = NDShape{1, 4, 3}, .differentiated = false}}}},
       .build = [](std::vector<Variable> in, const Dictionary&, const std::string& name) {
         return crop_automatic_with_ancestors(in[0], in[1], in[2], in[3], name);
       }}};
}

}  // namespace loom
