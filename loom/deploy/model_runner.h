// ModelRunner: a loaded model evaluated from many threads at once, as CNTK's C++ evaluation
// examples (CNTKLibraryCPPEvalExamples: EvalMultithreads) did with a clone per thread. One
// ModelRunner holds the model's graph and parameters once; each call borrows an Executor from a
// pool (created on first need, planned once, reused), so concurrent calls share the parameters,
// never re-plan, and need no lock while they compute.
//
//   ModelRunner runner("mnist.cmf");
//   for (const Variable& a : runner.arguments()) std::cout << a.describe() << "\n";
//   Value scores = runner.evaluate(image);  // from any thread
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom/graph/function.h"

namespace loom {

class ModelRunner {
 public:
  // Loads a model file (load_model: a DataError for a damaged or foreign file).
  explicit ModelRunner(const std::string& path);
  // A model already in memory. Its parameters must not change while calls run.
  explicit ModelRunner(Function model);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  const Function& function() const { return model_; }
  // The inputs the model takes and the outputs it computes, in the model's order.
  const std::vector<Variable>& arguments() const { return arguments_; }
  const std::vector<Variable>& outputs() const { return outputs_; }
  // The argument of that name (Function::argument); ArgumentError listing them.
  Variable argument(const std::string& name) const { return model_.argument(name); }

  // Every output's value for a batch of samples or sequences (inference mode). Thread safe.
  // A batch (a Value without a sequence axis) given to an argument with one is read as
  // sequences of one step each, as CNTK's evaluation read Value::CreateBatch's values. Calls
  // keep no state between them: for a model with recurrence, a sequence continued from an
  // earlier call (a false start flag) is an ArgumentError.
  ValueMap evaluate(const ValueMap& arguments) const;
  // The values of the chosen outputs, each an output of any function of the model's graph (as
  // CNTK's Evaluate took): only what they need is computed and only the arguments they need
  // are read (values given for others are ignored). Planned once per set of outputs and kept.
  // Thread safe. An ArgumentError for a variable the graph does not compute.
  ValueMap evaluate(const ValueMap& arguments, const std::vector<Variable>& outputs) const;
  // The arguments those outputs need, in the model's order.
  const std::vector<Variable>& arguments(const std::vector<Variable>& outputs) const;
  // A one-argument, one-output model on data (Function::eval's forms). Thread safe.
  Value evaluate(const ArgumentData& data) const;
  // The single output with the arguments' data by name. Thread safe.
  Value evaluate(const Function::NamedData& data) const;

  // Executors alive, over every set of outputs: for each set, the most calls that ran at once
  // (a call that failed drops its executor, and so does one whose arguments held more than
  // kLargeCallBytes: its buffers are returned rather than kept for the next call).
  static constexpr size_t kLargeCallBytes = size_t(8) << 20;
  size_t executors() const;

 private:
  // What the calls for one set of outputs share: their arguments and idle executors.
  struct Plan {
    std::vector<Variable> outputs, arguments;
    bool recurrent = false;  // past/future values or a fused recurrence: state across steps
    std::vector<std::unique_ptr<Executor>> idle;
  };
  Plan* new_plan(std::vector<Variable> outputs, std::vector<Variable> arguments) const;
  Plan& plan_for(const std::vector<Variable>& outputs) const;
  ValueMap run(Plan& plan, const ValueMap& arguments) const;
  std::unique_ptr<Executor> acquire(Plan& plan) const;
  void release(Plan& plan, std::unique_ptr<Executor> executor) const;
  Value single_output(const ValueMap& values) const;

  Function model_;
  std::vector<Variable> arguments_, outputs_;
  mutable std::mutex mutex_;
  // By the outputs' set (sorted, distinct); the model's own outputs are planned at construction.
  mutable std::map<std::vector<Variable>, std::unique_ptr<Plan>> plans_;
  Plan* all_ = nullptr;
  mutable size_t alive_ = 0;
};

}  // namespace loom
