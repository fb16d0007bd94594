#include "loom/ops/shape_ops.h"

#include <algorithm>

#include "loom/graph/op.h"
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

// ---- reshape ---------------------------------------------------------------------------------

// Attributes: "shape" (the target, possibly with one kInferred dimension).
class ReshapeOp : public OpDef {
 public:
  const char* name() const override { return "Reshape"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    NDShape shape = a.get<NDShape>("shape");
    const size_t total = x.shape().total_size();
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
               " elements per sample, which do not fit the target shape ",
               a.get<NDShape>("shape").to_string());
    return {{shape, x.dtype(), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    Tensor& y = *call.output;
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      op_util::copy_or_add(y.size(), call.inputs[0]->ptr<T>(), y.ptr<T>(), false);
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      op_util::copy_or_add(dx.size(), call.output_gradient->ptr<T>(), dx.ptr<T>(), accumulate);
    });
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
      op_util::copy_blocks(v.outer, len, x.ptr<T>() + begin * v.inner, v.dim * v.inner, y.ptr<T>(),
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
      op_util::copy_blocks(v.outer, len, call.output_gradient->ptr<T>(), len,
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
        op_util::copy_blocks(out.outer, len, x->ptr<T>(), len, y.ptr<T>() + offset,
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
      op_util::copy_blocks(out.outer, len, call.output_gradient->ptr<T>() + offset * out.inner,
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

constexpr size_t kMaxTransposeRank = 16;

// Calls f(o, i) for each element of the transposed output y, in row-major order: o is its
// offset in y, i the offset of the same element in x. (A transpose kernel belongs in
// loom/kernels; until there is one this walk lives here.)
template <class F>
void for_each_transposed(const Tensor& x, const Tensor& y, const Dictionary& a, F&& f) {
  const size_t rank = x.shape.rank(), first = x.dynamic() ? 1 : 0;
  LOOM_CHECK(rank <= kMaxTransposeRank, ShapeError, "Transpose: rank ", rank, " exceeds ",
             kMaxTransposeRank);
  size_t x_stride[kMaxTransposeRank], stride[kMaxTransposeRank], dim[kMaxTransposeRank];
  size_t idx[kMaxTransposeRank] = {};
  for (size_t k = rank, s = 1; k-- > 0; s *= x.shape[k]) x_stride[k] = s;
  for (size_t k = 0; k < rank; ++k) {
    stride[k] = x_stride[k < first ? k : first + source_axis(a, k - first, rank - first)];
    dim[k] = y.shape[k];
  }
  size_t i = 0;
  for (size_t o = 0, n = y.size(); o < n; ++o) {
    f(o, i);
    for (size_t k = rank; k-- > 0;) {
      i += stride[k];
      if (++idx[k] < dim[k]) break;
      i -= stride[k] * dim[k];
      idx[k] = 0;
    }
  }
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
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* src = x.ptr<T>();
      T* dst = y.ptr<T>();
      for_each_transposed(x, y, call.attributes, [&](size_t o, size_t i) { dst[o] = src[i]; });
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>();
      T* g = dx.ptr<T>();
      for_each_transposed(*call.inputs[0], *call.output, call.attributes,
                          [&](size_t o, size_t i) { g[i] = accumulate ? g[i] + dy[o] : dy[o]; });
    });
  }
};

const ReshapeOp kReshape;
const SliceOp kSlice;
const SpliceOp kSplice;
const TransposeOp kTranspose;

}  // namespace

std::vector<OpSchema> shape_schemas() {
  const ConformanceInput x{NDShape{3, 4}};
  return {
      hand_bound(kReshape, 1, 1, {{{x}, Dictionary({{"shape", NDShape{4, 3}}})}}),
      hand_bound(
          kSlice, 1, 1,
          {{{x}, Dictionary({{"axis", int64_t{1}}, {"begin", int64_t{1}}, {"end", int64_t{3}}})}}),
      hand_bound(kSplice, 1, SIZE_MAX,
                 {{{x, {NDShape{3, 2}}}, Dictionary({{"axis", int64_t{-1}}})}}),
      hand_bound(kTranspose, 1, 1,
                 {{{x}, Dictionary({{"perm", DictionaryVector{int64_t{1}, int64_t{0}}}})}}),
  };
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
