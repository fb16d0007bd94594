#include "loom/graph/executor.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <unordered_set>

#include "loom/core/threads.h"
#include "loom/graph/debugging.h"

namespace loom {

namespace {
RandomGenerator* random_of(FunctionImpl& f) {
  return f.random ? &*f.random : nullptr;
}

// The rows of step t of full, a packed tensor of layout loop, as a tensor of layout step.
void step_view(const Tensor& full, const SequenceLayout& loop, size_t t, const SequenceLayout* step,
               Tensor& view) {
  view.dtype = full.dtype;
  view.shape = full.shape;
  view.shape[0] = loop.active(t);
  view.layout = step;
  view.data = static_cast<char*>(full.data) +
              loop.step_offsets[t] * full.sample_size() * size_of(full.dtype);
  view.sparse = nullptr;
  view.blocked = false;
}

// Max pooling of a relu becomes relu of the max pooling (OpTraits::selects_max, moves_behind_max;
// docs/executor.md) where the relu reads a value nothing else reads, its output is read by the
// pooling alone and is not an output, and neither function is in a recurrent loop: the pooling
// reads the relu's operand into a new variable and the relu writes the pooling's output from
// it. (With another reader of the operand, the pooling's backward would add its windows one by
// one to that reader's gradient, where the relu adds their sum: a different rounding.) The two
// take the pair's places in the order; they are the executor's copies, and the user's graph
// stays as it was.
void move_relu_behind_max(std::vector<std::shared_ptr<FunctionImpl>>& order,
                          const std::vector<Variable>& outputs, const std::vector<bool>& in_loop) {
  std::unordered_map<const VariableImpl*, size_t> readers, position;
  for (const Variable& o : outputs) ++readers[o.impl().get()];
  for (size_t k = 0; k < order.size(); ++k) {
    for (const Variable& in : order[k]->inputs) ++readers[in.impl().get()];
    position[order[k]->outputs[0].get()] = k;
  }
  for (size_t j = 0; j < order.size(); ++j) {
    const FunctionImpl& pool = *order[j];
    if (in_loop[j] || pool.inputs.size() != 1 || !pool.op->traits(pool.attributes).selects_max)
      continue;
    const auto found = position.find(pool.inputs[0].impl().get());
    if (found == position.end() || readers[found->first] != 1) continue;
    const size_t i = found->second;
    const FunctionImpl& relu = *order[i];
    if (in_loop[i] || relu.inputs.size() != 1 ||
        !relu.op->traits(relu.attributes).moves_behind_max ||
        readers[relu.inputs[0].impl().get()] != 1)
      continue;
    auto pooled = std::make_shared<VariableImpl>(*pool.outputs[0]);
    pooled->uid = new_uid(pooled->uid + "_before_relu");
    auto new_pool = std::make_shared<FunctionImpl>(pool);
    new_pool->inputs = relu.inputs;
    new_pool->outputs = {pooled};
    pooled->owner = new_pool;
    auto new_relu = std::make_shared<FunctionImpl>(relu);
    new_relu->inputs = {Variable(pooled)};
    new_relu->outputs = {pool.outputs[0]};
    order[i] = std::move(new_pool);
    order[j] = std::move(new_relu);
  }
}

std::string labels(const std::vector<std::shared_ptr<FunctionImpl>>& fns) {
  std::string s;
  for (auto& f : fns) s += (s.empty() ? "" : ", ") + function_label(*f);
  return s;
}

// A Value's elements as it holds them: a packed Value's rows (never padded here), else data().
const NDArrayView& stored(const Value& v) {
  return v.is_packed() ? v.packed_rows() : v.data();
}

// The axes in front of the sample in stored(v): [B, T] of padded sequences, else [B] or [rows].
size_t leading_axes(const Value& v) {
  return v.is_sequence() && !v.is_packed() ? 2 : 1;
}
}  // namespace

std::vector<std::shared_ptr<FunctionImpl>> Executor::schedule(
    const std::vector<std::shared_ptr<FunctionImpl>>& order) {
  // Tarjan's strongly connected components over the full graph (delay operands included),
  // iteratively: a component comes out after every component it reads from.
  const size_t n = order.size(), unvisited = size_t(-1);
  std::unordered_map<const FunctionImpl*, size_t> position;
  for (size_t i = 0; i < n; ++i) position[order[i].get()] = i;
  std::vector<size_t> index(n, unvisited), low(n);
  std::vector<bool> on_stack(n, false);
  std::vector<size_t> stack;
  std::vector<std::pair<size_t, size_t>> calls;  // (function, next input)
  std::vector<std::shared_ptr<FunctionImpl>> result;
  size_t counter = 0;
  auto enter = [&](size_t v) {
    index[v] = low[v] = counter++;
    stack.push_back(v);
    on_stack[v] = true;
    calls.push_back({v, 0});
  };
  for (size_t root = 0; root < n; ++root) {
    if (index[root] != unvisited) continue;
    enter(root);
    while (!calls.empty()) {
      auto& [v, next] = calls.back();
      const auto& inputs = order[v]->inputs;
      if (next < inputs.size()) {
        const Variable& in = inputs[next++];
        if (!in.is_output()) continue;
        const size_t w = position.at(in.impl()->owner.lock().get());
        if (index[w] == unvisited) {
          enter(w);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      const size_t done = v;
      calls.pop_back();
      if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[done]);
      if (low[done] != index[done]) continue;
      std::vector<size_t> component;
      size_t w;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack[w] = false;
        component.push_back(w);
      } while (w != done);
      std::sort(component.begin(), component.end());  // the body in `order`'s order
      bool loop = component.size() > 1;
      for (auto& in : order[done]->inputs) loop = loop || in.impl() == order[done]->outputs[0];
      if (loop) {
        std::vector<std::shared_ptr<FunctionImpl>> body;
        for (size_t c : component) body.push_back(order[c]);
        int64_t direction = 0;
        for (auto& f : body) {
          const int64_t shift = f->op->traits(f->attributes).time_shift;
          if (shift == 0) continue;
          LOOM_CHECK(direction == 0 || (direction > 0) == (shift > 0), ArgumentError,
                     "a recurrent loop mixes past_value and future_value: ", labels(body),
                     "; run the two directions as separate loops");
          direction = shift;
        }
        loops_.push_back({result.size(), result.size() + body.size(), direction < 0, 0});
      }
      for (size_t c : component) result.push_back(order[c]);
    }
  }
  return result;
}

Executor::Executor(std::vector<Variable> outputs, std::vector<Variable> wrt,
                   ExecutorOptions options)
    : outputs_(std::move(outputs)) {
  auto order = schedule(topological_order(outputs_));
  std::vector<bool> in_loop(order.size(), false);
  for (const Loop& loop : loops_)
    std::fill(in_loop.begin() + loop.begin, in_loop.begin() + loop.end, true);
  move_relu_behind_max(order, outputs_, in_loop);
  if (computation_network_trace_level() > 0) trace_plan(order);
  std::unordered_set<const VariableImpl*> wanted;
  for (auto& w : wrt) wanted.insert(w.impl().get());
  auto add_leaf = [&](const Variable& v) {
    if (v.is_output() || slot_index_.count(v.impl().get())) return;
    LOOM_CHECK(!v.is_placeholder(), StateError, "placeholder ", v.describe(),
               " is unbound: call the function on inputs before evaluating it");
    slot_index_[v.impl().get()] = leaf_vars_.size();
    leaf_vars_.push_back(v);
  };
  for (auto& f : order)
    for (auto& in : f->inputs) add_leaf(in);
  for (auto& o : outputs_) add_leaf(o);
  slots_.resize(leaf_vars_.size() + order.size());
  for (size_t i = 0; i < leaf_vars_.size(); ++i) {
    const Variable& v = leaf_vars_[i];
    slots_[i].needs_grad = wanted.count(v.impl().get()) > 0;
    if (slots_[i].needs_grad && v.is_parameter())
      param_grads_.emplace(v, NDArrayView(v.dtype(), v.value().shape()));
    LOOM_CHECK(!slots_[i].needs_grad || v.is_parameter() || v.is_input(), ArgumentError,
               "gradients exist for parameters and inputs only, not for ", v.describe());
  }
  std::vector<std::string> axis_names;  // the inputs' sequence axes, numbered
  for (size_t i = 0; i < leaf_vars_.size(); ++i) {
    const Variable& v = leaf_vars_[i];
    if (!v.is_input() || !v.has_sequence_axis()) continue;
    const std::string& name = v.dynamic_axes()[1].name();
    const auto known = std::find(axis_names.begin(), axis_names.end(), name);
    slots_[i].sequence_axis = size_t(known - axis_names.begin());
    if (known == axis_names.end()) axis_names.push_back(name);
  }
  axes_.resize(axis_names.size());
  for (auto& f : order) {
    for (auto& out : f->outputs)
      LOOM_CHECK(out->shape_known, StateError, "output of ", f->uid,
                 " has an unknown shape: its graph has unbound placeholders");
    slot_index_[f->outputs[0].get()] = leaf_vars_.size() + nodes_.size();
    nodes_.push_back(Node{f, {}, {}, leaf_vars_.size() + nodes_.size(), {}});
  }
  // An op of several outputs (a user function) runs as one node; its further outputs take the
  // slots after the nodes'.
  size_t next_slot = slots_.size();
  for (auto& n : nodes_)
    for (size_t i = 1; i < n.fn->outputs.size(); ++i) {
      slot_index_[n.fn->outputs[i].get()] = next_slot;
      n.more_outputs.push_back(next_slot++);
    }
  slots_.resize(next_slot);
  for (auto& n : nodes_) {
    n.output_values.push_back(&slots_[n.output].value);
    n.output_grads.push_back(&slots_[n.output].grad);
    for (size_t slot : n.more_outputs) {
      n.output_values.push_back(&slots_[slot].value);
      n.output_grads.push_back(&slots_[slot].grad);
    }
  }
  for (size_t l = 0; l < loops_.size(); ++l)
    for (size_t k = loops_[l].begin; k < loops_[l].end; ++k) {
      nodes_[k].loop = l;
      nodes_[k].delay = is_delay(*nodes_[k].fn);
    }
  for (auto& n : nodes_) {
    const FunctionImpl& f = *n.fn;
    for (size_t i = 0; i < f.inputs.size(); ++i) {
      n.inputs.push_back(slot_of(f.inputs[i]));
      n.input_values.push_back(&slots_[n.inputs.back()].value);
      // A loop's steps are views of rows, which sparse data cannot give.
      if (!f.op->traits(f.attributes).accepts_sparse.contains(i) || n.loop != kNoLoop)
        slots_[n.inputs.back()].densify = true;
    }
    n.gradient_wanted.assign(n.inputs.size(), false);
  }
  // Which slots need gradients: a loop reads slots computed after it, so repeat until stable.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& n : nodes_) {
      bool needs = false;
      const InputSet differentiable = n.fn->op->traits(n.fn->attributes).differentiable;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        n.gradient_wanted[i] = slots_[n.inputs[i]].needs_grad && differentiable.contains(i);
        needs = needs || n.gradient_wanted[i];
      }
      changed = changed || needs != slots_[n.output].needs_grad;
      slots_[n.output].needs_grad = needs;
      for (size_t slot : n.more_outputs) slots_[slot].needs_grad = needs;
    }
  }
  for (auto& loop : loops_) plan_loop(loop);
  for (auto& w : wrt) slot_of(w);  // a wrt variable the outputs do not use is an error
  plan_gradient_order();
  plan_blocked_layouts();
  plan_buffers(options.share_buffers);
}

