#include "loom/serialize/cntk_recurrence.h"

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "loom/graph/graph_impl.h"
#include "loom/graph/op.h"
#include "loom/ops/fused_rnn.h"

namespace loom {

namespace {

using Impl = std::shared_ptr<FunctionImpl>;

// The primitive producing v when it applies op and has one output, else null.
Impl made_by(const Variable& v, std::string_view op) {
  if (!v.valid() || !v.is_output()) return nullptr;
  Impl f = v.impl()->owner.lock();
  if (!f || !f->op || f->outputs.size() != 1 || f->inputs.size() < 1 || op != f->op->name())
    return nullptr;
  return f;
}

// The value of a one-element constant, if v is one.
bool constant_scalar(const Variable& v, double* value) {
  if (!v.is_constant() || v.shape().total_size() != 1) return false;
  *value = v.value().to_vector<double>()[0];
  return true;
}

// What a loop is made of, as the match finds it.
struct Loop {
  size_t cell = 0;  // c: the size of h, c and each gate block
  std::string activation;
  Variable a, x, b, W, H, alpha, dh, dc, h0, c0;
  double steepness = 0;
  std::string delay;                        // "PastValue" or "FutureValue"
  std::vector<const FunctionImpl*> inside;  // the loop's functions (repeats allowed)
};

// A match of one expression: each method checks that a variable is computed so, recording
// what it finds in loop_. Sums and products may have their operands in either order: `binary`
// tries both, forgetting what a failed order recorded.
class Matcher {
 public:
  explicit Matcher(size_t cell) { loop_.cell = cell; }
  Loop& loop() { return loop_; }

  // h = sigmoid(o)·act(c)
  bool h(const Variable& v, const Variable& c) {
    return binary(v, "ElementTimes", [&](const Variable& p, const Variable& q) {
      return gate(p, 3) && activated(q, c);
    });
  }

  // c = sigmoid(f)·dc + sigmoid(i)·act(g), dc a delay of c itself
  bool c(const Variable& v) {
    return binary(v, "Plus", [&](const Variable& p, const Variable& q) {
      return binary(p, "ElementTimes",
                    [&](const Variable& f, const Variable& dc) {
                      return gate(f, 2) && delayed(dc, v, &loop_.dc, &loop_.c0);
                    }) &&
             binary(q, "ElementTimes", [&](const Variable& i, const Variable& g) {
               return gate(i, 0) && activated(g, Variable()) && gate_block(g_input_, 1);
             });
    });
  }

  // a = b + x·W + S(dh)·H, dh a delay of h
  bool a(const Variable& v, const Variable& h) {
    return binary(v, "Plus", [&](const Variable& p, const Variable& q) {
      return binary(p, "Plus",
                    [&](const Variable& b, const Variable& xw) {
                      return bias(b) && product(xw, &loop_.x, &loop_.W);
                    }) &&
             recurrent_product(q, h);
    });
  }

 private:
  template <typename F>
  bool binary(const Variable& v, std::string_view op, const F& match) {
    Impl f = made_by(v, op);
    if (!f || f->inputs.size() != 2) return false;
    for (int order = 0; order < 2; ++order) {
      const Loop saved = loop_;
      if (match(f->inputs[order], f->inputs[1 - order])) {
        loop_.inside.push_back(f.get());
        return true;
      }
      loop_ = saved;
    }
    return false;
  }

  // sigmoid(slice k of a)
  bool gate(const Variable& v, size_t k) {
    Impl s = made_by(v, "Sigmoid");
    if (!s || s->inputs.size() != 1 || !gate_block(s->inputs[0], k)) return false;
    loop_.inside.push_back(s.get());
    return true;
  }

  // Slice k of the four gate blocks of a (the same a for all).
  bool gate_block(const Variable& v, size_t k) {
    Impl s = made_by(v, "Slice");
    if (!s || s->inputs.size() != 1) return false;
    const Variable& a = s->inputs[0];
    if (loop_.a.valid() ? !(a == loop_.a) : a.shape() != NDShape{4 * loop_.cell}) return false;
    const int64_t axis = s->attributes.get<int64_t>("axis");
    int64_t begin = s->attributes.get<int64_t>("begin"), end = s->attributes.get<int64_t>("end");
    const int64_t dim = int64_t(4 * loop_.cell), c = int64_t(loop_.cell);
    if (begin < 0) begin += dim;
    if (end <= 0) end += dim;
    if ((axis != 0 && axis != -1) || begin != int64_t(k) * c || end != begin + c) return false;
    loop_.a = a;
    loop_.inside.push_back(s.get());
    return true;
  }

  // act(of), act the loop's one activation (tanh, sigmoid or relu); an empty `of` takes any
  // operand and leaves it in g_input_.
  bool activated(const Variable& v, const Variable& of) {
    for (const char* op : {"Tanh", "Sigmoid", "ReLU"}) {
      Impl f = made_by(v, op);
      if (!f || f->inputs.size() != 1) continue;
      if (!loop_.activation.empty() && loop_.activation != op) return false;
      if (of.valid() && !(f->inputs[0] == of)) return false;
      loop_.activation = op;
      g_input_ = f->inputs[0];
      loop_.inside.push_back(f.get());
      return true;
    }
    return false;
  }

