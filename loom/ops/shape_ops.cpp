#include "loom/ops/shape_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>

#include "loom/graph/op.h"
#include "loom/kernels/pad.h"
#include "loom/kernels/permute.h"
#include "loom/ops/linear.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"

namespace loom {

namespace {

// A packed tensor viewed as [outer, dim, inner] around one of its static axes (outer
// includes the rows), the form in which slices and splices are block copies.
struct AxisView {
  size_t outer = 1, dim = 1, inner = 1;
};

AxisView view_around(const Tensor& t, size_t static_axis) {
  const size_t k = static_axis + (t.dynamic() ? 1 : 0);
  AxisView v;
  v.dim = t.shape[k];
  for (size_t i = 0; i < k; ++i) v.outer *= t.shape[i];
  for (size_t i = k + 1; i < t.shape.rank(); ++i) v.inner *= t.shape[i];
  return v;
}

template <typename T>
void fill_zero(Tensor& t) {
  std::fill_n(t.ptr<T>(), t.size(), T(0));
}

// An axis attribute's static index, or an ArgumentError naming the op and the parameter (a list,
// None or a dynamic axis where one static axis is wanted).
int64_t static_index_of(const char* op, const char* param, const DictionaryValue& v) {
  LOOM_CHECK(v.is<int64_t>(), ArgumentError, op, ": '", param,
             "' must be one static axis (an int), not ",
             v.is<DictionaryVector>() ? std::string("a list") : attribute_axis(v).to_string());
  return v.get<int64_t>();
}

// Position `given` among `count` (negative counts from the end), or an ArgumentError that names
// the op, the parameter, the input and the range allowed.
size_t position_in(const char* op, const char* param, int64_t given, size_t count,
                   const Variable& x) {
  const int64_t n = int64_t(count);
  LOOM_CHECK(given >= -n && given < n, ArgumentError, op, ": ", param, " ", given,
             " is out of range for input ", x.type_string(), " (give ", -n, " to ", n - 1, ")");
  return size_t(given < 0 ? given + n : given);
}

// The static-axis index an axis attribute holds for input x, checked.
size_t static_axis_of(const char* op, const char* param, const DictionaryValue& v,
                      const Variable& x) {
  return position_in(op, param, static_index_of(op, param, v), x.shape().rank(), x);
}

// The base of the ops that give the same elements in another sample shape (reshape, squeeze,
// expand_dims, flatten): forward and backward are copies.
class ReshapeLikeOp : public OpDef {
 public:
  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    return {{target(x, a), x.dtype(), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    Tensor& y = *call.output;
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      op_util::copy_or_add(y.size(), call.inputs[0]->ptr<T>(), y.ptr<T>(), false);
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    if (dx.data == call.output_gradient->data) return;  // the executor wrote it there already
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      op_util::copy_or_add(dx.size(), call.output_gradient->ptr<T>(), dx.ptr<T>(), accumulate);
    });
  }

  OpTraits traits(const Dictionary&) const override {
    return {.backward_reads_inputs = InputSet::none(),
            .backward_reads_output = false,
            .writes_over_inputs = InputSet::all(),
            .output_views_input = true};
  }

 protected:
  // The output's sample shape; errors name the op.
  virtual NDShape target(const Variable& x, const Dictionary& a) const = 0;
};

// ---- reshape ---------------------------------------------------------------------------------

// Attributes: "shape" (the target, possibly with one kInferred dimension) and, from the op
// table, "begin_axis" and "end_axis" (axis attributes; all static axes stands for CNTK's None):
// the shape replaces the static axes [begin_axis, end_axis). Files from before the table hold
// "shape" alone, which replaces every static axis.
class ReshapeOp : public ReshapeLikeOp {
 public:
  const char* name() const override { return "Reshape"; }

 protected:
  NDShape target(const Variable& x, const Dictionary& a) const override {
    const std::vector<size_t>& dims = x.shape().dims();
    const size_t rank = dims.size();
    // A bound: an int (negative from the end; rank allowed, as the end) or None.
    auto bound = [&](const char* key, size_t none) -> size_t {
      if (!a.contains(key)) return none;
      const DictionaryValue& v = a.at(key);
      if (!v.is<int64_t>() && attribute_axis(v).is_all_static()) return none;
      const int64_t given = static_index_of("reshape", key, v), n = int64_t(rank);
      LOOM_CHECK(given >= -n && given <= n, ArgumentError, "reshape: ", key, " ", given,
                 " is out of range for input ", x.type_string(), " (give ", -n, " to ", n, ")");
      return size_t(given < 0 ? given + n : given);
    };
    const size_t begin = bound("begin_axis", 0), end = bound("end_axis", rank);
    LOOM_CHECK(begin <= end, ArgumentError, "reshape: begin_axis (static axis ", begin,
               ") comes after end_axis (static axis ", end, ") for input ", x.type_string());
    NDShape shape = a.get<NDShape>("shape");
    size_t total = 1;
    for (size_t i = begin; i < end; ++i) total *= dims[i];
    size_t known = 1, inferred = shape.rank();
    for (size_t i = 0; i < shape.rank(); ++i) {
      if (shape[i] != NDShape::kInferred) {
        known *= shape[i];
        continue;
      }
      LOOM_CHECK(inferred == shape.rank(), ShapeError, "Reshape: target shape ", shape.to_string(),
                 " has more than one inferred dimension");
      inferred = i;
    }
    if (inferred < shape.rank() && known != 0 && total % known == 0)
      shape[inferred] = total / known;
    LOOM_CHECK(!shape.has_inferred() && shape.total_size() == total, ShapeError, "Reshape: input ",
               x.type_string(), " has ", total,
               begin == 0 && end == rank ? " elements per sample"
                                         : " elements in the static axes replaced",
               ", which do not fit the target shape ", a.get<NDShape>("shape").to_string());
    if (begin == 0 && end == rank) return shape;
    std::vector<size_t> out(dims.begin(), dims.begin() + begin);
    out.insert(out.end(), shape.dims().begin(), shape.dims().end());
    out.insert(out.end(), dims.begin() + end, dims.end());
    return NDShape(std::move(out));
  }
};

// ---- squeeze, expand_dims, flatten -----------------------------------------------------------

// Attribute "axes": an axis attribute (all static axes: every axis of extent 1) or a list.
class SqueezeOp : public ReshapeLikeOp {
 public:
  const char* name() const override { return "Squeeze"; }