void Executor::plan_gradient_order() {
  // Backward runs the nodes last to first, a loop as one block that ends at its first node:
  // a parameter's gradient is final at the earliest such position that writes it.
  std::vector<size_t> final_at(leaf_vars_.size(), nodes_.size());  // nodes_.size(): at the end
  for (size_t k = nodes_.size(); k-- > 0;) {
    const Node& n = nodes_[k];
    const size_t position = n.loop == kNoLoop ? k : loops_[n.loop].begin;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (n.gradient_wanted[i] && n.inputs[i] < leaf_vars_.size())
        final_at[n.inputs[i]] = std::min(final_at[n.inputs[i]], position);
  }
  final_after_.assign(nodes_.size() + 1, {});
  for (size_t i = 0; i < leaf_vars_.size(); ++i)
    if (slots_[i].needs_grad && leaf_vars_[i].is_parameter())
      final_after_[final_at[i]].push_back(i);
  gradient_order_.clear();
  auto add = [&](size_t position) {
    for (size_t i : final_after_[position]) gradient_order_.push_back(leaf_vars_[i]);
  };
  for (size_t position = nodes_.size(); position-- > 0;) add(position);
  add(nodes_.size());  // no op writes them: zeros at the end
}

void Executor::finish_gradients(size_t position, const GradientReady& ready) {
  for (size_t i : final_after_[position]) {
    if (!slots_[i].grad_written) {  // no gradient reached it
      param_grads_.at(leaf_vars_[i]).fill(0);
      slots_[i].grad_written = true;
    }
    if (ready) ready(leaf_vars_[i], param_grads_.at(leaf_vars_[i]));
  }
}

