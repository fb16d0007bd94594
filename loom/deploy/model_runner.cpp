#include "loom/deploy/model_runner.h"

#include <algorithm>

#include "loom/graph/executor.h"
#include "loom/serialize/model_file.h"

namespace loom {

ModelRunner::ModelRunner(const std::string& path) : ModelRunner(load_model(path)) {}

ModelRunner::ModelRunner(Function model)
    : model_(std::move(model)), arguments_(model_.arguments()), outputs_(model_.outputs()) {
  // Plans once now, so that a model that cannot run fails here rather than in the first call.
  idle_.push_back(std::make_unique<Executor>(outputs_));
  alive_ = 1;
}

ModelRunner::~ModelRunner() = default;

std::unique_ptr<Executor> ModelRunner::acquire() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<Executor> e = std::move(idle_.back());
      idle_.pop_back();
      return e;
    }
    ++alive_;
  }
  // Planning reads the graph only, so it runs outside the lock.
  return std::make_unique<Executor>(outputs_);
}

void ModelRunner::release(std::unique_ptr<Executor> executor) const {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(std::move(executor));
}

size_t ModelRunner::executors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return alive_;
}

namespace {
// CNTK's evaluation read a batch given to an argument with a sequence axis (Value::CreateBatch's
// value) as sequences of one step each: [N, shape] is [N, 1, shape].
ValueMap batches_as_sequences(const ValueMap& arguments) {
  ValueMap bound = arguments;
  for (auto& [argument, value] : bound) {
    const NDShape& shape = value.data().shape();
    if (argument.has_sequence_axis() && !value.is_sequence() && shape.rank() > 0)
      value = Value(value.data().reshaped(shape.sub_shape(1).prepend(1).prepend(shape[0])), true);
  }
  return bound;
}
}  // namespace

ValueMap ModelRunner::evaluate(const ValueMap& arguments) const {
  const bool batch_for_sequence = std::ranges::any_of(arguments, [](const auto& entry) {
    return entry.first.has_sequence_axis() && !entry.second.is_sequence();
  });
  std::unique_ptr<Executor> executor = acquire();
  ValueMap result;
  try {
    executor->forward(batch_for_sequence ? batches_as_sequences(arguments) : arguments,
                      /*is_training=*/false);
    for (const Variable& o : outputs_) result.emplace(o, executor->output_value(o));
  } catch (...) {
    // An executor that failed part-way is not reused.
    std::lock_guard<std::mutex> lock(mutex_);
    --alive_;
    throw;
  }
  release(std::move(executor));
  return result;
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