 protected:
  NDShape target(const Variable& x, const Dictionary& a) const override {
    const std::vector<size_t>& dims = x.shape().dims();
    std::vector<bool> removed(dims.size(), false);
    const DictionaryValue& axes = a.at("axes");
    if (!axes.is<int64_t>() && !axes.is<DictionaryVector>() &&
        attribute_axis(axes).is_all_static()) {
      for (size_t i = 0; i < dims.size(); ++i) removed[i] = dims[i] == 1;
    } else {
      const DictionaryVector list =
          axes.is<DictionaryVector>() ? axes.get<DictionaryVector>() : DictionaryVector{axes};
      for (const DictionaryValue& v : list) {
        const size_t i = static_axis_of("squeeze", "axis", v, x);
        LOOM_CHECK(!removed[i], ArgumentError, "squeeze: static axis ", v.get<int64_t>(),
                   " of input ", x.type_string(), " is named twice");
        LOOM_CHECK(dims[i] == 1, ArgumentError, "squeeze: static axis ", v.get<int64_t>(),
                   " of input ", x.type_string(), " has extent ", dims[i],
                   ", not 1; only axes of extent 1 can be squeezed");
        removed[i] = true;
      }
    }
    std::vector<size_t> out;
    for (size_t i = 0; i < dims.size(); ++i)
      if (!removed[i]) out.push_back(dims[i]);
    return NDShape(std::move(out));
  }
};

// The position at which expand_dims inserts its axis, from CNTK's axis: behind static axis
// `axis` (CNTK's Python reverses the axes, and its C++ inserts in front of the axis there).
size_t expand_position(int64_t axis, size_t rank, const Variable& x) {
  const int64_t n = int64_t(rank);
  LOOM_CHECK(axis >= -n - 1 && axis < n, ArgumentError, "expand_dims: axis ", axis,
             " is out of range for input ", x.type_string(), " (give ", -n - 1, " to ", n - 1,
             "; the new axis goes behind static axis axis, first for ", -n - 1, ")");
  return size_t((axis < 0 ? axis + n : axis) + 1);
}

// Attribute "axis" (an axis attribute).
class ExpandDimsOp : public ReshapeLikeOp {
 public:
  const char* name() const override { return "ExpandDims"; }

 protected:
  NDShape target(const Variable& x, const Dictionary& a) const override {
    std::vector<size_t> dims = x.shape().dims();
    const size_t at =
        expand_position(static_index_of("expand_dims", "axis", a.at("axis")), dims.size(), x);
    dims.insert(dims.begin() + at, 1);
    return NDShape(std::move(dims));
  }
};

// Attribute "axis" (an axis attribute; all static axes stands for CNTK's None, which is 0).
class FlattenOp : public ReshapeLikeOp {
 public:
  const char* name() const override { return "Flatten"; }

 protected:
  NDShape target(const Variable& x, const Dictionary& a) const override {
    const std::vector<size_t>& dims = x.shape().dims();
    const int64_t n = int64_t(dims.size());
    const DictionaryValue& v = a.at("axis");
    int64_t axis = 0;
    if (v.is<int64_t>() || !attribute_axis(v).is_all_static()) {
      axis = static_index_of("flatten", "axis", v);
      LOOM_CHECK(axis >= -n && axis <= n, ArgumentError, "flatten: axis ", axis,
                 " is out of range for input ", x.type_string(), " (give ", -n, " to ", n, ")");
      if (axis < 0) axis += n;
    }
    size_t outer = 1, inner = 1;
    for (int64_t i = 0; i < n; ++i) (i < axis ? outer : inner) *= dims[size_t(i)];
    return NDShape{outer, inner};
  }
};

// ---- slice -----------------------------------------------------------------------------------

// [begin, end) of an axis of extent dim, from CNTK's indices (negative from the end, end 0 is
// the end); empty when out of range (shape inference has already rejected that).
struct Range {
  int64_t begin, end;
};

Range slice_range(const Dictionary& a, size_t dim) {
  const int64_t b = a.get<int64_t>("begin"), e = a.get<int64_t>("end"), d = int64_t(dim);
  return {b >= 0 ? b : b + d, e > 0 ? e : e + d};
}

// Attributes: "axis", "begin", "end" as the user gave them.
class SliceOp : public OpDef {
 public:
  const char* name() const override { return "Slice"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    const size_t axis = op_util::static_axis_index(name(), Axis(int(a.get<int64_t>("axis"))), x);
    const Range r = slice_range(a, x.shape()[axis]);
    LOOM_CHECK(0 <= r.begin && r.begin <= r.end && r.end <= int64_t(x.shape()[axis]), ShapeError,
               "Slice: index range [", a.get<int64_t>("begin"), ",", a.get<int64_t>("end"),
               "), interpreted as [", r.begin, ",", r.end, "), is invalid for axis ",
               a.get<int64_t>("axis"), " of input ", x.type_string());
    std::vector<size_t> dims = x.shape().dims();
    dims[axis] = size_t(r.end - r.begin);
    return {{NDShape(std::move(dims)), x.dtype(), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    Tensor& y = *call.output;
    const AxisView v = view(x, call.attributes);
    const size_t begin = size_t(slice_range(call.attributes, v.dim).begin);
    const size_t len = view(y, call.attributes).dim * v.inner;
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::copy_blocks(v.outer, len, x.ptr<T>() + begin * v.inner, v.dim * v.inner, y.ptr<T>(),
                           len, false);
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const AxisView v = view(dx, call.attributes);
    const size_t begin = size_t(slice_range(call.attributes, v.dim).begin);
    const size_t len = view(*call.output, call.attributes).dim * v.inner;
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      if (!accumulate) fill_zero<T>(dx);
      kernels::copy_blocks(v.outer, len, call.output_gradient->ptr<T>(), len,
                           dx.ptr<T>() + begin * v.inner, v.dim * v.inner, true);
    });
  }