void Executor::plan_buffers(bool share) {
  // A timeline of one forward and one backward: node k runs forward at time k and backward at
  // 2K-1-k. A value lives from its forward to its last reader: the forward of each consumer,
  // and the backward of each consumer (and of its producer) that reads it there
  // (OpTraits::backward_reads_*). A gradient lives from the backward of the first op that writes
  // it (the last consumer; for an output, which may be the root, from the start of backward)
  // to its producer's backward. Lifetimes are closed intervals; an op never shares a buffer
  // with its own inputs or output.
  const size_t K = nodes_.size(), leaves = leaf_vars_.size(), never = size_t(-1);
  auto backward_time = [&](size_t k) { return 2 * K - 1 - k; };
  std::vector<size_t> value_end(slots_.size(), 0), grad_begin(slots_.size(), never);
  std::vector<bool> pinned(slots_.size(), !share);  // keeps a buffer of its own
  // A view's output (OpTraits::output_views_input) is its input's buffer: each slot's group is
  // the slot whose buffer it is, and a group's buffer lives as long as its longest-lived slot.
  std::vector<size_t> group(slots_.size());
  std::iota(group.begin(), group.end(), size_t{0});
  for (size_t k = 0; k < K; ++k) {
    Node& n = nodes_[k];
    n.views_input = n.loop == kNoLoop && n.more_outputs.empty() &&
                    n.fn->op->traits(n.fn->attributes).output_views_input &&
                    !slots_[n.inputs[0]].value.blocked &&
                    n.fn->inputs[0].dtype() == n.fn->outputs[0]->dtype;
    if (n.views_input) group[n.output] = group[n.inputs[0]];
  }
  for (const Variable& o : outputs_) {
    pinned[slot_of(o)] = true;  // the caller reads outputs after forward and backward
    grad_begin[slot_of(o)] = K;
  }
  for (size_t k = 0; k < K; ++k) {
    const Node& n = nodes_[k];
    const OpTraits traits = n.fn->op->traits(n.fn->attributes);
    const bool backward_runs = slots_[n.output].needs_grad;
    value_end[n.output] = std::max(value_end[n.output], k);
    if (backward_runs && traits.backward_reads_output) value_end[n.output] = backward_time(k);
    // A free dimension (NDShape::kFree) leaves the size of a sample unknown when planning.
    if (n.fn->outputs[0]->shape.has_free()) pinned[n.output] = true;
    for (size_t slot : n.more_outputs) pinned[slot] = true;  // outside the nodes' timeline
    // Loops run step by step on views, zero gradients ahead and carry values to the next
    // minibatch: their values and what they read keep their own buffers.
    if (n.loop != kNoLoop || n.delay || traits.time_shift != 0) {
      pinned[n.output] = true;
      for (size_t in : n.inputs) pinned[in] = true;
    }
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const size_t in = n.inputs[i];
      value_end[in] = std::max(value_end[in], k);
      if (backward_runs && traits.backward_reads_inputs.contains(i))
        value_end[in] = std::max(value_end[in], backward_time(k));
      if (n.gradient_wanted[i]) grad_begin[in] = std::min(grad_begin[in], backward_time(k));
    }
  }
  std::vector<size_t> group_end = value_end;
  for (size_t s = 0; s < slots_.size(); ++s) {
    group_end[group[s]] = std::max(group_end[group[s]], value_end[s]);
    if (pinned[s]) pinned[group[s]] = true;
  }
  // Greedy interval colouring, one pool for values and one for gradients (a value is never
  // overwritten by a gradient, so backward may run again after one forward): each lifetime, in
  // order of its start, takes the free buffer used by the largest values so far. An op that
  // may write over an input (OpTraits::writes_over_inputs: elementwise ops) takes that input's
  // buffer when the input's life ends at its forward, and in backward writes the input's
  // gradient over its output's when it is the first and last to write there.
  struct Buffer {
    size_t free_from, sample_bytes;
  };
  auto assign = [&](std::vector<Buffer>& pool, size_t begin, size_t end, size_t sample_bytes) {
    size_t best = never;
    for (size_t b = 0; b < pool.size(); ++b)
      if (pool[b].free_from <= begin &&
          (best == never || pool[b].sample_bytes > pool[best].sample_bytes))
        best = b;
    if (best == never) {
      best = pool.size();
      pool.push_back({0, 0});
    }
    pool[best].free_from = end + 1;
    pool[best].sample_bytes = std::max(pool[best].sample_bytes, sample_bytes);
    return best;
  };
  auto sample_bytes = [&](size_t k) {
    return nodes_[k].fn->outputs[0]->shape.total_size() * size_of(nodes_[k].fn->outputs[0]->dtype);
  };
  // Whether node k's output may live in the buffer of its input i (same size and layout).
  auto over_input = [&](size_t k, size_t i) {
    const Node& n = nodes_[k];
    return n.fn->op->traits(n.fn->attributes).writes_over_inputs.contains(i) &&
           (n.views_input || n.fn->inputs[i].shape() == n.fn->outputs[0]->shape) &&
           n.fn->inputs[i].dtype() == n.fn->outputs[0]->dtype &&
           n.fn->inputs[i].dynamic_axes() == n.fn->outputs[0]->dynamic_axes &&
           slots_[n.inputs[i]].value.blocked == slots_[n.output].value.blocked;
  };
  std::vector<Buffer> values, grads;
  std::vector<size_t> value_in(slots_.size(), never), grad_in(slots_.size(), never);
  for (size_t k = 0; k < K; ++k) {
    const size_t out = leaves + k;
    if (pinned[out] || group[out] != out) continue;
    for (size_t i = 0; i < nodes_[k].inputs.size() && value_in[out] == never; ++i) {
      const size_t in = group[nodes_[k].inputs[i]];
      if (in >= leaves && !pinned[in] && over_input(k, i) && group_end[in] == k) {
        value_in[out] = value_in[in];
        values[value_in[out]].free_from = group_end[out] + 1;
      }
    }
    if (value_in[out] == never) value_in[out] = assign(values, k, group_end[out], sample_bytes(k));
  }
  // Gradients in the order backward writes them; the op that writes first, per slot.
  std::vector<size_t> by_begin, first_writer(slots_.size(), never);
  for (size_t k = K; k-- > 0;)
    for (size_t i = 0; i < nodes_[k].inputs.size(); ++i)
      if (nodes_[k].gradient_wanted[i] && first_writer[nodes_[k].inputs[i]] == never)
        first_writer[nodes_[k].inputs[i]] = k;
  for (size_t k = 0; k < K; ++k)
    if (slots_[leaves + k].needs_grad && !pinned[leaves + k] && grad_begin[leaves + k] != never)
      by_begin.push_back(k);
  std::stable_sort(by_begin.begin(), by_begin.end(), [&](size_t a, size_t b) {
    return grad_begin[leaves + a] < grad_begin[leaves + b];
  });
  for (size_t k : by_begin) {
    const size_t slot = leaves + k, writer = first_writer[slot];
    // Over the writer's output gradient: the writer's only wanted input, read by nothing else.
    if (writer != never && grad_in[nodes_[writer].output] != never &&
        grad_begin[slot] == backward_time(writer)) {
      const Node& w = nodes_[writer];
      size_t wanted = 0, index = 0;
      for (size_t i = 0; i < w.inputs.size(); ++i)
        if (w.gradient_wanted[i]) ++wanted, index = i;
      if (wanted == 1 && w.inputs[index] == slot && !pinned[slot] && over_input(writer, index)) {
        grad_in[slot] = grad_in[w.output];
        grads[grad_in[slot]].free_from = backward_time(k) + 1;
      }
    }
    if (grad_in[slot] == never)
      grad_in[slot] = assign(grads, grad_begin[slot], backward_time(k), sample_bytes(k));
  }
  std::vector<TensorStorage*> value_storage, grad_storage;
  for (size_t b = 0; b < values.size(); ++b) value_storage.push_back(&shared_.emplace_back());
  for (size_t b = 0; b < grads.size(); ++b) grad_storage.push_back(&shared_.emplace_back());
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    slot.value_buffer = value_in[i] == never ? &slot.storage : value_storage[value_in[i]];
    slot.grad_buffer = grad_in[i] == never ? &slot.grad_storage : grad_storage[grad_in[i]];
  }
}

