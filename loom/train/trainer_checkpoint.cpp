// Trainer::save_checkpoint / restore_from_checkpoint. A checkpoint is a container file
// (docs/file-format.md) with the training graph (a model, so load_model reads it) and a
// training-state section. Restoring matches the saved graph to the trainer's by position:
// the same program builds the same graph, while uids may differ between processes.
#include <string>
#include <unordered_set>

#include "loom/distributed/distributed_learner.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/random_state.h"
#include "loom/serialize/container.h"
#include "loom/serialize/dictionary_codec.h"
#include "loom/serialize/model_file.h"
#include "loom/train/trainer.h"

namespace loom {

namespace {

constexpr int64_t kTrainingStateVersion = 1;

}  // namespace

Function Trainer::training_graph() const {
  std::vector<Variable> roots;
  std::unordered_set<Variable> seen;
  auto add = [&](const Variable& v) {
    if (v.valid() && seen.insert(v).second) roots.push_back(v);
  };
  if (model_.valid())
    for (const Variable& o : model_.outputs()) add(o);
  add(loss_);
  add(metric_);
  return combine(roots, "TrainingGraph");
}

void Trainer::save_checkpoint(const std::string& path, const Dictionary& external_state) const {
  const Function graph = training_graph();
  Dictionary state;
  state["version"] = kTrainingStateVersion;
  state["total_samples"] = uint64_t(total_samples_);
  state["previous_samples"] = uint64_t(previous_samples_);
  state["previous_loss_sum"] = previous_loss_sum_;
  state["previous_metric_sum"] = previous_metric_sum_;
  // The random ops' generators are part of the graph (model_to_dictionary keeps them).
  DictionaryVector learners, writers;
  // The learners' live state, not copies: it is written out before anything changes it.
  for (const auto& l : learners_) learners.emplace_back(l->checkpoint_for_writing());
  for (const auto& w : writers_) writers.emplace_back(w->get_checkpoint_state());
  state["learners"] = std::move(learners);
  state["progress_writers"] = std::move(writers);
  state["external_state"] = external_state;
  state["compute_precision"] = to_string(compute_precision());

  // The model's outputs come first in the training graph (load_model reads them alone).
  size_t model_outputs = 0;
  if (model_.valid())
    for (const Variable& o : model_.outputs())
      if (o != loss_ && o != metric_) ++model_outputs;
  ContainerWriter file = model_container(graph, ContentKind::Checkpoint, model_outputs);
  file.add_dictionary_section(SectionKind::TrainingState, std::move(state));
  if (is_main_worker()) file.write_file(path);
  // The others wait for it, so that a worker may read what the main one wrote.
  if (distributed_) distributed_->communicator()->barrier();
}

size_t Trainer::checkpoint_samples(const std::string& path) {
  const MappedFile mapped(path);
  ContainerReader file(mapped.bytes(), path);
  file.expect_content(ContentKind::Checkpoint);
  const Section& section = file.require(SectionKind::TrainingState);
  const std::string where = file.where(section);
  const Dictionary state =
      decode_dictionary_views(section.payload, where, section.offset, mapped.owner());
  try {
    return size_t(state.get<uint64_t>("total_samples"));
  } catch (const Error& e) {
    throw DataError(where + ": " + e.what());
  }
}

Dictionary Trainer::restore_from_checkpoint(
    const std::string& path, const std::function<void(const Dictionary&)>& check_external) {
  // 1. Read and check everything: container CRCs, the graph (loaded as a model, which
  //    validates it fully), its match with ours, and the state's structure.
  //    The file is mapped, and its tensors are decoded as views of the mapping: the only copy
  //    of a value is the one into the trainer, after every check passed.
  const MappedFile mapped(path);
  ContainerReader file(mapped.bytes(), path);
  file.expect_content(ContentKind::Checkpoint);
  const SectionKind known[] = {SectionKind::Metadata, SectionKind::Graph,
                               SectionKind::TrainingState};
  file.reject_unknown_required(known);
  const Function saved = graph_of(file, mapped.owner());
  const Function current = training_graph();
  check_same_graph(saved, current, path);

  const Section& section = file.require(SectionKind::TrainingState);
  const std::string where = file.where(section);
  const Dictionary state =
      decode_dictionary_views(section.payload, where, section.offset, mapped.owner());
  auto fail = [&](const std::string& what) -> Dictionary { throw DataError(where + ": " + what); };
  Dictionary external;
  uint64_t total_samples = 0, previous_samples = 0;
  double previous_loss_sum = 0, previous_metric_sum = 0;
  std::optional<ComputePrecision> precision;  // files before it was saved: none
  const DictionaryVector *learners = nullptr, *writers = nullptr;
  try {
    const int64_t version = state.get<int64_t>("version");
    if (version < 1 || version > kTrainingStateVersion)
      fail("training state version " + std::to_string(version) +
           " is not one this Loom reads (1 to " + std::to_string(kTrainingStateVersion) + ")");
    total_samples = state.get<uint64_t>("total_samples");
    previous_samples = state.get<uint64_t>("previous_samples");
    previous_loss_sum = state.get<double>("previous_loss_sum");
    previous_metric_sum = state.get<double>("previous_metric_sum");
    learners = &state.get<DictionaryVector>("learners");
    writers = &state.get<DictionaryVector>("progress_writers");
    external = with_own_tensors(state.get_dictionary("external_state"));
    if (state.contains("compute_precision")) {
      const std::string& p = state.get<std::string>("compute_precision");
      if (p != to_string(ComputePrecision::Float32) && p != to_string(ComputePrecision::BFloat16))
        fail("compute_precision '" + p + "' is neither 'float32' nor 'bf16'");
      precision = p == to_string(ComputePrecision::BFloat16) ? ComputePrecision::BFloat16
                                                             : ComputePrecision::Float32;
    }
  } catch (const DataError&) {
    throw;
  } catch (const Error& e) {
    fail(e.what());
  }
  LOOM_CHECK(learners->size() == learners_.size(), StateError, "checkpoint '", path, "' holds ",
             learners->size(), " learners; the trainer has ", learners_.size());
  LOOM_CHECK(writers->size() == writers_.size(), StateError, "checkpoint '", path, "' holds ",
             writers->size(), " progress writers; the trainer has ", writers_.size());
  if (check_external) check_external(external);

  // 2. Restore the parts that can still refuse (learners and writers check their own
  //    state); on a refusal, put back what was already restored.
  std::vector<Dictionary> learner_backup, writer_backup;
  for (const auto& w : writers_) writer_backup.push_back(w->get_checkpoint_state());
  // One learner checks its state fully before it changes; only several need a backup.
  if (learners_.size() > 1)
    for (const auto& l : learners_) learner_backup.push_back(l->create_checkpoint());
  size_t learners_done = 0, writers_done = 0;
  try {
    for (; writers_done < writers_.size(); ++writers_done)
      writers_[writers_done]->restore_from_checkpoint(
          with_own_tensors(Dictionary((*writers)[writers_done].get<DictionaryMap>())));
    for (; learners_done < learners_.size(); ++learners_done) {
      Learner& learner = *learners_[learners_done];
      Dictionary d((*learners)[learners_done].get<DictionaryMap>());
      // The built-in learners copy the state out of the views; another learner may keep
      // what it is given, so it gets tensors of its own.
      learner.restore_from_checkpoint(dynamic_cast<LearnerBase*>(&learner) ? d
                                                                           : with_own_tensors(d));
    }
  } catch (const Error& e) {
    for (size_t i = 0; i < writers_done; ++i)
      writers_[i]->restore_from_checkpoint(writer_backup[i]);
    for (size_t i = 0; i < learners_done && !learner_backup.empty(); ++i)
      learners_[i]->restore_from_checkpoint(learner_backup[i]);
    throw StateError("checkpoint '" + path + "': " + e.what());
  }

  // 3. What cannot fail any more: values, generators, counters.
  copy_leaf_values(saved, current);
  // The same primitives in the same order (checked above): the same random ops.
  const auto saved_random = random_functions(saved);
  const auto current_random = random_functions(current);
  for (size_t i = 0; i < current_random.size(); ++i)
    current_random[i]->random = saved_random[i]->random;
  total_samples_ = size_t(total_samples);
  synced_samples_ = total_samples_;  // a checkpoint ends a block: the workers are in sync
  previous_samples_ = size_t(previous_samples);
  previous_loss_sum_ = previous_loss_sum;
  previous_metric_sum_ = previous_metric_sum;
  if (precision) set_compute_precision(*precision);
  return external;
}

}  // namespace loom
