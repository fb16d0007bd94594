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
  // sequences of one step each, as CNTK's evaluation read Value::CreateBatch's values.
  ValueMap evaluate(const ValueMap& arguments) const;
  // A one-argument, one-output model on data (Function::eval's forms). Thread safe.
  Value evaluate(const ArgumentData& data) const;
  // The single output with the arguments' data by name. Thread safe.
  Value evaluate(const Function::NamedData& data) const;

  // Executors alive: the most calls that ran at once (a call that failed drops its executor).
  size_t executors() const;

 private:
  std::unique_ptr<Executor> acquire() const;
  void release(std::unique_ptr<Executor> executor) const;
  Value single_output(const ValueMap& values) const;

  Function model_;
  std::vector<Variable> arguments_, outputs_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Executor>> idle_;
  mutable size_t alive_ = 0;
};

}  // namespace loom