void Executor::plan_loop(Loop& loop) {
  std::vector<std::shared_ptr<FunctionImpl>> body;
  for (size_t k = loop.begin; k < loop.end; ++k) body.push_back(nodes_[k].fn);
  const size_t first = leaf_vars_.size() + loop.begin, last = leaf_vars_.size() + loop.end;
  bool found = false;
  for (size_t k = loop.begin; k < loop.end; ++k) {
    Node& n = nodes_[k];
    const FunctionImpl& f = *n.fn;
    // Every value of the loop is a sequence, computed one step at a time; ops that look along
    // the sequence axis (sequence::first, last, is_first, slice, ...) cannot run inside a loop.
    LOOM_CHECK((n.delay || f.op->traits(f.attributes).runs_step_by_step) &&
                   f.outputs[0]->dynamic_axes.size() == 2,
               StateError, "op ", function_label(f), " (", f.op->name(), ") in the recurrent loop ",
               labels(body),
               " looks along the sequence axis; a loop's ops must compute each step from that "
               "step alone");
    LOOM_CHECK(!f.outputs[0]->shape.has_free(), StateError, "op ", function_label(f), " (",
               f.op->name(), ") in the recurrent loop ", labels(body), " gives ",
               f.outputs[0]->shape.to_string(),
               ", whose free dimension each minibatch sizes; a loop's values need known shapes");
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Variable& in = f.inputs[i];
      if (n.delay || in.dynamic_axes().empty()) continue;
      LOOM_CHECK(in.dynamic_axes().size() == 2, StateError, "op ", function_label(f),
                 " in the recurrent loop ", labels(body), " reads ", in.describe(),
                 ", which is not a sequence");
      if (n.inputs[i] < first || n.inputs[i] >= last) {
        loop.sequence_slot = n.inputs[i];
        found = true;
      }
    }
    n.step_inputs.resize(n.inputs.size());
    n.step_input_values = n.input_values;
  }
  LOOM_CHECK(found, StateError, "the recurrent loop ", labels(body),
             " reads no sequence from outside the loop, so its steps are unknown");
}

void Executor::plan_blocked_layouts() {
  // A value may stay blocked when only ops read it (not the caller: outputs and leaves stay
  // row-major) and each takes it blocked. Consumers come after producers, so one backward sweep
  // settles every value's consumers, LikeOutput ops' outputs first.
  std::vector<bool> taken_blocked(slots_.size(), true);
  for (size_t i = 0; i < leaf_vars_.size(); ++i) taken_blocked[i] = false;
  for (const Variable& o : outputs_) taken_blocked[slot_of(o)] = false;
  // A loop's ops run on views of rows: nothing they read or write is blocked.
  for (auto& n : nodes_)
    if (n.loop != kNoLoop) taken_blocked[n.output] = false;
  for (auto n = nodes_.rbegin(); n != nodes_.rend(); ++n) {
    const FunctionImpl& f = *n->fn;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const BlockedInput b = f.op->blocked_input(i, f.inputs, f.attributes);
      if (n->loop != kNoLoop || b == BlockedInput::No ||
          (b == BlockedInput::LikeOutput && !taken_blocked[n->output]))
        taken_blocked[n->inputs[i]] = false;
    }
  }
  // Then each producer, in order, says whether it writes the value blocked given its inputs.
  for (auto& n : nodes_) {
    const FunctionImpl& f = *n.fn;
    std::vector<bool> inputs_blocked;
    for (const Tensor* t : n.input_values) inputs_blocked.push_back(t->blocked);
    slots_[n.output].value.blocked =
        taken_blocked[n.output] && f.op->blocked_output(f.inputs, f.attributes, inputs_blocked);
  }
}

size_t Executor::slot_of(const Variable& v) const {
  auto it = slot_index_.find(v.impl().get());
  LOOM_CHECK(it != slot_index_.end(), ArgumentError, v.describe(),
             " is not part of the graph being computed (a relu that feeds max pooling alone runs "
             "after it and keeps no value of its own: ask for it as an output to see it)");
  return it->second;
}

