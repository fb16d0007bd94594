#include "loom/ops/fused_rnn.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "loom/graph/graph_impl.h"
#include "loom/graph/op.h"
#include "loom/kernels/rnn.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"

namespace loom {

namespace {

constexpr size_t kAbsent = size_t(-1);
constexpr const char* kName = "FusedRecurrence";

// Which input holds what (kAbsent where the attributes leave it out), and how many there are.
struct Roles {
  kernels::RnnCell cell = kernels::RnnCell::LSTM;
  size_t b = 1, W = 2, H = 3, H1 = kAbsent, Ci = kAbsent, Cf = kAbsent, Co = kAbsent, P = kAbsent;
  size_t a_dh = kAbsent, a_dc = kAbsent, a_c = kAbsent, a_h = kAbsent, h0 = kAbsent, c0 = kAbsent;
  size_t count = 4;
};

kernels::RnnCell cell_of(const Dictionary& a) {
  const std::string& cell = a.get<std::string>("cell");
  if (cell == "LSTM") return kernels::RnnCell::LSTM;
  if (cell == "GRU") return kernels::RnnCell::GRU;
  LOOM_CHECK(cell == "RNNStep", ArgumentError, kName, ": unknown cell '", cell,
             "' (LSTM, GRU or RNNStep)");
  return kernels::RnnCell::RNNStep;
}

kernels::RnnActivation activation_of(const Dictionary& a) {
  const std::string& act = a.get<std::string>("activation");
  if (act == "Tanh") return kernels::RnnActivation::Tanh;
  if (act == "Sigmoid") return kernels::RnnActivation::Sigmoid;
  if (act == "ReLU") return kernels::RnnActivation::Relu;
  LOOM_CHECK(act.empty(), ArgumentError, kName, ": unknown activation '", act,
             "' (Tanh, Sigmoid, ReLU or none)");
  return kernels::RnnActivation::Identity;
}

Roles roles(const Dictionary& a) {
  Roles r;
  r.cell = cell_of(a);
  const bool lstm = r.cell == kernels::RnnCell::LSTM;
  const bool peepholes = a.get<bool>("use_peepholes"), projection = a.get<bool>("projection");
  LOOM_CHECK(!peepholes || lstm, ArgumentError, kName, ": peepholes exist for LSTM only");
  auto next = [&](bool present) { return present ? r.count++ : kAbsent; };
  r.H1 = next(r.cell == kernels::RnnCell::GRU);
  r.Ci = next(peepholes);
  r.Cf = next(peepholes);
  r.Co = next(peepholes);
  r.P = next(projection);
  const bool stabilized = a.get<bool>("self_stabilization");
  r.a_dh = next(stabilized);
  r.a_dc = next(stabilized && peepholes);
  r.a_c = next(stabilized && peepholes);
  r.a_h = next(stabilized && projection);
  r.h0 = next(true);
  r.c0 = next(lstm);
  return r;
}

// A stabilizer's derivative sigmoid(k·alpha).
double stabilizer_slope(double alpha, double k) {
  return 1 / (1 + std::exp(-k * alpha));
}

// An initial state broadcasts to the state's shape [size]: shape [], [1] or [size], no dynamic
// axes.
void check_initial_state(const Variable& s, size_t size, const char* state) {
  LOOM_CHECK(!s.has_batch_axis() && s.shape().rank() <= 1 &&
                 (s.shape().total_size() == 1 || s.shape().total_size() == size),
             ShapeError, kName, ": initial state ", s.describe(), " of shape ",
             s.shape().to_string(), " does not broadcast to the ", state, " state's shape ",
             NDShape{size}.to_string(), " (give a constant or parameter of shape [], [1] or ",
             NDShape{size}.to_string(), ")");
}

void check_shape(const Variable& v, const NDShape& expected, const char* role) {
  LOOM_CHECK(v.shape() == expected, ShapeError, kName, ": ", role, " ", v.describe(), " has shape ",
             v.shape().to_string(), " where ", expected.to_string(), " is expected");
}

// Sizes from the parameters: c from b [G·c], n from H [n, G'·c].
struct Sizes {
  size_t n, c;
};

Sizes sizes(const std::vector<Variable>& in, const Roles& r) {
  const NDShape &b = in[r.b].shape(), &H = in[r.H].shape();
  const size_t G = r.cell == kernels::RnnCell::LSTM ? 4 : r.cell == kernels::RnnCell::GRU ? 3 : 1;
  const size_t Gh = r.cell == kernels::RnnCell::GRU ? 2 : G;
  LOOM_CHECK(b.rank() == 1 && b[0] % G == 0 && b[0] > 0, ShapeError, kName, ": bias ",
             in[r.b].describe(), " of shape ", b.to_string(), " is not ", G, " gate blocks [G·c]");
  const size_t c = b[0] / G;
  LOOM_CHECK(H.rank() == 2 && !H.has_inferred() && H[1] == Gh * c, ShapeError, kName,
             ": recurrent weights ", in[r.H].describe(), " of shape ", H.to_string(),
             " are not [n, ", Gh * c, "]");
  return {H[0], c};
}

class FusedRecurrenceOp : public OpDef {
 public:
  const char* name() const override { return kName; }
  OpTraits traits(const Dictionary&) const override { return {.runs_step_by_step = false}; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Roles r = roles(a);
    activation_of(a);
    LOOM_CHECK(in.size() == r.count, ArgumentError, kName, " with these attributes takes ", r.count,
               " inputs, not ", in.size());
    const Variable& x = in[0];
    LOOM_CHECK(x.dynamic_axes().size() == 2, ShapeError, kName, ": input ", x.describe(),
               " must be a sequence");
    const DataType dtype = common_dtype(kName, in);
    const auto [n, c] = sizes(in, r);
    const size_t gc = in[r.b].shape()[0];
    for (size_t i = 1; i < in.size(); ++i)
      LOOM_CHECK(!in[i].has_batch_axis(), ShapeError, kName, ": ", in[i].describe(),
                 " must not have dynamic axes");
    resolve_parameter_shape(in[r.W], x.shape().append(NDShape{gc}));
    if (r.H1 != kAbsent) {
      LOOM_CHECK(n == c, ShapeError, kName, ": a GRU's output size ", n,
                 " must equal its cell size ", c);
      check_shape(in[r.H1], NDShape{n, c}, "H1");
    }
    for (size_t i : {r.Ci, r.Cf, r.Co})
      if (i != kAbsent) check_shape(in[i], NDShape{c}, "peephole");
    if (r.P != kAbsent) check_shape(in[r.P], NDShape{c, n}, "projection");
    for (size_t i : {r.a_dh, r.a_dc, r.a_c, r.a_h})
      if (i != kAbsent) check_shape(in[i], NDShape{}, "stabilizer");
    check_initial_state(in[r.h0], n, "output");
    if (r.c0 != kAbsent) check_initial_state(in[r.c0], c, "cell");
    return {{NDShape{n}, dtype, x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    dispatch(call.output->dtype, [&](auto zero) { run_forward<decltype(zero)>(call); });
  }

  // The first wanted input's call computes every wanted gradient, into scratch; each call then
  // hands out its own.
  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    dispatch(g.dtype, [&](auto zero) { run_backward<decltype(zero)>(call, index, g, accumulate); });
  }

 private:
  kernels::RnnShape shape_of(const OpCall& call, const Roles& r) const {
    const Tensor& x = *call.inputs[0];
    const SequenceLayout& l = *x.layout;
    kernels::RnnShape s;
    s.cell = r.cell;
    s.activation = activation_of(call.attributes);
    s.input = op_util::sample_size(x);
    s.output = call.inputs[r.H]->shape[0];
    s.cell_size = call.inputs[r.b]->shape[0] / s.gates();
    s.peepholes = r.Ci != kAbsent;
    s.projection = r.P != kAbsent;
    s.backwards = call.attributes.get<bool>("go_backwards");
    s.step_offsets = l.step_offsets.data();
    s.steps = l.max_length();
    return s;
  }

  template <typename T>
  kernels::RnnWeights<T> weights(const OpCall& call, const Roles& r) const {
    auto p = [&](size_t i) -> const T* {
      return i == kAbsent ? nullptr : call.inputs[i]->ptr<T>();
    };
    const double k = call.attributes.get<double>("steepness");
    auto factor = [&](size_t i) {
      return i == kAbsent ? T(1) : T(stabilizer_factor(double(*p(i)), k));
    };
    return {p(r.b),  p(r.W), p(r.H),         p(r.H1),        p(r.Ci),       p(r.Cf),
            p(r.Co), p(r.P), factor(r.a_dh), factor(r.a_dc), factor(r.a_c), factor(r.a_h)};
  }

  // The scratch: the kernel's workspace, the initial states by rank and whether each rank
  // started from the initial state (1) or from the previous minibatch (0), then the gradients.
  struct Scratch {
    size_t h0, c0, fresh, grads, stabilizers, total;  // offsets in elements
  };
  static Scratch scratch_layout(const kernels::RnnShape& s) {
    const size_t N = s.sequences(), n = s.output, c = s.cell_size, I = s.input;
    const size_t gc = s.gates() * c, hc = s.recurrent_gates() * c;
    Scratch k;
    k.h0 = kernels::rnn_workspace_size(s);
    k.c0 = k.h0 + N * n;
    k.fresh = k.c0 + N * c;
    k.grads = k.fresh + N;
    // x, b, W, H, H1, Ci, Cf, Co, P, h0 by rank, c0 by rank (see gradients()).
    k.stabilizers =
        k.grads + s.rows() * I + gc + I * gc + n * hc + n * c + 3 * c + c * n + N * n + N * c;
    k.total = k.stabilizers + 4;  // the gradients of s_dh, s_dc, s_c, s_h
    return k;
  }

  template <typename T>
  static T* scratch(OpCall& call, const kernels::RnnShape& s) {
    return static_cast<T*>(call.scratch->ensure(scratch_layout(s).total * sizeof(T)));
  }

  template <typename T>
  void run_forward(OpCall& call) const {
    const Roles r = roles(call.attributes);
    const kernels::RnnShape s = shape_of(call, r);
    const SequenceLayout& l = *call.inputs[0]->layout;
    const Scratch k = scratch_layout(s);
    T* ws = scratch<T>(call, s);
    T *h0 = ws + k.h0, *c0 = ws + k.c0, *fresh = ws + k.fresh;
    const size_t N = s.sequences(), n = s.output, c = s.cell_size;
    const bool lstm = r.c0 != kAbsent;
    const T* carried = carried_states<T>(call);
    const size_t kept = 1 + n + (lstm ? c : 0);  // per sequence in call.state
    for (size_t rank = 0; rank < N; ++rank) {
      const size_t seq = l.order[rank];
      fresh[rank] = T(1);
      if (!s.backwards && !l.begins[seq]) {
        LOOM_CHECK(seq < carried_count(call), StateError, kName, ": sequence ", seq,
                   " continues one of the previous minibatch, which had no sequence ", seq,
                   " (a continued sequence keeps its place in the minibatch)");
        const T* from = carried + seq * kept;
        if (from[0] != T(0)) {  // else it had no steps there: the initial state, as past_value
          std::copy_n(from + 1, n, h0 + rank * n);
          if (lstm) std::copy_n(from + 1 + n, c, c0 + rank * c);
          fresh[rank] = T(0);
          continue;
        }
      }
      broadcast(*call.inputs[r.h0], n, h0 + rank * n);
      if (lstm) broadcast(*call.inputs[r.c0], c, c0 + rank * c);
    }
    const kernels::RnnWeights<T> w = weights<T>(call, r);
    T* y = call.output->ptr<T>();
    kernels::rnn_forward(s, w, call.inputs[0]->ptr<T>(), h0, c0, y, ws);
    if (!s.backwards)
      keep_final_states(call, s, y, lstm ? kernels::rnn_cell_states(s, ws) : nullptr);
  }

  template <typename T>
  static void broadcast(const Tensor& state, size_t size, T* dst) {
    if (state.size() == 1) {
      std::fill_n(dst, size, state.ptr<T>()[0]);
    } else {
      std::copy_n(state.ptr<T>(), size, dst);
    }
  }

  // call.state: the number of sequences, then per sequence (in the minibatch's order) a flag
  // (1: it had steps) and its final h and c, for the sequences of the next minibatch that
  // continue them.
  static constexpr size_t kHeader = 64;  // bytes before the states
  static size_t carried_count(const OpCall& call) {
    uint64_t count = 0;
    std::memcpy(&count, call.state->ensure(kHeader), sizeof count);
    return size_t(count);
  }
  template <typename T>
  static const T* carried_states(const OpCall& call) {
    return reinterpret_cast<const T*>(static_cast<const char*>(call.state->ensure(kHeader)) +
                                      kHeader);
  }

  template <typename T>
  static void keep_final_states(OpCall& call, const kernels::RnnShape& s, const T* y,
                                const T* cells) {
    const SequenceLayout& l = *call.inputs[0]->layout;
    const size_t N = l.num_sequences(), n = s.output, c = cells ? s.cell_size : 0;
    char* base = static_cast<char*>(call.state->ensure(kHeader + N * (1 + n + c) * sizeof(T)));
    const uint64_t count = N;
    std::memcpy(base, &count, sizeof count);
    T* out = reinterpret_cast<T*>(base + kHeader);
    for (size_t seq = 0; seq < N; ++seq, out += 1 + n + c) {
      out[0] = T(l.lengths[seq] > 0);
      if (!l.lengths[seq]) continue;
      const size_t row = l.row(seq, l.lengths[seq] - 1);
      std::copy_n(y + row * n, n, out + 1);
      if (cells) std::copy_n(cells + row * c, c, out + 1 + n);
    }
  }

  template <typename T>
  void run_backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const {
    const Roles r = roles(call.attributes);
    const kernels::RnnShape s = shape_of(call, r);
    const Scratch k = scratch_layout(s);
    T* ws = scratch<T>(call, s);
    const std::vector<bool>& wanted = *call.gradient_wanted;
    const size_t first = size_t(std::find(wanted.begin(), wanted.end(), true) - wanted.begin());
    kernels::RnnGradients<T> grads = gradients(s, r, ws + k.grads, wanted);
    T* ds = ws + k.stabilizers;
    if (index == first) {
      kernels::rnn_backward(s, weights<T>(call, r), call.inputs[0]->ptr<T>(),
                            call.output_gradient->ptr<T>(), ws, grads);
      ds[0] = grads.s_dh;
      ds[1] = grads.s_dc;
      ds[2] = grads.s_c;
      ds[3] = grads.s_h;
    }
    const double steep = call.attributes.get<double>("steepness");
    T* dst = g.ptr<T>();
    auto give = [&](const T* src, size_t size) {
      op_util::copy_or_add(size, src, dst, accumulate);
    };
    auto give_stabilizer = [&](T d) {
      const T v = T(double(d) * stabilizer_slope(double(call.inputs[index]->ptr<T>()[0]), steep));
      dst[0] = accumulate ? dst[0] + v : v;
    };
    const size_t n = s.output, c = s.cell_size;
    if (index == 0) return give(grads.x, s.rows() * s.input);
    if (index == r.b) return give(grads.b, g.size());
    if (index == r.W) return give(grads.W, g.size());
    if (index == r.H) return give(grads.H, g.size());
    if (index == r.H1) return give(grads.H1, g.size());
    if (index == r.Ci) return give(grads.Ci, c);
    if (index == r.Cf) return give(grads.Cf, c);
    if (index == r.Co) return give(grads.Co, c);
    if (index == r.P) return give(grads.P, g.size());
    if (index == r.a_dh) return give_stabilizer(ds[0]);
    if (index == r.a_dc) return give_stabilizer(ds[1]);
    if (index == r.a_c) return give_stabilizer(ds[2]);
    if (index == r.a_h) return give_stabilizer(ds[3]);
    const bool h = index == r.h0;
    initial_state_gradient(s, ws + k.fresh, h ? grads.h0 : grads.c0, h ? n : c, g, accumulate);
  }

  // Where each wanted gradient goes in the scratch (null where not wanted).
  template <typename T>
  static kernels::RnnGradients<T> gradients(const kernels::RnnShape& s, const Roles& r, T* at,
                                            const std::vector<bool>& wanted) {
    const size_t N = s.sequences(), n = s.output, c = s.cell_size, I = s.input;
    const size_t gc = s.gates() * c, hc = s.recurrent_gates() * c;
    auto take = [&](size_t index, size_t size) {
      T* p = index != kAbsent && wanted[index] ? at : nullptr;
      at += size;
      return p;
    };
    kernels::RnnGradients<T> g;
    g.x = take(0, s.rows() * I);
    g.b = take(r.b, gc);
    g.W = take(r.W, I * gc);
    g.H = take(r.H, n * hc);
    g.H1 = take(r.H1, n * c);
    g.Ci = take(r.Ci, c);
    g.Cf = take(r.Cf, c);
    g.Co = take(r.Co, c);
    g.P = take(r.P, c * n);
    g.h0 = take(r.h0, N * n);
    g.c0 = take(r.c0, N * c);
    g.want_s_dh = r.a_dh != kAbsent && wanted[r.a_dh];
    return g;
  }

  // The initial state's gradient: the sum over the ranks that started from it (not those
  // continuing the previous minibatch) of what their first step sent back, summed to the
  // state's shape.
  template <typename T>
  static void initial_state_gradient(const kernels::RnnShape& s, const T* fresh, const T* by_rank,
                                     size_t size, Tensor& g, bool accumulate) {
    T* dst = g.ptr<T>();
    if (!accumulate) std::fill_n(dst, g.size(), T(0));
    for (size_t rank = 0; rank < s.sequences(); ++rank) {
      if (fresh[rank] == T(0)) continue;
      const T* row = by_rank + rank * size;
      if (g.size() == 1) {
        for (size_t j = 0; j < size; ++j) dst[0] += row[j];
      } else {
        for (size_t j = 0; j < size; ++j) dst[j] += row[j];
      }
    }
  }
};

const FusedRecurrenceOp kFusedRecurrence;

}  // namespace

std::vector<OpSchema> fused_rnn_schemas() {
  // Steps of 3 values into states of 2: an LSTM; one running backwards with peepholes,
  // self-stabilizers and a projection of its cell of 3; a GRU; an RNNStep with ReLU.
  auto attributes = [](const char* cell, const char* activation, bool backwards, bool extras) {
    return Dictionary({{"cell", std::string(cell)},
                       {"activation", std::string(activation)},
                       {"go_backwards", backwards},
                       {"use_peepholes", extras},
                       {"projection", extras},
                       {"self_stabilization", extras},
                       {"steepness", 4.0}});
  };
  auto shared = [](std::initializer_list<NDShape> shapes) {
    std::vector<ConformanceInput> in{{NDShape{3}}};
    for (const NDShape& s : shapes) in.push_back({s, false, -0.5, 0.5});
    return in;
  };
  std::vector<ConformanceCase> cases{
      {shared({{8}, {3, 8}, {2, 8}, {2}, {2}}), attributes("LSTM", "Tanh", false, false)},
      // b, W, H (of the projection's 2), Ci, Cf, Co, P (3 -> 2), the stabilizers of the
      // previous output and cell, the peephole's cell and the projection, h0, c0 (the cell's 3).
      {shared({{12}, {3, 12}, {2, 12}, {3}, {3}, {3}, {3, 2}, {}, {}, {}, {}, {2}, {3}}),
       attributes("LSTM", "Tanh", true, true)},
      {shared({{6}, {3, 6}, {2, 4}, {2, 2}, {2}}), attributes("GRU", "Tanh", false, false)},
      {shared({{2}, {3, 2}, {2, 2}, {2}}), attributes("RNNStep", "ReLU", false, false)}};
  for (ConformanceCase& c : cases) c.batch = false;                 // x is a sequence
  return {internal_op(kFusedRecurrence, 5, 15, std::move(cases))};  // x, b, W, H, then as asked
}

Function fused_recurrence(const Variable& x, const FusedRecurrenceInputs& f,
                          const std::string& name) {
  Dictionary a;
  a["cell"] = f.cell;
  a["activation"] = f.activation;
  a["go_backwards"] = f.go_backwards;
  a["use_peepholes"] = f.Ci.valid();
  a["projection"] = f.P.valid();
  a["self_stabilization"] = f.alpha_dh.valid();
  a["steepness"] = f.steepness;
  std::vector<Variable> in{x, f.b, f.W, f.H};
  for (const Variable& v :
       {f.H1, f.Ci, f.Cf, f.Co, f.P, f.alpha_dh, f.alpha_dc, f.alpha_c, f.alpha_h, f.h0, f.c0})
    if (v.valid()) in.push_back(v);
  const Roles r = roles(a);
  LOOM_CHECK(in.size() == r.count, ArgumentError, kName, ": the ", f.cell,
             " cell's inputs do not match its options (", in.size(), " given, ", r.count,
             " expected)");
  // The initial states are known now, also before x is: check them at once.
  const Sizes z = sizes(in, r);
  check_initial_state(in[r.h0], z.n, "output");
  if (r.c0 != kAbsent) check_initial_state(in[r.c0], z.c, "cell");
  return make_primitive(kFusedRecurrence, std::move(in), std::move(a), name);
}

double stabilizer_factor(double alpha, double k) {
  const double v = k * alpha;
  return (v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v))) / k;
}

bool is_fused_recurrence(const FunctionImpl& f) {
  return f.op == &kFusedRecurrence;
}

FusedRecurrenceInputs fused_recurrence_inputs(const std::vector<Variable>& in,
                                              const Dictionary& a) {
  const Roles r = roles(a);
  LOOM_CHECK(in.size() == r.count, ArgumentError, kName, " with these attributes takes ", r.count,
             " inputs, not ", in.size());
  auto at = [&](size_t i) { return i == kAbsent ? Variable() : in[i]; };
  return {.cell = a.get<std::string>("cell"),
          .activation = a.get<std::string>("activation"),
          .go_backwards = a.get<bool>("go_backwards"),
          .b = in[r.b],
          .W = in[r.W],
          .H = in[r.H],
          .H1 = at(r.H1),
          .Ci = at(r.Ci),
          .Cf = at(r.Cf),
          .Co = at(r.Co),
          .P = at(r.P),
          .alpha_dh = at(r.a_dh),
          .alpha_dc = at(r.a_dc),
          .alpha_c = at(r.a_c),
          .alpha_h = at(r.a_h),
          .steepness = a.get<double>("steepness"),
          .h0 = at(r.h0),
          .c0 = at(r.c0)};
}

}  // namespace loom