 private:
  static AxisView view(const Tensor& t, const Dictionary& a) {
    return view_around(t,
                       op_util::static_axis_index(a.get<int64_t>("axis"), op_util::sample_rank(t)));
  }
};

// ---- splice ----------------------------------------------------------------------------------

// Attributes: "axis" as the user gave it.
class SpliceOp : public OpDef {
 public:
  const char* name() const override { return "Splice"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const DataType dtype = common_dtype(name(), in);
    const Variable& x0 = in[0];
    const size_t axis = op_util::static_axis_index(name(), Axis(int(a.get<int64_t>("axis"))), x0);
    std::vector<size_t> dims = x0.shape().dims();
    for (size_t i = 1; i < in.size(); ++i) {
      const NDShape& s = in[i].shape();
      bool fits = s.rank() == dims.size();
      for (size_t k = 0; fits && k < s.rank(); ++k) fits = k == axis || s[k] == dims[k];
      LOOM_CHECK(fits, ShapeError, "Splice: input ", i, " ", in[i].type_string(),
                 " does not match input 0 ", x0.type_string(), " in all axes but axis ",
                 a.get<int64_t>("axis"));
      LOOM_CHECK(in[i].dynamic_axes() == x0.dynamic_axes(), ShapeError, "Splice: input ", i, " ",
                 in[i].type_string(), " has other dynamic axes than input 0 ", x0.type_string(),
                 " (splice does not broadcast over samples)");
      dims[axis] += s[axis];
    }
    return {{NDShape(std::move(dims)), dtype, x0.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    Tensor& y = *call.output;
    const AxisView out = view(y, call.attributes);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      size_t offset = 0;
      for (const Tensor* x : call.inputs) {
        const size_t len = view(*x, call.attributes).dim * out.inner;
        kernels::copy_blocks(out.outer, len, x->ptr<T>(), len, y.ptr<T>() + offset,
                             out.dim * out.inner, false);
        offset += len;
      }
    });
  }

  void backward(OpCall& call, size_t index, Tensor& dx, bool accumulate) const override {
    const AxisView out = view(*call.output, call.attributes);
    size_t offset = 0;
    for (size_t i = 0; i < index; ++i) offset += view(*call.inputs[i], call.attributes).dim;
    const size_t len = view(dx, call.attributes).dim * out.inner;
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::copy_blocks(out.outer, len, call.output_gradient->ptr<T>() + offset * out.inner,
                           out.dim * out.inner, dx.ptr<T>(), len, accumulate);
    });
  }

 private:
  static AxisView view(const Tensor& t, const Dictionary& a) {
    return view_around(t,
                       op_util::static_axis_index(a.get<int64_t>("axis"), op_util::sample_rank(t)));
  }
};

// ---- transpose -------------------------------------------------------------------------------

// Input axis that output axis k of a rank-`rank` sample takes; attribute "perm" (empty:
// reversed axes) was validated by shape inference.
size_t source_axis(const Dictionary& a, size_t k, size_t rank) {
  const DictionaryVector& perm = a.get<DictionaryVector>("perm");
  return perm.empty() ? rank - 1 - k : op_util::static_axis_index(perm[k].get<int64_t>(), rank);
}

// Attributes: "perm" as the user gave it.
class TransposeOp : public OpDef {
 public:
  const char* name() const override { return "Transpose"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    const size_t rank = x.shape().rank();
    const DictionaryVector& perm = a.get<DictionaryVector>("perm");
    LOOM_CHECK(perm.empty() || perm.size() == rank, ShapeError, "Transpose: permutation of ",
               perm.size(), " axes for input ", x.type_string(), " of rank ", rank);
    std::vector<bool> used(rank, false);
    std::vector<size_t> dims(rank);
    for (size_t k = 0; k < rank; ++k) {
      const size_t src =
          perm.empty() ? rank - 1 - k
                       : op_util::static_axis_index(name(), Axis(int(perm[k].get<int64_t>())), x);
      LOOM_CHECK(!used[src], ShapeError, "Transpose: axis ", src,
                 " appears twice in the permutation for input ", x.type_string());
      used[src] = true;
      dims[k] = x.shape()[src];
    }
    return {{NDShape(std::move(dims)), x.dtype(), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    Tensor& y = *call.output;
    const std::vector<size_t> perm = permutation(x, call.attributes);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::permute(x.ptr<T>(), y.ptr<T>(), x.shape.dims(), perm, false);
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const std::vector<size_t> perm = permutation(*call.inputs[0], call.attributes);
    std::vector<size_t> inverse(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) inverse[perm[k]] = k;
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::permute(call.output_gradient->ptr<T>(), dx.ptr<T>(),
                       call.output_gradient->shape.dims(), inverse, accumulate);
    });
  }