namespace {
// Whether value's sequences have l's lengths (and, with begins, l's starts), read in place.
bool has_sequences_of(const Value& value, const SequenceLayout& l, bool begins) {
  if (value.num_sequences() != l.num_sequences()) return false;
  for (size_t b = 0; b < l.num_sequences(); ++b)
    if (value.sequence_length(b) != l.lengths[b] ||
        (begins && value.begins_sequence(b) != l.begins[b]))
      return false;
  return true;
}
}  // namespace

void Executor::bind_sequence_layouts(const ArgumentLookup& argument) {
  if (layouts_.size() > 64) layouts_.clear();
  for (SequenceAxis& axis : axes_) axis.first = nullptr;
  for (size_t i = 0; i < leaf_vars_.size(); ++i) {
    if (slots_[i].sequence_axis == kNoAxis) continue;
    const Variable& v = leaf_vars_[i];
    const Value* value = argument(v);
    if (!value) continue;
    check_value_form(v, *value);
    SequenceAxis& axis = axes_[slots_[i].sequence_axis];
    if (axis.first) {
      if (!has_sequences_of(*value, *axis.layout, false))  // the error names the lengths
        check_same_sequence_lengths(*axis.first, *axis.first_value, v, *value);
      continue;
    }
    axis.first = &v;
    axis.first_value = value;
    // A packed Value's own layout, shared; else the last minibatch's, when its sequences are
    // this one's; else a new one.
    if (value->is_packed()) {
      axis.layout = value->packed_layout();
    } else if (!axis.layout || !has_sequences_of(*value, *axis.layout, true)) {
      std::vector<bool> begins(value->num_sequences());
      for (size_t b = 0; b < begins.size(); ++b) begins[b] = value->begins_sequence(b);
      axis.layout = std::make_shared<const SequenceLayout>(
          SequenceLayout::from_lengths(value->sequence_lengths(), std::move(begins)));
    }
  }
}

void Executor::bind_input(const Variable& v, Slot& slot, const Value& value) {
  // Messages are built only on failure: this runs for every input of every minibatch.
#define LOOM_VAR v.describe()
  LOOM_CHECK(value.dtype() == v.dtype(), ShapeError, "value for ", LOOM_VAR, " has type ",
             to_string(value.dtype()), " but the variable has type ", to_string(v.dtype()));
  // CNTK densifies sparse data for a dense input (the executor does where an op needs it);
  // dense data for a sparse input is an error, which also catches swapped features and labels.
  LOOM_CHECK(value.is_sparse() || !v.is_sparse(), ShapeError, "value for ", LOOM_VAR,
             " is dense, but the variable is sparse: give sparse data (Value::one_hot, a CSR "
             "NDArrayView), or declare the input without is_sparse");
  const NDShape& data_shape = stored(value).shape();
  const size_t axes = leading_axes(value);
  bool same_sample = data_shape.rank() == v.shape().rank() + axes;
  for (size_t i = 0; same_sample && i < v.shape().rank(); ++i)  // a free dimension takes any size
    same_sample = v.shape()[i] == NDShape::kFree || v.shape()[i] == data_shape[axes + i];
  LOOM_CHECK(same_sample, ShapeError, "value for ", LOOM_VAR, " has sample shape ",
             value.sample_shape().to_string(), " but the variable has shape ",
             v.shape().to_string());
  Tensor& t = slot.value;
  t.dtype = v.dtype();
  t.sparse = nullptr;
  t.data = nullptr;
  // The sample shape of this minibatch (the variable's, its free dimensions the data's).
  // (A reference where no dimension is free: a steady training loop allocates nothing.)
  const NDShape data_sample = v.shape().has_free() ? value.sample_shape() : NDShape();
  const NDShape& sample_shape = v.shape().has_free() ? data_sample : v.shape();
  size_t sample = sample_shape.total_size();
  if (!v.has_batch_axis()) {  // a plain tensor (e.g. a gradient fed to an update graph)
    LOOM_CHECK(value.num_sequences() == 1 && value.number_of_samples() == 1, ShapeError,
               "value for ", LOOM_VAR, " has ", value.number_of_samples(),
               " samples, but the variable has no dynamic axes and takes exactly one");
    t.layout = nullptr;
    t.shape = sample_shape;
    slot.bound = stored(value).to_dense();
    t.data = slot.bound->raw_data();
    return;
  }
  if (!v.has_sequence_axis()) {
    check_value_form(v, value);
    size_t n = value.num_sequences();
    t.layout = layouts_.batch(n);
    t.shape.assign_prepended(n, sample_shape);
    slot.bound = stored(value);
    if (value.is_sparse() && slot.densify) {
      t.data = slot.storage.ensure(t.size() * size_of(t.dtype));
      slot.bound->csr_rows_to_dense(0, slot.bound->csr_rows(), t.data);
    } else if (value.is_sparse()) {
      t.sparse = &*slot.bound;
    } else {
      t.data = const_cast<void*>(slot.bound->raw_data());  // inputs are never written
    }
    return;
  }
  const SequenceLayout* layout = axes_[slot.sequence_axis].layout.get();
  t.layout = layout;
  t.shape.assign_prepended(layout->rows(), sample_shape);
  size_t T = value.max_sequence_length();
  if (value.is_sparse()) {
    // Reorder CSR rows into the packed order.
    const NDArrayView& src = value.data();
    const auto& off = src.csr_row_offsets();
    const auto& col = src.csr_col_indices();
    std::vector<int32_t> offsets{0}, cols;
    std::vector<size_t> src_index;
    for (size_t step = 0; step < layout->max_length(); ++step)
      for (size_t k = 0; k < layout->active(step); ++k) {
        size_t r = layout->order[k] * T + step;
        for (int32_t j = off[r]; j < off[r + 1]; ++j) {
          cols.push_back(col[j]);
          src_index.push_back(size_t(j));
        }
        offsets.push_back(int32_t(cols.size()));
      }
    slot.bound = dispatch(v.dtype(), [&](auto zero) {
      using T_ = decltype(zero);
      const T_* vals = src.csr_values<T_>();
      std::vector<T_> values(src_index.size());
      for (size_t i = 0; i < values.size(); ++i) values[i] = vals[src_index[i]];
      return NDArrayView::sparse_csr<T_>(t.shape, std::move(offsets), std::move(cols), values);
    });
    if (slot.densify) {
      t.data = slot.storage.ensure(t.size() * size_of(t.dtype));
      slot.bound->csr_rows_to_dense(0, slot.bound->csr_rows(), t.data);
    } else {
      t.sparse = &*slot.bound;
    }
    return;
  }
  if (value.is_packed()) {  // its rows are the layout's (bind_sequence_layouts checked the lengths)
    slot.bound = value.packed_rows();
    t.data = const_cast<void*>(slot.bound->raw_data());  // inputs are never written
    return;
  }
  slot.bound.reset();
  t.data = slot.storage.ensure(layout->rows() * sample * size_of(t.dtype));
  pack_dense(value, *layout, t.data);
}

