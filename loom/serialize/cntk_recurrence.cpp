#include "loom/serialize/cntk_recurrence.h"

#include <algorithm>
#include <functional>
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
  size_t cell = 0;  // c: the size of h (and the LSTM's c) and of each gate block
  std::string activation;
  // a: the gate blocks sliced (LSTM: b + x·W + S(dh)·H; GRU: b + x·W, and ah = S(dh)·H);
  // dhs: S(dh), the previous output as the cell reads it; z: GRU's update gate.
  Variable a, ah, x, b, W, H, H1, alpha, dh, dhs, dc, h0, c0, z;
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

  // LSTM: h = sigmoid(o)·act(c)
  bool h(const Variable& v, const Variable& c) {
    return binary(v, "ElementTimes", [&](const Variable& p, const Variable& q) {
      return gate(p, 3) && activated(q, c);
    });
  }

  // LSTM: c = sigmoid(f)·dc + sigmoid(i)·act(g), dc a delay of c itself
  bool c(const Variable& v) {
    return binary(v, "Plus", [&](const Variable& p, const Variable& q) {
      return binary(p, "ElementTimes",
                    [&](const Variable& f, const Variable& dc) {
                      return gate(f, 2) && delayed(dc, v, &loop_.dc, &loop_.c0);
                    }) &&
             binary(q, "ElementTimes", [&](const Variable& i, const Variable& g) {
               return gate(i, 0) && activated(g, Variable()) &&
                      gate_block(g_input_, &loop_.a, 4, 1);
             });
    });
  }

  // LSTM: a = b + x·W + S(dh)·H (the three terms in any grouping), dh a delay of h
  bool a(const Variable& v, const Variable& h) { return input_sum(v, h, 4); }

  // GRU: h = (1 - z)·act(ax_c + (S(dh)·r)·H1) + z·S(dh), with z = sigmoid(ax_z + ah_z),
  // r = sigmoid(ax_r + ah_r), ax = b + x·W and ah = S(dh)·H sliced into gate blocks (z, r, c~).
  bool gru(const Variable& v) {
    return binary(v, "Plus", [&](const Variable& p, const Variable& q) {
      if (!binary(p, "ElementTimes",
                  [&](const Variable& m, const Variable& candidate) {
                    return one_minus_update(m) && gru_candidate(candidate, v);
                  }) ||
          !binary(q, "ElementTimes", [&](const Variable& z, const Variable& s) {
            return z == loop_.z && stabilized_state(s, v);
          }))
        return false;
      const Variable ax = loop_.a, ah = loop_.ah;
      return binary(ax, "Plus",
                    [&](const Variable& b, const Variable& xw) {
                      return bias(b, 3) && product(xw, &loop_.x, &loop_.W, 3);
                    }) &&
             recurrent_product(ah, v, 2);
    });
  }

  // RNNStep: h = act(b + x·W + S(dh)·H) (the three terms in any grouping), dh a delay of h
  bool rnn_step(const Variable& v) {
    if (!activated(v, Variable())) return false;
    const Variable sum = g_input_;
    return input_sum(sum, v, 1);
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

  // b + x·W + S(dh)·H in any grouping of the sum, with `blocks` gate blocks.
  bool input_sum(const Variable& v, const Variable& h, size_t blocks) {
    auto bias_term = [&](const Variable& t) { return bias(t, blocks); };
    auto input_term = [&](const Variable& t) { return product(t, &loop_.x, &loop_.W, blocks); };
    auto recurrent_term = [&](const Variable& t) { return recurrent_product(t, h, blocks); };
    const std::function<bool(const Variable&)> terms[] = {bias_term, input_term, recurrent_term};
    return binary(v, "Plus", [&](const Variable& pair, const Variable& last) {
      // The term outside the inner sum is any of the three.
      for (int k = 0; k < 3; ++k) {
        const Loop saved = loop_;
        if (binary(pair, "Plus",
                   [&](const Variable& p, const Variable& q) {
                     return terms[(k + 1) % 3](p) && terms[(k + 2) % 3](q);
                   }) &&
            terms[k](last))
          return true;
        loop_ = saved;
      }
      return false;
    });
  }

  // LSTM: sigmoid(slice k of a)
  bool gate(const Variable& v, size_t k) {
    Impl s = made_by(v, "Sigmoid");
    if (!s || s->inputs.size() != 1 || !gate_block(s->inputs[0], &loop_.a, 4, k)) return false;
    loop_.inside.push_back(s.get());
    return true;
  }

  // GRU: sigmoid(ax_k + ah_k), k 0 (z) or 1 (r)
  bool gru_gate(const Variable& v, size_t k) {
    Impl s = made_by(v, "Sigmoid");
    if (!s || s->inputs.size() != 1 ||
        !binary(s->inputs[0], "Plus", [&](const Variable& p, const Variable& q) {
          return gate_block(p, &loop_.a, 3, k) && gate_block(q, &loop_.ah, 2, k);
        }))
      return false;
    loop_.inside.push_back(s.get());
    return true;
  }

  // GRU: 1 - z (the constant 1 a scalar), recording z.
  bool one_minus_update(const Variable& v) {
    Impl m = made_by(v, "Minus");
    double one = 0;
    if (!m || m->inputs.size() != 2 || !constant_scalar(m->inputs[0], &one) || one != 1 ||
        !gru_gate(m->inputs[1], 0))
      return false;
    loop_.z = m->inputs[1];
    loop_.inside.push_back(m.get());
    return true;
  }

  // GRU: act(ax_c + (S(dh)·r)·H1), h the loop's output.
  bool gru_candidate(const Variable& v, const Variable& h) {
    if (!activated(v, Variable())) return false;
    const Variable sum = g_input_;
    return binary(sum, "Plus", [&](const Variable& p, const Variable& q) {
      Variable reset;
      if (!gate_block(p, &loop_.a, 3, 2) || !product(q, &reset, &loop_.H1, 1) ||
          loop_.H1.shape()[0] != loop_.cell)
        return false;
      return binary(reset, "ElementTimes", [&](const Variable& s, const Variable& r) {
        return stabilized_state(s, h) && gru_gate(r, 1);
      });
    });
  }

  // Slice k of the gate blocks of *a (blocks of them): the same *a for all, recorded by the
  // first.
  bool gate_block(const Variable& v, Variable* a, size_t blocks, size_t k) {
    Impl s = made_by(v, "Slice");
    if (!s || s->inputs.size() != 1) return false;
    const Variable& sliced = s->inputs[0];
    const int64_t dim = int64_t(blocks * loop_.cell), c = int64_t(loop_.cell);
    if (a->valid() ? !(sliced == *a) : sliced.shape() != NDShape{size_t(dim)}) return false;
    const int64_t axis = s->attributes.get<int64_t>("axis");
    int64_t begin = s->attributes.get<int64_t>("begin"), end = s->attributes.get<int64_t>("end");
    if (begin < 0) begin += dim;
    if (end <= 0) end += dim;
    if ((axis != 0 && axis != -1) || begin != int64_t(k) * c || end != begin + c) return false;
    *a = sliced;
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

  // The bias [blocks·c].
  bool bias(const Variable& b, size_t blocks) {
    if (!(b.is_parameter() || b.is_constant()) || b.shape() != NDShape{blocks * loop_.cell})
      return false;
    loop_.b = b;
    return true;
  }

  // operand·W: CNTK's times (output rank 1) of a dense vector by a matrix [size, blocks·c].
  bool product(const Variable& v, Variable* operand, Variable* W, size_t blocks) {
    Impl t = made_by(v, "Times");
    if (!t || t->inputs.size() != 2 || t->attributes.get<int64_t>("output_rank") != 1) return false;
    const Variable &x = t->inputs[0], &w = t->inputs[1];
    if (x.is_sparse() || x.shape().rank() != 1 || !(w.is_parameter() || w.is_constant()) ||
        w.shape() != NDShape{x.shape()[0], blocks * loop_.cell})
      return false;
    *operand = x;
    *W = w;
    loop_.inside.push_back(t.get());
    return true;
  }

  // S(dh)·H with H [c, blocks·c], h the loop's output.
  bool recurrent_product(const Variable& v, const Variable& h, size_t blocks) {
    Variable dhs;
    if (!product(v, &dhs, &loop_.H, blocks) || loop_.H.shape()[0] != loop_.cell) return false;
    return stabilized_state(dhs, h);
  }

  // S(dh) with dh a delay of h, S the identity or a Stabilizer: the one S(dh) of the loop (a
  // later use must be the same variable).
  bool stabilized_state(const Variable& v, const Variable& h) {
    if (loop_.dhs.valid()) return v == loop_.dhs;
    if (!delayed(v, h, &loop_.dh, &loop_.h0) &&
        !binary(v, "ElementTimes", [&](const Variable& beta, const Variable& dh) {
          return stabilizer(beta) && delayed(dh, h, &loop_.dh, &loop_.h0);
        }))
      return false;
    loop_.dhs = v;
    return true;
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
  Variable g_input_;  // the operand of the last activation matched
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

// A loop that may be a cell's: its h (and an LSTM's c), the cell it may be ("LSTM", "GRU" or
// "RNNStep"; empty for a loop of primitives of one state, which may be a GRU or an RNNStep),
// and the block computing them (null for a loop of primitives, as cntk.exe's v1 files hold
// one).
struct Candidate {
  std::shared_ptr<VariableImpl> h, c;
  std::string cell;
  std::shared_ptr<BlockInfo> block;
  bool operator==(const Candidate& o) const { return h == o.h && c == o.c; }
};

// The candidates among the functions in order: the outputs of each block "LSTM" (h, c), "GRU"
// or "RNNStep" (h); outside any block, each delay op's operand h, and each pair of delay ops'
// operands (h, c) with h a product and c a sum.
std::vector<Candidate> candidates(const std::vector<Impl>& order) {
  std::vector<Candidate> found;
  std::unordered_set<const BlockInfo*> seen;
  std::vector<std::shared_ptr<VariableImpl>> hs, cs;
  for (const Impl& f : order) {
    for (const auto& o : f->outputs)
      for (const auto& b : o->blocks) {
        const size_t states = b->op_name == "LSTM" ? 2 : 1;
        if ((b->op_name != "LSTM" && b->op_name != "GRU" && b->op_name != "RNNStep") ||
            b->outputs.size() != states || !seen.insert(b.get()).second)
          continue;
        auto h = b->outputs[0].lock(), c = states == 2 ? b->outputs[1].lock() : nullptr;
        if (h && (c || states == 1)) found.push_back({h, c, b->op_name, b});
      }
    if (!is_delay(*f) || !f->inputs[0].is_output() || !f->inputs[0].impl()->blocks.empty())
      continue;
    const Variable& state = f->inputs[0];
    found.push_back({state.impl(), nullptr, "", nullptr});
    if (made_by(state, "ElementTimes")) hs.push_back(state.impl());
    if (made_by(state, "Plus")) cs.push_back(state.impl());
  }
  for (const auto& h : hs)
    for (const auto& c : cs) found.push_back({h, c, "LSTM", nullptr});
  return found;
}

// The cell the candidate's loop is exactly (CNTK's LSTM, GRU or RNNStep), its parts in m; empty
// if none.
std::string match(const Candidate& candidate, Matcher& m) {
  const Variable h(candidate.h);
  if (candidate.cell == "LSTM") {
    const Variable c(candidate.c);
    if (!m.c(c) || !m.h(h, c)) return "";
    const Variable a = m.loop().a;
    return m.a(a, h) ? "LSTM" : "";
  }
  if (candidate.cell != "RNNStep" && m.gru(h)) return "GRU";
  if (candidate.cell != "GRU" && m.rnn_step(h)) return "RNNStep";
  return "";
}

// Replaces the candidate's loop if it is exactly CNTK's Recurrence(LSTM), Recurrence(GRU) or
// Recurrence(RNNStep); whether it did.
bool fuse(const Candidate& candidate, const std::vector<Impl>& order,
          const std::vector<Variable>& roots) {
  const BlockInfo* block = candidate.block.get();
  const auto &h_impl = candidate.h, &c_impl = candidate.c;
  if (block && block->arguments.size() != (c_impl ? 3u : 2u)) return false;
  const Variable h(h_impl);
  // Their only block is the candidate's (no block around the loop would lose its outputs).
  for (const auto& v : {h_impl, c_impl})
    if (v && (v->blocks.size() != (block ? 1u : 0u) || (block && v->blocks[0].get() != block) ||
              !v->shape_known || v->shape.rank() != 1 || v->shape != h_impl->shape))
      return false;
  Matcher m(h.shape()[0]);
  const std::string cell = match(candidate, m);
  if (cell.empty()) return false;
  const Loop& loop = m.loop();
  // A block's arguments are exactly the loop's dh, (dc,) and x.
  if (block)
    for (const Variable& v : {loop.dh, loop.dc, loop.x})
      if (v.valid() &&
          std::find(block->arguments.begin(), block->arguments.end(), v) == block->arguments.end())
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
  const FusedRecurrenceInputs inputs{.cell = cell,
                                     .activation = loop.activation,
                                     .go_backwards = loop.delay == "FutureValue",
                                     .b = loop.b,
                                     .W = loop.W,
                                     .H = loop.H,
                                     .H1 = loop.H1,
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