  OpTraits traits(const Dictionary&) const override {
    return {.backward_reads_inputs = InputSet::none(), .backward_reads_output = false};
  }

 protected:
  // The input axis that output axis k of a sample of rank `rank` takes.
  virtual std::function<size_t(size_t, size_t)> source(const Dictionary& a) const {
    return [&a](size_t k, size_t rank) { return source_axis(a, k, rank); };
  }

 private:
  // The input axis each axis of the whole output tensor takes (the batch axis stays first).
  std::vector<size_t> permutation(const Tensor& x, const Dictionary& a) const {
    const size_t rank = x.shape.rank(), first = x.dynamic() ? 1 : 0;
    const auto from = source(a);
    std::vector<size_t> perm(rank);
    for (size_t k = 0; k < rank; ++k)
      perm[k] = k < first ? k : first + from(k - first, rank - first);
    return perm;
  }
};

// ---- swapaxes --------------------------------------------------------------------------------

// Attributes: "axis1", "axis2" (axis attributes).
class TransposeAxesOp : public TransposeOp {
 public:
  const char* name() const override { return "TransposeAxes"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    std::vector<size_t> dims = x.shape().dims();
    std::swap(dims[static_axis_of("swapaxes", "axis1", a.at("axis1"), x)],
              dims[static_axis_of("swapaxes", "axis2", a.at("axis2"), x)]);
    return {{NDShape(std::move(dims)), x.dtype(), x.dynamic_axes(), false}};
  }

 protected:
  std::function<size_t(size_t, size_t)> source(const Dictionary& a) const override {
    const int64_t a1 = a.get<int64_t>("axis1"), a2 = a.get<int64_t>("axis2");
    return [a1, a2](size_t k, size_t rank) {
      const size_t i = op_util::static_axis_index(a1, rank),
                   j = op_util::static_axis_index(a2, rank);
      return k == i ? j : k == j ? i : k;
    };
  }
};

// ---- pad -------------------------------------------------------------------------------------

// Attributes: "pattern" (ints: before and after for each static axis), "mode" (kernels::PadMode's
// values), "constant_value".
class PadOp : public OpDef {
 public:
  const char* name() const override { return "Pad"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    std::vector<size_t> dims = x.shape().dims();
    const std::vector<int64_t> pattern = attribute_ints(a.at("pattern"));
    LOOM_CHECK(pattern.size() == 2 * dims.size(), ArgumentError, "pad: the pattern has ",
               pattern.size(), " numbers for input ", x.type_string(), " of rank ", dims.size(),
               "; give one (before, after) pair per static axis, ", dims.size(), " pairs");
    const int64_t mode = a.get<int64_t>("mode");
    LOOM_CHECK(mode >= 0 && mode <= 2, ArgumentError, "pad: mode ", mode,
               " is none of CONSTANT_PAD (0), REFLECT_PAD (1) and SYMMETRIC_PAD (2)");
    for (size_t k = 0; k < dims.size(); ++k) {
      const int64_t before = pattern[2 * k], after = pattern[2 * k + 1], n = int64_t(dims[k]);
      LOOM_CHECK(before >= 0 && after >= 0, ArgumentError, "pad: the pattern (", before, ", ",
                 after, ") of static axis ", k, " is negative (pad does not crop)");
      const int64_t most = mode == 1 ? n - 1 : mode == 2 ? n : INT64_MAX;
      LOOM_CHECK(before <= most && after <= most, ArgumentError, "pad: the pattern (", before, ", ",
                 after, ") of static axis ", k, " of input ", x.type_string(), " exceeds ", most,
                 ", the most ", mode == 1 ? "REFLECT_PAD" : "SYMMETRIC_PAD",
                 " can pad an axis of extent ", n, " with");
      dims[k] += size_t(before + after);
    }
    return {{NDShape(std::move(dims)), x.dtype(), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    const kernels::PadGeometry g = geometry(*call.inputs[0], *call.output, call.attributes);
    const double value = call.attributes.get<double>("constant_value");
    dispatch(call.output->dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::pad_forward<T>(g, T(value), call.inputs[0]->ptr<T>(), call.output->ptr<T>());
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const kernels::PadGeometry g = geometry(dx, *call.output, call.attributes);
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::pad_backward<T>(g, call.output_gradient->ptr<T>(), dx.ptr<T>(), accumulate);
    });
  }

  OpTraits traits(const Dictionary&) const override {
    OpTraits t;
    t.backward_reads_inputs = InputSet::none();
    t.backward_reads_output = false;
    return t;
  }

 private:
  // The packed tensors' geometry: the row axis (if any) is not padded.
  static kernels::PadGeometry geometry(const Tensor& x, const Tensor& y, const Dictionary& a) {
    kernels::PadGeometry g;
    g.in = x.shape.dims();
    g.out = y.shape.dims();
    g.head.assign(g.in.size(), 0);
    const std::vector<int64_t> pattern = attribute_ints(a.at("pattern"));
    const size_t first = x.dynamic() ? 1 : 0;
    for (size_t k = first; k < g.in.size(); ++k) g.head[k] = size_t(pattern[2 * (k - first)]);
    g.mode = kernels::PadMode(a.get<int64_t>("mode"));
    return g;
  }
};

// ---- eye_like --------------------------------------------------------------------------------

// Attribute "sparse_output" (false; absent in an ONNX import). The output's rows are x's rows
// when x has a batch axis, else its first static axis.
class EyeLikeOp : public OpDef {
 public:
  const char* name() const override { return "EyeLikeOp"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    LOOM_CHECK(!a.contains("sparse_output") || !a.get<bool>("sparse_output"), ArgumentError,
               "eye_like: sparse output is not supported yet; use sparse_output=False (a dense "
               "identity)");
    const std::vector<Axis>& dynamic = x.dynamic_axes();
    LOOM_CHECK(dynamic.size() <= 1 && (dynamic.empty() || dynamic[0].is_batch()), ArgumentError,
               "eye_like: input ", x.type_string(),
               " has a sequence axis; eye_like takes a matrix (a batch of vectors, or a "
               "tensor of rank 2 without dynamic axes)");
    LOOM_CHECK(dynamic.size() + x.shape().rank() == 2, ArgumentError, "eye_like: input ",
               x.type_string(), " has ", dynamic.size() + x.shape().rank(),
               " axes (counting its batch axis), not the 2 of a matrix");
    return {{x.shape(), x.dtype(), dynamic, false}};
  }