#undef LOOM_VAR

void Executor::forward(const ValueMap& arguments, bool is_training) {
  forward(
      [&](const Variable& v) {
        auto it = arguments.find(v);
        return it == arguments.end() ? nullptr : &it->second;
      },
      is_training);
}

void Executor::forward(const ArgumentLookup& argument, bool is_training) {
  is_training_ = is_training;
  observe_ = node_observation_active();
  // The previous minibatch's values are still in place (their layouts too, until bound anew),
  // and its backward is done: keep what continued sequences read of them.
  if (forward_done_)
    for (auto& node : nodes_)
      if (node.fn->op->traits(node.fn->attributes).time_shift > 0) carry_over(node);
  forward_done_ = false;  // until this forward completes
  bind_sequence_layouts(argument);
  for (size_t i = 0; i < leaf_vars_.size(); ++i) {
    const Variable& v = leaf_vars_[i];
    Slot& slot = slots_[i];
    if (v.is_input()) {
      const Value* value = argument(v);
      LOOM_CHECK(value, ArgumentError, "no value given for input ", v.describe());
      bind_input(v, slot, *value);
    } else {
      NDArrayView& stored = v.value();  // alive as long as leaf_vars_ holds v
      slot.value.dtype = v.dtype();
      slot.value.shape = stored.shape();
      slot.value.data = stored.raw_data();
    }
  }
  for (size_t k = 0; k < nodes_.size(); ++k) {
    Node& node = nodes_[k];
    if (node.loop != kNoLoop) {
      forward_loop(loops_[node.loop]);
      k = loops_[node.loop].end - 1;
      continue;
    }
    const FunctionImpl& f = *node.fn;
    std::span<const Tensor* const> ins = node.input_values;
    const SequenceLayout* layout = f.op->output_layout(ins, f.attributes, layouts_);
    bool free = false;  // this minibatch sizes an output's free dimensions
    for (const auto& o : f.outputs) free = free || o->shape.has_free();
    if (free) node.free_shapes = f.op->output_shapes(f.inputs, ins, f.attributes);
    for (size_t i = 0; i < node.output_values.size(); ++i) {
      Tensor& out = *node.output_values[i];
      const VariableImpl& spec = *f.outputs[i];
      out.dtype = spec.dtype;
      out.layout = layout;
      const NDShape& sample = spec.shape.has_free() ? node.free_shapes[i] : spec.shape;
      if (layout) {
        out.shape.assign_prepended(layout->rows(), sample);
      } else {
        out.shape = sample;
      }
      out.sparse = nullptr;
      out.data = node.views_input
                     ? ins[0]->data
                     : slots_[i == 0 ? node.output : node.more_outputs[i - 1]].value_buffer->ensure(
                           out.size() * size_of(spec.dtype));
    }
    if (node.views_input) {       // the output is the input's elements where they lie
      if (observe_) [[unlikely]]  // timed (at nothing) and checked as any node
        observe_node(
            f, NodePass::Forward, [] {}, node.output_values);
      continue;
    }
    OpCall call = whole_call(node, false);
    if (!observe_) [[likely]] {
      f.op->forward(call);
    } else {
      observe_node(
          f, NodePass::Forward, [&] { f.op->forward(call); }, call.outputs);
    }
  }
  forward_done_ = true;
}

void Executor::forward_loop(const Loop& loop) {
  const SequenceLayout& L = *slots_[loop.sequence_slot].value.layout;
  for (size_t k = loop.begin; k < loop.end; ++k) {
    Node& node = nodes_[k];
    Slot& out = slots_[node.output];
    const VariableImpl& spec = *node.fn->outputs[0];
    out.value.dtype = spec.dtype;
    out.value.layout = &L;
    out.value.shape.assign_prepended(L.rows(), spec.shape);
    out.value.sparse = nullptr;
    out.value.data = out.value_buffer->ensure(out.value.size() * size_of(spec.dtype));
    if (out.step_scratch.size() < L.max_length()) out.step_scratch.resize(L.max_length());
  }
  for (size_t k = loop.begin; k < loop.end; ++k)
    for (const Tensor* in : nodes_[k].input_values)
      LOOM_CHECK(!in->dynamic() || nodes_[k].delay || in->layout->same_shape_as(L), ShapeError,
                 "op ", function_label(*nodes_[k].fn),
                 " in a recurrent loop reads sequences of other lengths than the loop's");
  for (size_t s = 0, T = L.max_length(); s < T; ++s) {
    const size_t t = loop.backwards ? T - 1 - s : s;
    const SequenceLayout* step = layouts_.batch(L.active(t));
    for (size_t k = loop.begin; k < loop.end; ++k) {
      Node& node = nodes_[k];
      const FunctionImpl& f = *node.fn;
      Slot& out = slots_[node.output];
      if (node.delay) {
        OpCall call = whole_call(node, false);
        if (!observe_) [[likely]] {
          f.op->forward_step(call, t);
        } else {
          observe_node(f, NodePass::Forward, [&] { f.op->forward_step(call, t); }, {});
        }
        continue;
      }
      step_views(node, out, L, t, step);
      OpCall call{f.attributes,         node.step_input_values, &node.step_output,  nullptr,
                  &out.step_scratch[t], is_training_,           random_of(*node.fn)};
      if (!observe_) [[likely]] {
        f.op->forward(call);
      } else {
        const Tensor* result = &node.step_output;
        observe_node(f, NodePass::Forward, [&] { f.op->forward(call); }, {&result, 1});
      }
    }
  }
}

void Executor::step_views(Node& node, const Slot& out, const SequenceLayout& loop, size_t t,
                          const SequenceLayout* step) {
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.input_values[i]->dynamic()) {
      step_view(*node.input_values[i], loop, t, step, node.step_inputs[i]);
      node.step_input_values[i] = &node.step_inputs[i];
    }
  step_view(out.value, loop, t, step, node.step_output);
}

