#include "loom/deploy/model_runner.h"

#include <algorithm>

#include "loom/graph/executor.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/graph_walk.h"
#include "loom/ops/fused_rnn.h"
#include "loom/serialize/model_file.h"

namespace loom {

namespace {
std::vector<Variable> sorted_set(std::vector<Variable> variables) {
  std::sort(variables.begin(), variables.end());
  variables.erase(std::unique(variables.begin(), variables.end()), variables.end());
  return variables;
}
}  // namespace

ModelRunner::ModelRunner(const std::string& path) : ModelRunner(load_model(path)) {}

ModelRunner::ModelRunner(Function model)
    : model_(std::move(model)), arguments_(model_.arguments()), outputs_(model_.outputs()) {
  all_ = new_plan(outputs_, arguments_);
  // Plans once now, so that a model that cannot run fails here rather than in the first call.
  all_->idle.push_back(std::make_unique<Executor>(outputs_));
  alive_ = 1;
}

ModelRunner::~ModelRunner() = default;

// Called with mutex_ held (or from the constructor).
ModelRunner::Plan* ModelRunner::new_plan(std::vector<Variable> outputs,
                                         std::vector<Variable> arguments) const {
  auto plan = std::make_unique<Plan>();
  plan->recurrent = std::ranges::any_of(topological_order(outputs), [](const auto& f) {
    return is_delay(*f) || is_fused_recurrence(*f);
  });
  plan->outputs = std::move(outputs);
  plan->arguments = std::move(arguments);
  std::unique_ptr<Plan>& slot = plans_[sorted_set(plan->outputs)];
  slot = std::move(plan);
  return slot.get();
}

ModelRunner::Plan& ModelRunner::plan_for(const std::vector<Variable>& outputs) const {
  if (outputs == outputs_) return *all_;  // the model's own outputs, in order: no look-up
  const std::vector<Variable> key = sorted_set(outputs);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  LOOM_CHECK(!key.empty(), ArgumentError, "no output chosen of ", model_.to_string());
  const std::vector<Variable> computed = sorted_set(node_outputs(model_));
  for (const Variable& o : key)
    LOOM_CHECK(std::binary_search(computed.begin(), computed.end(), o), ArgumentError, o.describe(),
               " is not an output of ", model_.to_string(), " nor of a function of its graph");
  const std::vector<Variable> needed = sorted_set(combine(key).arguments());
  std::vector<Variable> arguments;
  for (const Variable& a : arguments_)
    if (std::binary_search(needed.begin(), needed.end(), a)) arguments.push_back(a);
  return *new_plan(key, std::move(arguments));
}

std::unique_ptr<Executor> ModelRunner::acquire(Plan& plan) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!plan.idle.empty()) {
      std::unique_ptr<Executor> e = std::move(plan.idle.back());
      plan.idle.pop_back();
      return e;
    }
    ++alive_;
  }
  // Planning reads the graph only, so it runs outside the lock.
  try {
    return std::make_unique<Executor>(plan.outputs);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    --alive_;
    throw;
  }
}

void ModelRunner::release(Plan& plan, std::unique_ptr<Executor> executor) const {
  std::lock_guard<std::mutex> lock(mutex_);
  plan.idle.push_back(std::move(executor));
}

size_t ModelRunner::executors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return alive_;
}

const std::vector<Variable>& ModelRunner::arguments(const std::vector<Variable>& outputs) const {
  return plan_for(outputs).arguments;
}

namespace {
// CNTK's evaluation read a batch given to an argument with a sequence axis (Value::CreateBatch's
// value) as sequences of one step each: [N, shape] is [N, 1, shape].
ValueMap batches_as_sequences(const ValueMap& arguments) {
  ValueMap bound = arguments;
  for (auto& [argument, value] : bound) {
    if (!argument.has_sequence_axis() || value.is_sequence()) continue;
    const NDShape& shape = value.data().shape();
    if (shape.rank() > 0)
      value = Value(value.data().reshaped(shape.sub_shape(1).prepend(1).prepend(shape[0])), true);
  }
  return bound;
}
}  // namespace

ValueMap ModelRunner::run(Plan& plan, const ValueMap& arguments) const {
  // Calls share executors, so no state is kept from one call to the next.
  for (const auto& [argument, value] : arguments)
    if (plan.recurrent && value.is_sequence())
      for (size_t s = 0; s < value.num_sequences(); ++s)
        LOOM_CHECK(value.begins_sequence(s), ArgumentError, "sequence ", s, " of ",
                   argument.describe(),
                   " continues one from an earlier call (its start flag is false): ModelRunner "
                   "evaluates each call on its own, so give each sequence whole");
  const bool batch_for_sequence = std::ranges::any_of(arguments, [](const auto& entry) {
    return entry.first.has_sequence_axis() && !entry.second.is_sequence();
  });
  std::unique_ptr<Executor> executor = acquire(plan);
  size_t argument_bytes = 0;
  for (const auto& [argument, value] : arguments) {
    // A packed Value's rows (its padded form is not made: the executor reads the rows).
    const NDArrayView& data = value.is_packed() ? value.packed_rows() : value.data();
    argument_bytes += (data.is_sparse() ? data.nnz() : data.size()) * size_of(data.dtype());
  }
  ValueMap result;
  try {
    executor->forward(batch_for_sequence ? batches_as_sequences(arguments) : arguments,
                      /*is_training=*/false);
    for (const Variable& o : plan.outputs) result.emplace(o, executor->output_value(o));
  } catch (...) {
    // An executor that failed part-way is not reused.
    std::lock_guard<std::mutex> lock(mutex_);
    --alive_;
    throw;
  }
  // An executor's buffers grow to the largest call it served: one that served a large call is
  // freed, not kept, so a burst of large requests leaves no memory behind (planning again costs
  // far less than evaluating such a call).
  if (argument_bytes > kLargeCallBytes) {
    executor.reset();
    std::lock_guard<std::mutex> lock(mutex_);
    --alive_;
  } else {
    release(plan, std::move(executor));
  }
  return result;
}

ValueMap ModelRunner::evaluate(const ValueMap& arguments) const {
  return run(*all_, arguments);
}

ValueMap ModelRunner::evaluate(const ValueMap& arguments,
                               const std::vector<Variable>& outputs) const {
  return run(plan_for(outputs), arguments);
}

Value ModelRunner::single_output(const ValueMap& values) const {
  LOOM_CHECK(outputs_.size() == 1, ArgumentError, model_.to_string(), " has ", outputs_.size(),
             " outputs: evaluate(ValueMap) gives them all");
  return values.at(outputs_[0]);
}

Value ModelRunner::evaluate(const ArgumentData& data) const {
  LOOM_CHECK(arguments_.size() == 1, ArgumentError, model_.to_string(), " takes ",
             arguments_.size(), " arguments: give their data by name");
  return single_output(evaluate(ValueMap{{arguments_[0], data.to_value(arguments_[0])}}));
}

Value ModelRunner::evaluate(const Function::NamedData& data) const {
  ValueMap values;
  for (const auto& [name, d] : data) {
    const Variable a = model_.argument(name);
    values.insert_or_assign(a, d.to_value(a));
  }
  return single_output(evaluate(values));
}

}  // namespace loom