  bool bias(const Variable& b) {
    if (!(b.is_parameter() || b.is_constant()) || b.shape() != NDShape{4 * loop_.cell})
      return false;
    loop_.b = b;
    return true;
  }

  // operand·W: CNTK's times (output rank 1) of a dense vector by a matrix [size, 4c].
  bool product(const Variable& v, Variable* operand, Variable* W) {
    Impl t = made_by(v, "Times");
    if (!t || t->inputs.size() != 2 || t->attributes.get<int64_t>("output_rank") != 1) return false;
    const Variable &x = t->inputs[0], &w = t->inputs[1];
    if (x.is_sparse() || x.shape().rank() != 1 || !(w.is_parameter() || w.is_constant()) ||
        w.shape() != NDShape{x.shape()[0], 4 * loop_.cell})
      return false;
    *operand = x;
    *W = w;
    loop_.inside.push_back(t.get());
    return true;
  }

  // S(dh)·H with dh a delay of h, S the identity or a Stabilizer.
  bool recurrent_product(const Variable& v, const Variable& h) {
    Variable dhs, H;
    if (!product(v, &dhs, &H) || H.shape()[0] != loop_.cell) return false;
    loop_.H = H;
    if (delayed(dhs, h, &loop_.dh, &loop_.h0)) return true;
    return binary(dhs, "ElementTimes", [&](const Variable& beta, const Variable& dh) {
      return stabilizer(beta) && delayed(dh, h, &loop_.dh, &loop_.h0);
    });
  }

  // CNTK's Stabilizer factor as its softplus block computes it: LogPlus(k·alpha, 0)·(1/k), alpha
  // a scalar parameter, k > 0.
  bool stabilizer(const Variable& beta) {
    return binary(beta, "ElementTimes", [&](const Variable& softplus, const Variable& inverse) {
      Impl r = made_by(inverse, "Reciprocal");
      double k = 0;
      if (!r || !constant_scalar(r->inputs[0], &k) || !(k > 0)) return false;
      const bool ok =
          binary(softplus, "LogPlus", [&](const Variable& scaled, const Variable& zero) {
            double z = 1;
            return constant_scalar(zero, &z) && z == 0 &&
                   binary(scaled, "ElementTimes",
                          [&](const Variable& steep, const Variable& alpha) {
                            double s = 0;
                            if (!constant_scalar(steep, &s) || s != k || !alpha.is_parameter() ||
                                alpha.shape().total_size() != 1)
                              return false;
                            loop_.alpha = alpha;
                            return true;
                          });
          });
      if (!ok) return false;
      loop_.steepness = k;
      loop_.inside.push_back(r.get());
      return true;
    });
  }

  // v = delay(state, s0) with offset 1 and s0 a constant of shape [], [1] or the state's, the
  // same delay op for both states.
  bool delayed(const Variable& v, const Variable& state, Variable* delayed, Variable* initial) {
    Impl d;
    for (const char* op : {"PastValue", "FutureValue"})
      if ((d = made_by(v, op))) break;
    if (!d || d->inputs.size() != 2 || !(d->inputs[0] == state) ||
        d->attributes.get<int64_t>("offset") != 1)
      return false;
    const std::string op = d->op->name();
    if (!loop_.delay.empty() && loop_.delay != op) return false;
    const Variable& s0 = d->inputs[1];
    const size_t size = s0.shape().total_size();
    if (!s0.is_constant() || s0.shape().rank() > 1 || (size != 1 && size != loop_.cell))
      return false;
    loop_.delay = op;
    *delayed = v;
    *initial = s0;
    loop_.inside.push_back(d.get());
    return true;
  }