OpCall Executor::whole_call(Node& node, bool with_gradient) {
  Slot& out = slots_[node.output];
  return OpCall{node.fn->attributes,
                node.input_values,
                &out.value,
                with_gradient ? &out.grad : nullptr,
                &out.scratch,
                is_training_,
                random_of(*node.fn),
                with_gradient ? &node.gradient_wanted : nullptr,
                node.carried.data ? &node.carried : nullptr,
                &node.state,
                node.fn.get(),
                &node.user_state,
                node.output_values,
                with_gradient ? std::span<const Tensor* const>(node.output_grads)
                              : std::span<const Tensor* const>()};
}

void Executor::carry_over(Node& node) {
  const Tensor& x = *node.input_values[0];
  const SequenceLayout& l = *x.layout;
  const size_t k = size_t(node.fn->op->traits(node.fn->attributes).time_shift);
  std::vector<size_t> kept(l.num_sequences());
  for (size_t b = 0; b < kept.size(); ++b) kept[b] = std::min(l.lengths[b], k);
  node.carried_layout = SequenceLayout::from_lengths(std::move(kept));
  const SequenceLayout& c = node.carried_layout;
  Tensor& carried = node.carried;
  carried.dtype = x.dtype;
  carried.layout = &c;
  carried.shape = x.shape;
  carried.shape[0] = c.rows();
  const size_t bytes = x.sample_size() * size_of(x.dtype);
  carried.data = node.carried_storage.ensure(c.rows() * bytes);
  for (size_t b = 0; b < c.num_sequences(); ++b)
    for (size_t j = 0; j < c.lengths[b]; ++j)
      std::memcpy(
          static_cast<char*>(carried.data) + c.row(b, j) * bytes,
          static_cast<const char*>(x.data) + l.row(b, l.lengths[b] - c.lengths[b] + j) * bytes,
          bytes);
}

void Executor::zero_gradient_once(size_t index) {
  Slot& slot = slots_[index];
  if (slot.grad_written) return;
  Tensor& g = gradient_tensor(index);
  std::memset(g.data, 0, g.size() * size_of(g.dtype));
  slot.grad_written = true;
}

bool Executor::gradient_reached(const Node& node) {
  bool reached = slots_[node.output].grad_written;
  for (size_t slot : node.more_outputs) reached = reached || slots_[slot].grad_written;
  if (reached && !node.more_outputs.empty()) {
    zero_gradient_once(node.output);
    for (size_t slot : node.more_outputs) zero_gradient_once(slot);
  }
  return reached;
}

void Executor::backward_loop(const Loop& loop) {
  const SequenceLayout& L = *slots_[loop.sequence_slot].value.layout;
  bool reached = false;  // as for a single op: no gradient reached the loop, none leaves it
  for (size_t k = loop.begin; k < loop.end; ++k)
    reached = reached || slots_[nodes_[k].output].grad_written;
  if (!reached) return;
  // Every step adds its gradients: into zeros, unless ops after the loop wrote some already.
  for (size_t k = loop.begin; k < loop.end; ++k) {
    const Node& node = nodes_[k];
    if (!slots_[node.output].needs_grad) continue;
    zero_gradient_once(node.output);
    for (size_t i = 0; i < node.inputs.size(); ++i)  // never sparse: loops densify their inputs
      if (node.gradient_wanted[i]) zero_gradient_once(node.inputs[i]);
  }
  for (size_t s = 0, T = L.max_length(); s < T; ++s) {
    const size_t t = loop.backwards ? s : T - 1 - s;
    const SequenceLayout* step = layouts_.batch(L.active(t));
    for (size_t k = loop.end; k-- > loop.begin;) {
      Node& node = nodes_[k];
      const FunctionImpl& f = *node.fn;
      Slot& out = slots_[node.output];
      if (!out.needs_grad) continue;
      if (node.delay) {
        OpCall call = whole_call(node, true);
        auto run = [&] {
          for (size_t i = 0; i < node.inputs.size(); ++i)
            if (node.gradient_wanted[i])
              f.op->backward_step(call, i, slots_[node.inputs[i]].grad, t);
        };
        if (!observe_) [[likely]] {
          run();
        } else {
          observe_node(f, NodePass::Backward, run, {});
        }
        continue;
      }
      step_views(node, out, L, t, step);
      step_view(out.grad, L, t, step, node.step_output_grad);
      OpCall call{f.attributes,           node.step_input_values, &node.step_output,
                  &node.step_output_grad, &out.step_scratch[t],   is_training_,
                  random_of(*node.fn),    &node.gradient_wanted};
      auto run = [&] {
        for (size_t i = 0; i < node.inputs.size(); ++i) {
          if (!node.gradient_wanted[i]) continue;
          Tensor& g = slots_[node.inputs[i]].grad;
          if (!g.dynamic()) {
            f.op->backward(call, i, g, true);
            continue;
          }
          step_view(g, L, t, step, node.step_input_grad);
          f.op->backward(call, i, node.step_input_grad, true);
        }
      };
      if (!observe_) [[likely]] {
        run();
      } else {
        observe_node(f, NodePass::Backward, run, {});  // gradients are checked per node, not step
      }
    }
  }
  // Checked mode and tracing see each node's gradients once every step has added its part, in
  // backward's order (the first to write a NaN is named).
  if (observe_)
    for (size_t k = loop.end; k-- > loop.begin;)
      if (slots_[nodes_[k].output].needs_grad) {
        const auto [gradients, inputs] = written_gradients(nodes_[k]);
        inspect_results(*nodes_[k].fn, NodePass::Backward, gradients, inputs);
      }
}

std::pair<std::vector<const Tensor*>, std::vector<size_t>> Executor::written_gradients(
    const Node& node) {
  std::pair<std::vector<const Tensor*>, std::vector<size_t>> written;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.gradient_wanted[i]) {
      written.first.push_back(&slots_[node.inputs[i]].grad);
      written.second.push_back(i);
    }
  return written;
}

void Executor::observe_backward(const Node& node, const std::function<void()>& run) {
  const auto [gradients, inputs] = written_gradients(node);
  observe_node(*node.fn, NodePass::Backward, run, gradients, inputs);
}