  void forward(OpCall& call) const override {
    Tensor& y = *call.output;
    const size_t rows = y.shape[0], cols = y.shape[1];
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* out = y.ptr<T>();
      std::fill_n(out, y.size(), T(0));
      for (size_t r = 0; r < std::min(rows, cols); ++r) out[r * cols + r] = T(1);
    });
  }

  void backward(OpCall&, size_t, Tensor& dx, bool accumulate) const override {
    if (accumulate) return;
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      fill_zero<T>(dx);
    });
  }

  OpTraits traits(const Dictionary&) const override {
    OpTraits t;
    t.differentiable = InputSet::none();
    t.backward_reads_inputs = InputSet::none();
    t.backward_reads_output = false;
    t.runs_step_by_step = false;  // the row index decides the values
    return t;
  }
};

// ---- cast ------------------------------------------------------------------------------------

// Attribute "dtype" (dtype_attribute). The gradient is cast back to the input's type.
class CastOp : public OpDef {
 public:
  const char* name() const override { return "Cast"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    return {{x.shape(), attribute_dtype(a.at("dtype")), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override { convert(*call.inputs[0], *call.output, false); }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    convert(*call.output_gradient, dx, accumulate);
  }

  OpTraits traits(const Dictionary&) const override {
    OpTraits t;
    t.backward_reads_inputs = InputSet::none();
    t.backward_reads_output = false;
    return t;
  }

 private:
  static void convert(const Tensor& from, Tensor& to, bool accumulate) {
    dispatch(from.dtype, [&](auto zero_from) {
      using F = decltype(zero_from);
      dispatch(to.dtype, [&](auto zero_to) {
        using T = decltype(zero_to);
        const F* src = from.ptr<F>();
        T* dst = to.ptr<T>();
        for (size_t i = 0, n = to.size(); i < n; ++i)
          dst[i] = accumulate ? dst[i] + T(src[i]) : T(src[i]);
      });
    });
  }
};

const ReshapeOp kReshape;
const SliceOp kSlice;
const SpliceOp kSplice;
const TransposeOp kTranspose;
const SqueezeOp kSqueeze;
const ExpandDimsOp kExpandDims;
const TransposeAxesOp kTransposeAxes;
const FlattenOp kFlatten;
const PadOp kPad;
const EyeLikeOp kEyeLike;
const CastOp kCast;

// CNTK's None for an axis parameter.
DictionaryValue none_axis() {
  return axis_attribute(Axis::all_static_axes());
}
DictionaryValue axis_or_none(const std::optional<int>& axis) {
  return axis ? DictionaryValue(int64_t{*axis}) : none_axis();
}

Dictionary pad_attributes(std::vector<int64_t> pattern, int64_t mode, double value) {
  return Dictionary(
      {{"pattern", int_list_attribute(pattern)}, {"mode", mode}, {"constant_value", value}});
}

// depth_to_space's and space_to_depth's block_size, which Python gives as a number: an integer
// of at least 1 (CNTK takes 2.0 as 2).
size_t block_size_of(const char* function, const Dictionary& a) {
  const double b = a.get<double>("block_size");
  LOOM_CHECK(b >= 1 && b == std::floor(b), ArgumentError, function,
             ": block_size must be an integer of at least 1, not ", b);
  return size_t(b);
}

}  // namespace

std::vector<OpSchema> shape_schemas() {
  const ConformanceInput x{NDShape{3, 4}}, x3{NDShape{2, 3, 4}};
  auto with_unit_axis = [](NDShape shape) { return ConformanceInput{std::move(shape)}; };
  ConformanceCase eye_batch{{ConformanceInput{NDShape{4}}}};
  eye_batch.sequences = false;  // a matrix has no sequence axis
  ConformanceCase eye_parameter{{ConformanceInput{NDShape{3, 4}, false}}};
  eye_parameter.sequences = false;
  return {
      {&kReshape,
       1,
       1,
       "reshape",
       "ops",
       {{"x"},
        {"shape", ParamType::Shape},
        {"begin_axis", ParamType::Axis, axis_or_none(ReshapeOptions{}.begin_axis)},
        {"end_axis", ParamType::Axis, axis_or_none(ReshapeOptions{}.end_axis)}},
       false,
       "the same elements in another shape; shape (one dimension may be -1, inferred) replaces "
       "the static axes [begin_axis, end_axis) (None: the first, the end)",
       {.op_type = "Reshape"},  // loom/deploy's own code exports and imports it
       {{{x}, Dictionary({{"shape", NDShape{4, 3}}})},
        {{x3}, Dictionary({{"shape", NDShape{6}}, {"begin_axis", 0}, {"end_axis", -1}})},
        {{x3}, Dictionary({{"shape", NDShape{2, NDShape::kInferred}}, {"begin_axis", 2}})}}},
      {.op = &kSlice,
       .min_inputs = 1,
       .max_inputs = 1,
       .python = "slice",
       .params = {{"x"},
                  {"axis", ParamType::Axis},
                  {"begin_index", ParamType::Int, {}, "begin"},
                  {"end_index", ParamType::Int, {}, "end"}},
       .doc = "the elements [begin_index, end_index) along static axis axis (negative: from the "
              "end; end_index 0: to the end)",
       .onnx = {.op_type = "Slice"},  // loom/deploy's own code exports and imports it
       .conformance =
           {{{x}, Dictionary({{"axis", int64_t{1}}, {"begin", int64_t{1}}, {"end", int64_t{3}}})},
            {{x3},
             Dictionary({{"axis", int64_t{-3}}, {"begin", int64_t{-1}}, {"end", int64_t{0}}})}},
       .build =
           [](std::vector<Variable> inputs, const Dictionary& a, const std::string& name) {
             return slice(inputs[0], attribute_axis(a.at("axis")), int(a.get<int64_t>("begin")),
                          int(a.get<int64_t>("end")), name);
           }},
      {.op = nullptr,
       .min_inputs = 2,
       .max_inputs = 2,
       .python = "times_transpose",
       .params = {{"left"}, {"right"}},
       .doc = "left times right transposed (right of rank 1 or 2)",
       .conformance = {{{{NDShape{3}}, {NDShape{2, 3}, false}}},
                       {{{NDShape{3}}, {NDShape{3}, false}}}},
       .build =
           [](std::vector<Variable> inputs, const Dictionary&, const std::string& name) {
             return times_transpose(inputs[0], inputs[1], name);
           }},
      {.op = nullptr,
       .min_inputs = 1,
       .max_inputs = 1,
       .python = "depth_to_space",
       .params = {{"operand"}, {"block_size", ParamType::Double}},
       .doc = "the channels of operand [C, H, W] moved into blocks of block_size x block_size "
              "pixels: [C / block_size^2, H * block_size, W * block_size]",
       .conformance = {{{{NDShape{8, 2, 3}}}, Dictionary({{"block_size", 2.0}})}},
       .build =
           [](std::vector<Variable> inputs, const Dictionary& a, const std::string& name) {
             return depth_to_space(inputs[0], block_size_of("depth_to_space", a), name);
           }},
      {.op = nullptr,
       .min_inputs = 1,
       .max_inputs = 1,
       .python = "space_to_depth",
       .params = {{"operand"}, {"block_size", ParamType::Double}},
       .doc = "blocks of block_size x block_size pixels of operand [C, H, W] moved into the "
              "channels: [C * block_size^2, H / block_size, W / block_size]",
       .conformance = {{{{NDShape{2, 4, 6}}}, Dictionary({{"block_size", 2.0}})}},
       .build =
           [](std::vector<Variable> inputs, const Dictionary& a, const std::string& name) {
             return space_to_depth(inputs[0], block_size_of("space_to_depth", a), name);
           }},
      {.op = &kSplice,
       .min_inputs = 1,
       .max_inputs = SIZE_MAX,
       .python = "splice",
       .params = {{"inputs", ParamType::Tensors},
                  {"axis", ParamType::Axis, axis_attribute(Axis(-1))}},
       .doc = "the inputs concatenated along axis (Axis.new_leading_axis(): stacked along a new "
              "first axis)",
       .onnx = {.op_type = "Concat"},
       .conformance = {{{x, {NDShape{3, 2}}}, Dictionary({{"axis", int64_t{-1}}})}},
       .build =
           [](std::vector<Variable> inputs, const Dictionary& a, const std::string& name) {
             return splice(inputs, attribute_axis(a.at("axis")), name);
           }},
      {&kTranspose,
       1,
       1,
       "transpose",
       "ops",
       {{"x"}, {"perm", ParamType::Ints}},
       false,
       "the axes permuted: output axis k is input axis perm[k] (as numpy.transpose)",
       {.op_type = "Transpose"},  // loom/deploy's own code exports and imports it
       {{{x}, Dictionary({{"perm", int_list_attribute({1, 0})}})},
        {{x3}, Dictionary({{"perm", int_list_attribute({2, 0, -2})}})}}},
      {&kSqueeze,
       1,
       1,
       "squeeze",
       "ops",
       {{"x"}, {"axes", ParamType::Axis, none_axis()}},
       false,
       "the static axes of extent 1 removed: axes (an axis or a list), or all of them (None)",
       {.op_type = "Reshape"},  // exported as a Reshape; ONNX's Squeeze imports as one
       {{{with_unit_axis({3, 1, 4, 1})}},
        {{with_unit_axis({3, 1, 4, 1})}, Dictionary({{"axes", DictionaryVector{1}}})},
        {{with_unit_axis({1, 3, 4})}, Dictionary({{"axes", -3}})}}},
      {&kExpandDims,
       1,
       1,
       "expand_dims",
       "ops",
       {{"x"}, {"axis", ParamType::Axis}},
       false,
       "a static axis of extent 1 added behind static axis axis, as CNTK places it ([2, 3] at 0 "
       "is [2, 1, 3]; at -(rank + 1) the new axis comes first)",
       {.op_type = "Reshape"},  // exported as a Reshape; ONNX's Unsqueeze imports as one
       {{{x}, Dictionary({{"axis", 0}})}, {{x}, Dictionary({{"axis", -3}})}}},
      {&kTransposeAxes,
       1,
       1,
       "swapaxes",
       "ops",
       {{"x"},
        {"axis1", ParamType::Axis, int64_t{SwapAxesOptions{}.axis1}},
        {"axis2", ParamType::Axis, int64_t{SwapAxesOptions{}.axis2}}},
       false,
       "static axes axis1 and axis2 exchanged",
       {.op_type = "Transpose"},  // the permutation that swaps the two axes
       {{{x3}}, {{x3}, Dictionary({{"axis1", 2}, {"axis2", -3}})}}},
      {&kFlatten,
       1,
       1,
       "flatten",
       "ops",
       {{"x"}, {"axis", ParamType::Axis, axis_or_none(FlattenOptions{}.axis)}},
       false,
       "the sample as a matrix [d_0 ... d_(axis-1), d_axis ... d_n] (None: axis 0)",
       {.op_type = "Reshape"},  // ONNX's Flatten would merge the batch axis in
       {{{x3}}, {{x3}, Dictionary({{"axis", 1}})}, {{x3}, Dictionary({{"axis", 3}})}}},
      {&kPad,
       1,
       1,
       "pad",
       "ops",
       {{"x"},
        {"pattern", ParamType::Ints},
        {"mode", ParamType::Int, int64_t{PadOptions{}.mode}},
        {"constant_value", ParamType::Double, PadOptions{}.constant_value}},
       false,
       "each static axis padded with pattern's (before, after) elements: constant_value "
       "(CONSTANT_PAD), the mirror image without the edge (REFLECT_PAD) or with it "
       "(SYMMETRIC_PAD)",
       {.op_type = "Pad"},
       {{{x}, pad_attributes({1, 2, 0, 1}, kConstantPad, 0.5)},
        {{x}, pad_attributes({2, 1, 1, 3}, kReflectPad, 0)},
        // ONNX's Pad has no symmetric mode: the export refuses it.
        {.inputs = {x},
         .attributes = pad_attributes({3, 0, 4, 2}, kSymmetricPad, 0),
         .onnx = false},
        {{x3}, pad_attributes({0, 0, 1, 1, 2, 0}, kConstantPad, 0)}}},
      {&kEyeLike,
       1,
       1,
       "eye_like",
       "ops",
       {{"x"}, {"sparse_output", ParamType::Bool, kEyeLikeSparseOutput}},
       false,
       "ones on the diagonal of the matrix x is (its batch axis counted), zeros elsewhere",
       {.none_because = "not written yet (ONNX's EyeLike has no batch axis to count)"},
       {eye_batch, eye_parameter}},
      {&kCast,
       1,
       1,
       "cast",
       "ops",
       {{"node_input"}, {"dtype", ParamType::DataType}},
       false,
       "the same values in another data type (np.float32, np.float64); the gradient is cast back",
       {.op_type = "Cast"},
       // To float64 (the float32 case's output is float64 too); to float32 (without finite
       // differences: a float32 output cannot resolve them).
       {{{x}, Dictionary({{"dtype", dtype_attribute(DataType::Float64)}})},
        {.inputs = {x},
         .attributes = Dictionary({{"dtype", dtype_attribute(DataType::Float32)}}),
         .finite_differences = false}}},
  };
}

Function reshape(const Variable& x, const NDShape& shape, const ReshapeOptions& options,
                 const std::string& name) {
  Dictionary a;
  a["shape"] = shape;
  a["begin_axis"] = axis_or_none(options.begin_axis);
  a["end_axis"] = axis_or_none(options.end_axis);
  return make_primitive(kReshape, {x}, std::move(a), name);
}

Function squeeze(const Variable& x, const std::optional<std::vector<int>>& axes,
                 const std::string& name) {
  Dictionary a;
  if (axes) {
    DictionaryVector list;
    for (int axis : *axes) list.emplace_back(int64_t{axis});
    a["axes"] = std::move(list);
  } else {
    a["axes"] = none_axis();
  }
  return make_primitive(kSqueeze, {x}, std::move(a), name);
}

Function expand_dims(const Variable& x, int axis, const std::string& name) {
  return make_primitive(kExpandDims, {x}, Dictionary({{"axis", int64_t{axis}}}), name);
}

Function swapaxes(const Variable& x, const SwapAxesOptions& options, const std::string& name) {
  return make_primitive(
      kTransposeAxes, {x},
      Dictionary({{"axis1", int64_t{options.axis1}}, {"axis2", int64_t{options.axis2}}}), name);
}

Function flatten(const Variable& x, const FlattenOptions& options, const std::string& name) {
  return make_primitive(kFlatten, {x}, Dictionary({{"axis", axis_or_none(options.axis)}}), name);
}

Function pad(const Variable& x, const std::vector<std::pair<size_t, size_t>>& pattern,
             const PadOptions& options, const std::string& name) {
  std::vector<int64_t> flat;
  for (const auto& [before, after] : pattern) {
    flat.push_back(int64_t(before));
    flat.push_back(int64_t(after));
  }
  return make_primitive(
      kPad, {x}, pad_attributes(std::move(flat), options.mode, options.constant_value), name);
}

Function depth_to_space(const Variable& x, size_t block_size, const std::string& name) {
  const NDShape& s = x.shape();
  LOOM_CHECK(s.rank() == 3, ArgumentError, "depth_to_space: input ", x.type_string(), " has rank ",
             s.rank(), "; it takes samples [C, H, W]");
  const size_t b = block_size;
  LOOM_CHECK(b >= 1, ArgumentError, "depth_to_space: block_size must be at least 1");
  LOOM_CHECK(s[0] % (b * b) == 0, ArgumentError, "depth_to_space: the ", s[0],
             " channels of input ", x.type_string(), " are not divisible by block_size * ",
             "block_size = ", b * b);
  const size_t c = s[0] / (b * b), h = s[1], w = s[2];
  // [b_i, b_j, c, h, w] -> [c, h, b_i, w, b_j] -> [c, h * b, w * b]
  const Function blocks = reshape(x, NDShape{b, b, c, h, w});
  const Function moved = transpose(Variable(blocks), {2, 3, 0, 4, 1});
  return reshape(Variable(moved), NDShape{c, h * b, w * b}, name);
}

Function space_to_depth(const Variable& x, size_t block_size, const std::string& name) {
  const NDShape& s = x.shape();
  LOOM_CHECK(s.rank() == 3, ArgumentError, "space_to_depth: input ", x.type_string(), " has rank ",
             s.rank(), "; it takes samples [C, H, W]");
  const size_t b = block_size;
  LOOM_CHECK(b >= 1, ArgumentError, "space_to_depth: block_size must be at least 1");
  LOOM_CHECK(s[1] % b == 0 && s[2] % b == 0, ArgumentError, "space_to_depth: the spatial ",
             "extents ", s[1], " x ", s[2], " of input ", x.type_string(),
             " are not divisible by block_size ", b);
  const size_t c = s[0], h = s[1] / b, w = s[2] / b;
  // [c, h, b_i, w, b_j] -> [b_i, b_j, c, h, w] -> [b * b * c, h, w]
  const Function blocks = reshape(x, NDShape{c, h, b, w, b});
  const Function moved = transpose(Variable(blocks), {2, 4, 0, 1, 3});
  return reshape(Variable(moved), NDShape{b * b * c, h, w}, name);
}

Function cast(const Variable& x, DataType dtype, const std::string& name) {
  return make_primitive(kCast, {x}, Dictionary({{"dtype", dtype_attribute(dtype)}}), name);
}

Function eye_like(const Variable& x, bool sparse_output, const std::string& name) {
  return make_primitive(kEyeLike, {x}, Dictionary({{"sparse_output", sparse_output}}), name);
}

Function times_transpose(const Variable& left, const Variable& right, const std::string& name) {
  const NDShape& r = right.shape();
  LOOM_CHECK(r.rank() == 1 || r.rank() == 2, ArgumentError, "times_transpose: right ",
             right.type_string(), " has rank ", r.rank(), "; it takes rank 1 or 2");
  const Function transposed =
      r.rank() == 1 ? reshape(right, NDShape{r[0], 1}) : transpose(right, {1, 0});
  return times(left, Variable(transposed), 1, -1, name);
}

Function reshape(const Variable& x, const NDShape& shape, const std::string& name) {
  Dictionary a;
  a["shape"] = shape;
  return make_primitive(kReshape, {x}, std::move(a), name);
}

Function slice(const Variable& x, const Axis& axis, int begin, int end, const std::string& name) {
  LOOM_CHECK(axis.is_static(), ShapeError, "Slice: axis ", axis.to_string(),
             " is not a static axis (slicing dynamic axes is not supported)");
  Dictionary a;
  a["axis"] = int64_t{axis.static_index()};
  a["begin"] = int64_t{begin};
  a["end"] = int64_t{end};
  return make_primitive(kSlice, {x}, std::move(a), name);
}

Function splice(const std::vector<Variable>& inputs, const Axis& axis, const std::string& name) {
  LOOM_CHECK(!inputs.empty(), ArgumentError, "Splice: no inputs");
  LOOM_CHECK(axis.is_static(), ShapeError, "Splice: axis ", axis.to_string(),
             " is not a static axis (splicing along dynamic axes is not supported)");
  if (axis.is_new_leading()) {  // stacked: each input gets a first axis of 1
    std::vector<Variable> stacked;
    for (const Variable& x : inputs)
      stacked.push_back(expand_dims(x, -int(x.shape().rank()) - 1));  // a new first axis
    return splice(stacked, Axis(0), name);
  }
  Dictionary a;
  a["axis"] = int64_t{axis.static_index()};
  return make_primitive(kSplice, inputs, std::move(a), name);
}

Function transpose(const Variable& x, const std::vector<int>& perm, const std::string& name) {
  DictionaryVector p;
  for (int k : perm) p.emplace_back(int64_t{k});
  Dictionary a;
  a["perm"] = std::move(p);
  return make_primitive(kTranspose, {x}, std::move(a), name);
}

}  // namespace loom