  Loop loop_;
  Variable g_input_;
};

// Whether v is computed from any of the functions in set (through delay ops' operands too).
bool computed_from(const Variable& v, const std::unordered_set<const FunctionImpl*>& set) {
  std::vector<Variable> stack{v};
  std::unordered_set<const FunctionImpl*> seen;
  while (!stack.empty()) {
    const Variable u = stack.back();
    stack.pop_back();
    if (!u.is_output()) continue;
    const Impl f = u.impl()->owner.lock();
    if (!f || !seen.insert(f.get()).second) continue;
    if (set.count(f.get())) return true;
    for (const Variable& in : f->inputs) stack.push_back(in);
  }
  return false;
}

// A loop that may be an LSTM's: its h and c, and the block "LSTM" computing them (null for a
// loop of primitives, as cntk.exe's v1 files hold one).
struct Candidate {
  std::shared_ptr<VariableImpl> h, c;
  std::shared_ptr<BlockInfo> block;
  bool operator==(const Candidate& o) const { return h == o.h && c == o.c; }
};

// The candidates among the functions in order: the outputs (h, c) of each block "LSTM", and
// each pair of delay ops' operands (h, c) outside any block, h a product and c a sum.
std::vector<Candidate> candidates(const std::vector<Impl>& order) {
  std::vector<Candidate> found;
  std::unordered_set<const BlockInfo*> seen;
  std::vector<std::shared_ptr<VariableImpl>> hs, cs;
  for (const Impl& f : order) {
    for (const auto& o : f->outputs)
      for (const auto& b : o->blocks)
        if (b->op_name == "LSTM" && b->outputs.size() == 2 && seen.insert(b.get()).second)
          if (auto h = b->outputs[0].lock(), c = b->outputs[1].lock(); h && c)
            found.push_back({h, c, b});
    if (!is_delay(*f) || !f->inputs[0].is_output() || !f->inputs[0].impl()->blocks.empty())
      continue;
    const Variable& state = f->inputs[0];
    if (made_by(state, "ElementTimes")) hs.push_back(state.impl());
    if (made_by(state, "Plus")) cs.push_back(state.impl());
  }
  for (const auto& h : hs)
    for (const auto& c : cs) found.push_back({h, c, nullptr});
  return found;
}

// Replaces the candidate's loop if it is exactly CNTK's Recurrence(LSTM); whether it did.
bool fuse(const Candidate& candidate, const std::vector<Impl>& order,
          const std::vector<Variable>& roots) {
  const BlockInfo* block = candidate.block.get();
  if (block && block->arguments.size() != 3) return false;
  const auto &h_impl = candidate.h, &c_impl = candidate.c;
  const Variable h(h_impl), c(c_impl);
  // Their only block is the candidate's (no block around the loop would lose its outputs).
  for (const auto& v : {h_impl, c_impl})
    if (v->blocks.size() != (block ? 1u : 0u) || (block && v->blocks[0].get() != block) ||
        !v->shape_known || v->shape.rank() != 1)
      return false;
  if (h.shape() != c.shape()) return false;
  Matcher m(c.shape()[0]);
  if (!m.c(c) || !m.h(h, c)) return false;
  const Variable a = m.loop().a;
  if (!m.a(a, h)) return false;
  const Loop& loop = m.loop();
  // A block's arguments are exactly the loop's dh, dc and x.
  if (block)
    for (const Variable& v : {loop.dh, loop.dc, loop.x})
      if (std::find(block->arguments.begin(), block->arguments.end(), v) == block->arguments.end())
        return false;
  // Nothing outside the loop reads anything of it but h, and x is not computed from it.
  std::unordered_set<const FunctionImpl*> inside(loop.inside.begin(), loop.inside.end());
  if (computed_from(loop.x, inside)) return false;
  const FunctionImpl* h_producer = h_impl->owner.lock().get();
  std::vector<std::pair<FunctionImpl*, size_t>> readers_of_h;
  for (const Impl& f : order) {
    if (inside.count(f.get())) continue;
    for (size_t i = 0; i < f->inputs.size(); ++i) {
      const Variable& in = f->inputs[i];
      if (!in.is_output()) continue;
      const auto producer = in.impl()->owner.lock();
      if (!inside.count(producer.get())) continue;
      if (producer.get() != h_producer || !(in == h)) return false;
      readers_of_h.emplace_back(f.get(), i);
    }
  }
  // Nor is anything of it one of the model's outputs.
  for (const Variable& r : roots)
    if (r.is_output() && inside.count(r.impl()->owner.lock().get())) return false;
  if (readers_of_h.empty()) return false;
  const FusedRecurrenceInputs inputs{.cell = "LSTM",
                                     .activation = loop.activation,
                                     .go_backwards = loop.delay == "FutureValue",
                                     .b = loop.b,
                                     .W = loop.W,
                                     .H = loop.H,
                                     .alpha_dh = loop.alpha,
                                     .steepness = loop.alpha.valid() ? loop.steepness : 4.0,
                                     .h0 = loop.h0,
                                     .c0 = loop.c0};
  Function fused = fused_recurrence(loop.x, inputs, block ? block->name : "");
  // The op stands where the loop stood: the block's uid, and h's name and uid on its output.
  if (block) fused.impl()->uid = block->uid;
  fused.impl()->outputs[0]->uid = h_impl->uid;
  fused.impl()->outputs[0]->name = h_impl->name;
  const Variable out(fused);
  for (const auto& [f, i] : readers_of_h) f->inputs[i] = out;
  // Blocks around the readers take the new h as their argument.
  for (const Impl& f : order)
    for (const auto& o : f->outputs)
      for (const auto& b : o->blocks)
        for (Variable& argument : b->arguments)
          if (argument == h) argument = Variable(out.impl());
  return true;
}

}  // namespace

size_t fuse_cntk_recurrences(const Function& model) {
  const std::vector<Variable> roots = model.outputs();
  size_t fused = 0;
  std::vector<Candidate> rejected;
  // One loop at a time: a replacement changes who reads what (stacked loops read each other).
  for (bool again = true; again;) {
    again = false;
    const std::vector<Impl> order = topological_order(roots);
    for (const Candidate& candidate : candidates(order)) {
      if (std::find(rejected.begin(), rejected.end(), candidate) != rejected.end()) continue;
      if (!fuse(candidate, order, roots)) {
        rejected.push_back(candidate);
        continue;
      }
      ++fused;
      again = true;
      break;
    }
  }
  return fused;
}

}  // namespace loom