Tensor& Executor::gradient_tensor(size_t index) {
  Slot& slot = slots_[index];
  Tensor& g = slot.grad;
  g = slot.value;
  g.sparse = nullptr;
  if (index < leaf_vars_.size() && leaf_vars_[index].is_parameter()) {
    g.data = param_grads_.at(leaf_vars_[index]).raw_data();
  } else {
    g.data = slot.grad_buffer->ensure(g.size() * size_of(g.dtype));
  }
  return g;
}

bool Executor::seeds_in_place(size_t root, const Value& g) const {
  // The rows of g's data are the root's rows: packed sequences of the root's lengths, a batch of
  // single samples, or one sequence, with no padding. Ops only read an output gradient, and
  // nothing else writes the root's, except a loop's delay (a root inside a loop also feeds the
  // loop's next step) and a parameter's own.
  const Tensor& value = slots_[root].value;
  const bool same_rows = g.is_packed() || !value.dynamic() || value.layout->max_length() <= 1 ||
                         value.layout->num_sequences() == 1;
  // Node k's output is slot leaves + k; the slots after the nodes' are further outputs.
  const size_t leaves = leaf_vars_.size();
  return same_rows && stored(g).size() == value.size() && root >= leaves &&
         root < leaves + nodes_.size() && nodes_[root - leaves].loop == kNoLoop;
}

void Executor::backward(const Variable& root, const Value* root_gradient,
                        const GradientReady& ready) {
  LOOM_CHECK(forward_done_, StateError, "backward before forward");
  observe_ = node_observation_active();
  for (auto& s : slots_) s.grad_written = false;
  size_t r = slot_of(root);
  LOOM_CHECK(slots_[r].needs_grad, ArgumentError, root.describe(),
             " does not depend on any variable whose gradient was requested");
  Tensor& seed = gradient_tensor(r);
  if (root_gradient) {
    const Tensor& value = slots_[r].value;
    const Value& g = *root_gradient;
    // (Compared in place: a steady training loop allocates nothing.)
    const auto& g_dims = stored(g).shape().dims();
    const auto& dims = value.shape.dims();
    bool matches =
        g.dtype() == seed.dtype && !g.is_sparse() &&
        std::equal(g_dims.begin() + ptrdiff_t(leading_axes(g)), g_dims.end(),
                   dims.begin() + (value.dynamic() ? 1 : 0), dims.end()) &&
        (value.dynamic() ? has_sequences_of(g, *value.layout, false) : g.num_sequences() == 1);
    LOOM_CHECK(matches, ShapeError, "root gradient for ", root.describe(), " of sample shape ",
               g.sample_shape().to_string(), " and ", g.num_sequences(),
               " sequence(s) does not match the output's shape ", value.sample_shape().to_string(),
               " and layout");
    if (seeds_in_place(r, g)) {
      root_gradient_ = stored(g);  // kept: gradient_value(root) reads it after backward
      seed.data = const_cast<void*>(root_gradient_->raw_data());
    } else if (value.dynamic()) {
      pack_dense(g, *value.layout, seed.data);
    } else {
      std::memcpy(seed.data, stored(g).raw_data(), seed.size() * size_of(seed.dtype));
    }
  } else {
    dispatch(seed.dtype, [&](auto zero) {
      using T = decltype(zero);
      std::fill_n(seed.ptr<T>(), seed.size(), T(1));
    });
  }
  slots_[r].grad_written = true;
  for (size_t k = nodes_.size(); k-- > 0;) {
    Node& node = nodes_[k];
    if (node.loop != kNoLoop) {
      const Loop& loop = loops_[node.loop];
      backward_loop(loop);
      k = loop.begin;
    } else if (gradient_reached(node)) {
      const FunctionImpl& f = *node.fn;
      OpCall call = whole_call(node, true);
      auto run = [&] {
        for (size_t i = 0; i < node.inputs.size(); ++i) {
          Slot& in = slots_[node.inputs[i]];
          if (!node.gradient_wanted[i]) continue;
          LOOM_CHECK(!in.value.is_sparse(), ArgumentError, "gradient of sparse input ",
                     leaf_vars_[node.inputs[i]].describe(), " is not supported");
          bool accumulate = in.grad_written;
          Tensor& g = accumulate ? in.grad : gradient_tensor(node.inputs[i]);
          f.op->backward(call, i, g, accumulate);
          in.grad_written = true;
        }
      };
      if (!observe_) [[likely]] {
        run();
      } else {
        observe_backward(node, run);
      }
    }
    finish_gradients(k, ready);
  }
  finish_gradients(nodes_.size(), ready);
}

const Tensor& Executor::tensor(const Variable& v) const {
  LOOM_CHECK(forward_done_, StateError, "no value before forward");
  return slots_[slot_of(v)].value;
}

Value Executor::output_value(const Variable& v) const {
  const Tensor& t = tensor(v);
  LOOM_CHECK(!t.is_sparse(), StateError, "output_value of sparse ", v.describe());
  LOOM_CHECK(!t.blocked, StateError, v.describe(),
             " is held in oneDNN's blocked layout: compute it as an output to read it");
  return to_value(t, v.has_sequence_axis());
}

double Executor::sum(const Variable& v) const {
  const Tensor& t = tensor(v);  // a sum does not depend on the layout
  return dispatch(t.dtype, [&](auto zero) {
    using T = decltype(zero);
    double s = 0;
    const T* d = t.ptr<T>();
    for (size_t i = 0, n = t.size(); i < n; ++i) s += double(d[i]);
    return s;
  });
}

size_t Executor::sample_count(const Variable& v) const {
  return tensor(v).rows();
}

NDArrayView Executor::parameter_gradient(const Variable& parameter) const {
  auto it = param_grads_.find(parameter);
  LOOM_CHECK(it != param_grads_.end(), ArgumentError, "no gradient was requested for ",
             parameter.describe());
  return it->second;
}

Value Executor::gradient_value(const Variable& v) const {
  const Slot& slot = slots_[slot_of(v)];
  LOOM_CHECK(slot.needs_grad, ArgumentError, "no gradient was requested for ", v.describe());
  if (v.is_parameter()) {
    NDArrayView g = parameter_gradient(v).deep_clone();
    return Value(g.reshaped(g.shape().prepend(1)), false);
  }
  LOOM_CHECK(slot.grad_written, StateError, v.describe(), " received no gradient");
  return to_value(slot.grad, v.has_sequence_axis());
}

}  // namespace loom
