#include "loom/ops/linear.h"

#include <type_traits>

#include "loom/core/precision.h"
#include "loom/graph/op.h"
#include "loom/kernels/gemm.h"
#include "loom/kernels/sparse.h"
#include "loom/ops/op_schema.h"

namespace loom {

namespace {

// x viewed as a matrix [M, K] (rows times leading axes A, then the contracted axes) and W as
// [K, N].
struct Dims {
  size_t M, K, N;
};

Dims matrix_dims(const OpCall& call) {
  const Tensor& x = *call.inputs[0];
  const Tensor& W = *call.inputs[1];
  size_t output_rank = size_t(call.attributes.get<int64_t>("output_rank"));
  size_t N = 1;
  for (size_t i = W.shape.rank() - output_rank; i < W.shape.rank(); ++i) N *= W.shape[i];
  size_t K = W.size() / (N ? N : 1);
  size_t M = K ? x.size() / K : 0;
  return {M, K, N};
}

// C = op(A) op(B) + beta C, dense, in the calling thread's compute precision for float
// (ComputePrecision: bf16 products where set and supported, and large enough to pay).
template <typename T>
void product(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, const T* A, size_t lda,
             const T* B, size_t ldb, T beta, T* C, size_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (compute_in_bf16() && M * N * K >= kernels::kMinBf16Product)
      return kernels::gemm_bf16(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  }
  kernels::gemm<T>(trans_a, trans_b, M, N, K, T(1), A, lda, B, ldb, beta, C, ldc);
}

class TimesOp : public OpDef {
 public:
  const char* name() const override { return "Times"; }
  OpTraits traits(const Dictionary&) const override {
    return {.accepts_sparse = InputSet::only(0), .backward_reads_output = false};
  }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable &x = in[0], &W = in[1];
    LOOM_CHECK(a.get<int64_t>("output_rank") >= 0, ArgumentError,
               "times: output_rank must be at least 0, not ", a.get<int64_t>("output_rank"));
    size_t output_rank = size_t(a.get<int64_t>("output_rank"));
    int map = int(a.get<int64_t>("infer_input_rank_to_map"));
    const NDShape& ws = W.shape();
    LOOM_CHECK(!W.has_batch_axis(), ShapeError, "Times: the right operand '", W.name(),
               "' must not have dynamic axes (its shape is ", ws.to_string(), ")");
    LOOM_CHECK(ws.rank() > output_rank, ShapeError, "Times: right operand of shape ",
               ws.to_string(), " has no input axes besides its ", output_rank, " output axes");
    NDShape out_axes = ws.sub_shape(ws.rank() - output_rank);
    NDShape w_in = ws.sub_shape(0, ws.rank() - output_rank);
    // Checked before inference, which would otherwise fix W's shape for a failed call.
    LOOM_CHECK(x.dtype() == W.dtype(), ShapeError, "Times: operands have types ",
               to_string(x.dtype()), " and ", to_string(W.dtype()));
    const NDShape& xs = x.shape();
    if (w_in.has_inferred()) {
      size_t k_rank = map == 0 ? xs.rank() : map > 0 ? xs.rank() - size_t(map) : w_in.rank();
      LOOM_CHECK(k_rank <= xs.rank() && k_rank > 0, ShapeError,
                 "Times: cannot infer the input axes of ", ws.to_string(),
                 " from an operand of shape ", xs.to_string());
      NDShape k = xs.sub_shape(xs.rank() - k_rank);
      LOOM_CHECK(w_in.rank() == k_rank || (w_in.rank() == 1 && map >= 0), ShapeError,
                 "Times: right operand of shape ", ws.to_string(), " cannot take input axes ",
                 k.to_string());
      LOOM_CHECK(W.is_parameter(), ShapeError, "Times: only a parameter can have inferred axes");
      resolve_parameter_shape(W, k.append(out_axes));
      w_in = k;
    }
    LOOM_CHECK(w_in.rank() <= xs.rank() && xs.sub_shape(xs.rank() - w_in.rank()) == w_in,
               ShapeError, "Times: operand shapes ", xs.to_string(), " and ", W.shape().to_string(),
               " do not match: the trailing axes of the left must equal the leading ", w_in.rank(),
               " axes of the right");
    NDShape out = xs.sub_shape(0, xs.rank() - w_in.rank()).append(out_axes);
    return {{out, x.dtype(), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    const Tensor &x = *call.inputs[0], &W = *call.inputs[1];
    Dims d = matrix_dims(call);
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* y = call.output->ptr<T>();
      if (x.is_sparse()) {
        const NDArrayView& s = *x.sparse;
        kernels::csr_gemm<T>(d.M, d.N, s.csr_row_offsets().data(), s.csr_col_indices().data(),
                             s.csr_values<T>(), W.ptr<T>(), d.N, T(1), T(0), y, d.N);
      } else {
        product<T>(false, false, d.M, d.N, d.K, x.ptr<T>(), d.K, W.ptr<T>(), d.N, T(0), y, d.N);
      }
    });
  }

  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    const Tensor &x = *call.inputs[0], &W = *call.inputs[1];
    Dims d = matrix_dims(call);
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>();
      T beta = accumulate ? T(1) : T(0);
      if (index == 0) {  // dX = dY · Wᵀ
        product<T>(false, true, d.M, d.K, d.N, dy, d.N, W.ptr<T>(), d.N, beta, g.ptr<T>(), d.K);
      } else if (x.is_sparse()) {  // dW = Xᵀ · dY
        const NDArrayView& s = *x.sparse;
        kernels::csr_transpose_gemm<T>(d.M, d.K, d.N, s.csr_row_offsets().data(),
                                       s.csr_col_indices().data(), s.csr_values<T>(), dy, d.N, T(1),
                                       beta, g.ptr<T>(), d.N);
      } else {
        product<T>(true, false, d.K, d.N, d.M, x.ptr<T>(), d.K, dy, d.N, beta, g.ptr<T>(), d.N);
      }
    });
  }
};

const TimesOp kTimes;

}  // namespace

std::vector<OpSchema> linear_schemas() {
  const Dictionary a({{"output_rank", int64_t{1}}, {"infer_input_rank_to_map", int64_t{-1}}});
  OpSchema schema{&kTimes,
                  2,
                  2,
                  "times",
                  "ops",
                  {{"left"},
                   {"right"},
                   {"output_rank", ParamType::Int, int64_t{kTimesOutputRank}},
                   {"infer_input_rank_to_map", ParamType::Int, int64_t{kTimesInferInputRankToMap}}},
                  false,
                  "the matrix product of left's trailing axes with right's leading axes; right's "
                  "last output_rank axes are the output's"};
  schema.onnx.op_type = "MatMul";  // loom/deploy's own code exports and imports it
  // Dense, and one-hot rows as sparse data (an embedding lookup, CNTK's sparse times).
  schema.conformance = {{{{NDShape{3}}, {NDShape{3, 2}, false}}, a},
                        {{{.shape = NDShape{3}, .sparse = true}, {NDShape{3, 2}, false}}, a}};
  return {schema};
}

Function times(const Variable& x, const Variable& W, size_t output_rank,
               int infer_input_rank_to_map, const std::string& name) {
  Dictionary a;
  a["output_rank"] = int64_t(output_rank);
  a["infer_input_rank_to_map"] = int64_t(infer_input_rank_to_map);
  return make_primitive(kTimes, {x, W}, std::move(a), name);
}

}  // namespace loom
