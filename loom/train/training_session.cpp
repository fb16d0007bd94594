#include "loom/train/training_session.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <limits>
#include <set>

#include "loom/core/error.h"
#include "loom/core/trace.h"
#include "loom/distributed/distributed_learner.h"
#include "loom/graph/debugging.h"

namespace loom {

namespace {

constexpr int64_t kSessionStateVersion = 2;
constexpr size_t kOnlyAtEnd = std::numeric_limits<size_t>::max();

// Keys of the checkpoint's external state (CNTK's "TrainingMinibatchSource", Loom's others).
constexpr const char* kSourceKey = "TrainingMinibatchSource";
constexpr const char* kSessionKey = "TrainingSession";
constexpr const char* kPolicyKey = "CheckpointPolicy";
constexpr const char* kUserKey = "User";

std::chrono::nanoseconds steady_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch());
}

// A line on stderr, written at once so that lines of several workers do not interleave.
void say(const std::string& line) {
  std::cerr << line + "\n";
}

Frequency checked(const std::optional<Frequency>& f, const char* what) {
  LOOM_CHECK(!f || f->count > 0, ArgumentError, "training_session: ", what,
             " must be positive (leave it unset for once at the end)");
  return f ? *f : Frequency(kOnlyAtEnd);
}

}  // namespace

DataSource::DataSource(std::shared_ptr<MinibatchSourceInterface> source, int)
    : source_(std::move(source)) {
  LOOM_CHECK(source_, ArgumentError, "DataSource: the minibatch source is null");
}

BoundSource bind_data(const DataSource& data, const Function& criterion, const InputMap& input_map,
                      const std::vector<std::string>& streams, size_t max_sweeps) {
  LOOM_CHECK(!data.empty(), ArgumentError, "no data given");
  const std::vector<Variable> args = criterion.arguments();
  BoundSource bound;
  if (data.in_memory()) {
    LOOM_CHECK(input_map.empty() && streams.empty(), ArgumentError,
               "in-memory data are matched to the arguments by position; do not give streams "
               "or model_inputs_to_streams");
    LOOM_CHECK(data.arrays().size() == args.size(), ArgumentError, "got ", data.arrays().size(),
               " arrays for the ", args.size(), " arguments of ", criterion.to_string());
    DataStreams named;
    std::set<std::string> seen;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string name = args[i].name();
      if (name.empty() || !seen.insert(name).second) name = "argument" + std::to_string(i);
      named.emplace_back(name, data.arrays()[i]);
    }
    // CNTK's MinibatchSourceFromData reads in order.
    auto source = std::make_shared<MinibatchSource>(
        MinibatchSourceFromData(named, {.randomize = false, .max_sweeps = max_sweeps}));
    // A sweep in the Trainer's samples, the loss's (CNTK's label samples): those of the first
    // argument on the loss's dynamic axes (the labels), else the source's.
    bound.samples_per_sweep = source->samples_per_sweep();
    const std::vector<Axis> loss_axes = criterion.outputs()[0].dynamic_axes();
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].dynamic_axes() == loss_axes) {
        bound.samples_per_sweep = data.arrays()[i].value.number_of_samples();
        break;
      }
    bound.source = std::move(source);
    for (size_t i = 0; i < args.size(); ++i)
      bound.input_map.emplace(args[i], (*bound.source)[named[i].first]);
    return bound;
  }
  bound.source = data.source();
  if (!input_map.empty()) {
    bound.input_map = input_map;
  } else if (!streams.empty()) {
    LOOM_CHECK(streams.size() == args.size(), ArgumentError, "got ", streams.size(),
               " stream names for the ", args.size(), " arguments of ", criterion.to_string());
    for (size_t i = 0; i < args.size(); ++i)
      bound.input_map.emplace(args[i], (*bound.source)[streams[i]]);
  } else {
    for (const Variable& arg : args) {
      LOOM_CHECK(!arg.name().empty(), ArgumentError, "an argument of ", criterion.to_string(),
                 " has no name to find its stream by; give streams or model_inputs_to_streams");
      bound.input_map.emplace(arg, (*bound.source)[arg.name()]);
    }
  }
  return bound;
}

void SummaryCollector::on_write_training_update(const ProgressWindow& w) {
  Entry e;
  e.samples = w.samples.second - w.samples.first;
  e.updates = w.updates.second - w.updates.first;
  const double n = double(e.samples);
  if (w.loss) e.loss = (w.loss->second - w.loss->first) / n;
  if (w.metric) e.metric = (w.metric->second - w.metric->first) / n;
  training_updates.push_back(e);
}

void SummaryCollector::on_write_training_summary(const ProgressSummary& s) {
  const double n = double(std::max<size_t>(s.samples, 1));
  training_summaries.push_back({s.loss.value_or(0) / n,
                                s.metric ? std::optional<double>(*s.metric / n) : std::nullopt,
                                s.samples, s.updates});
}

void SummaryCollector::on_write_test_summary(const ProgressSummary& s) {
  const double n = double(std::max<size_t>(s.samples, 1));
  test_summaries.push_back({0, s.metric.value_or(0) / n, s.samples, s.updates});
}

TrainingSession::TrainingSession(TrainingSessionConfig config)
    : config_(std::move(config)), policy_(config_.checkpoint_config) {
  LOOM_CHECK(config_.trainer, ArgumentError, "training_session: no trainer given");
  LOOM_CHECK(config_.mb_source, ArgumentError, "training_session: no minibatch source given");
  LOOM_CHECK(!config_.model_inputs_to_streams.empty(), ArgumentError,
             "training_session: model_inputs_to_streams is empty");
  // CNTK refuses a session that would train forever.
  LOOM_CHECK(config_.max_samples || config_.max_sweeps || !config_.mb_source->is_infinite(),
             ArgumentError,
             "training_session: the training minibatch source never ends (its max_samples and "
             "max_sweeps are INFINITELY_REPEAT) and the session has no max_samples or max_sweeps; "
             "set max_samples (or max_sweeps) on the session, or on the source");
  // ... or evaluate forever (in-memory data are read for one sweep).
  const auto& cv_source = config_.cv_config.source.source();
  LOOM_CHECK(
      !cv_source || !cv_source->is_infinite() || config_.cv_config.max_samples != INFINITELY_REPEAT,
      ArgumentError,
      "training_session: the cross-validation minibatch source never ends and "
      "cv_config.max_samples is not set; set it, or max_samples or max_sweeps on the source");
  const auto& test_source = config_.test_config.source.source();
  LOOM_CHECK(!test_source || !test_source->is_infinite(), ArgumentError,
             "training_session: the test minibatch source never ends; set max_samples or "
             "max_sweeps on it");
  if (!config_.clock) config_.clock = steady_now;
  train_data_ = {config_.mb_source, config_.model_inputs_to_streams};

  Trainer& trainer = *config_.trainer;
  const bool has_metric = trainer.evaluation_function().valid();
  const Variable metric = has_metric ? trainer.evaluation_function() : trainer.loss_function();
  // In-memory CV and test data follow the criterion's arguments.
  const Function criterion =
      combine(has_metric ? std::vector<Variable>{trainer.loss_function(), metric}
                         : std::vector<Variable>{metric});
  auto evaluator_for = [&](std::shared_ptr<SummaryCollector>& collector) {
    collector = std::make_shared<SummaryCollector>();
    ProgressWriters writers = trainer.progress_writers();
    writers.push_back(collector);
    return std::make_unique<Evaluator>(metric, std::move(writers), evaluation_workers());
  };

  const CrossValidationConfig& cv = config_.cv_config;
  if (!cv.source.empty()) {
    cv_data_ = bind_data(cv.source, cv.criterion.valid() ? cv.criterion : criterion,
                         cv.model_inputs_to_streams, {}, /*max_sweeps=*/1);
    cv_evaluator_ = evaluator_for(cv_collector_);
  }
  const TestConfig& test = config_.test_config;
  if (!test.source.empty()) {
    test_data_ = bind_data(test.source, test.criterion.valid() ? test.criterion : criterion,
                           test.model_inputs_to_streams, {}, /*max_sweeps=*/1);
    test_evaluator_ = evaluator_for(test_collector_);
  }

  // The order of a step's actions (CNTK checkpoints first; see docs/decisions.md).
  actions_.push_back(
      {ActionKind::progress, checked(config_.progress_frequency, "progress_frequency")});
  if (!cv.source.empty() || cv.callback)
    actions_.push_back(
        {ActionKind::cross_validation, checked(cv.frequency, "the cross-validation frequency")});
  if (policy_.enabled())
    actions_.push_back({ActionKind::checkpoint,
                        checked(config_.checkpoint_config.frequency, "the checkpoint frequency")});
}

bool TrainingSession::run(Action& action) {
  // The action counts as done before it runs, so the checkpoint records itself as done.
  const size_t index = action.current_index;
  const size_t units = units_seen(action.frequency.unit);
  action.current_index = units / action.frequency.count;
  action.units_when_last_called = units;
  switch (action.kind) {
    case ActionKind::checkpoint:
      return save_checkpoint(index);
    case ActionKind::progress:
      config_.trainer->summarize_training_progress();
      return true;
    case ActionKind::cross_validation:
      return cross_validate(index);
  }
  return true;
}

bool TrainingSession::partitioned() const {
  const auto& distributed = config_.trainer->distributed_learner();
  return distributed && samples_seen() >= distributed->parallelization_after();
}

MinibatchMap TrainingSession::next_training_minibatch(size_t mb_size) {
  // Each worker reads its share of a global minibatch once the learner communicates; before
  // that (warm start) every worker reads the whole minibatch and takes the same step.
  if (!partitioned()) return train_data_.source->next_minibatch(mb_size, train_data_.input_map);
  const auto& communicator = config_.trainer->distributed_learner()->communicator();
  return train_data_.source->next_minibatch(mb_size, train_data_.input_map,
                                            communicator->num_workers(), communicator->rank());
}

std::shared_ptr<distributed::Communicator> TrainingSession::evaluation_workers() const {
  const auto& distributed = config_.trainer->distributed_learner();
  return distributed ? distributed->communicator() : nullptr;
}

size_t TrainingSession::elapsed_ms() const {
  const auto now = config_.clock() - start_;
  return restored_elapsed_ms_ +
         size_t(std::max<int64_t>(
             std::chrono::duration_cast<std::chrono::milliseconds>(now).count(), 0));
}

size_t TrainingSession::samples_seen() const {
  // Every worker must take the same decisions (minibatch sizes, actions, the end), so in
  // distributed training the count is the source's global position, the same on every worker.
  if (config_.trainer->distributed_learner())
    if (const std::optional<size_t> position = train_data_.source->position()) return *position;
  return config_.trainer->total_number_of_samples_seen();
}

size_t TrainingSession::units_seen(DataUnit unit) const {
  const Learner& learner = *config_.trainer->parameter_learners().front();
  switch (unit) {
    case DataUnit::sample:
      return samples_seen();
    case DataUnit::minibatch:
      return learner.total_number_of_minibatches_seen();
    case DataUnit::sweep:
      return learner.total_number_of_sweeps_seen();
    case DataUnit::second:
      return elapsed_ms() / 1000;
  }
  return 0;
}

bool TrainingSession::due(const Action& a) const {
  const size_t units = units_seen(a.frequency.unit);
  if (finishing_) return units % a.frequency.count != 0 && units != a.units_when_last_called;
  return units / a.frequency.count != a.current_index;
}

void TrainingSession::train() {
  start_ = config_.clock();
  Trainer& trainer = *config_.trainer;
  if (policy_.enabled() && policy_.config().restore) restore();
  const size_t restored_samples = samples_seen();

  const size_t max_samples = config_.max_samples.value_or(INFINITELY_REPEAT);
  bool should_train = max_samples > 0, early_exit = false;
  while (should_train) {
    const size_t seen = samples_seen();
    const bool done = early_exit || max_samples <= seen ||
                      (config_.max_sweeps && units_seen(DataUnit::sweep) >= *config_.max_sweeps);
    const size_t left = done ? 0 : max_samples - seen;
    const MinibatchSizeSchedule& schedule = config_.mb_size;
    // Block momentum's workers each take a minibatch of the schedule's size (CNTK).
    const size_t scale =
        partitioned() ? trainer.distributed_learner()->minibatch_size_scale_factor() : 1;
    size_t mb_size = std::min(
        schedule.value(schedule.is_sweep_based() ? units_seen(DataUnit::sweep) : seen) * scale,
        left);
    // A minibatch ends at the next sample boundary of an action, so an epoch summary covers
    // exactly its epoch (seed 002 prints "* 54000" for every epoch of 54,000 samples at
    // minibatch sizes 256 to 4096).
    for (const Action& a : actions_)
      if (a.frequency.unit == DataUnit::sample)
        mb_size = std::min(mb_size, a.frequency.count - seen % a.frequency.count);
    MinibatchMap minibatch;
    if (mb_size > 0) minibatch = next_training_minibatch(mb_size);
    should_train = trainer.train_minibatch(minibatch);

    const ProfileScope post(ProfilerEvent::PostProcessing);
    for (Action& a : actions_)
      if (due(a)) early_exit |= !run(a);
  }

  if (restored_samples != samples_seen()) {
    finishing_ = true;
    for (Action& a : actions_)
      if (due(a)) run(a);
    finishing_ = false;
  }
  // Numbered saves end with the final model under the plain name, as CNTK's preserve_all
  // (CNTK keeps an existing one; Loom replaces it when this run trained, so a later resume
  // never starts from an older final model).
  if (policy_.numbered() &&
      (restored_samples != samples_seen() || !std::filesystem::exists(policy_.config().filename)))
    write_checkpoint(policy_.config().filename, policy_.state());
  test();
}

void TrainingSession::restore() {
  // Every checkpoint file of the configuration, newest position first, whatever its name: a
  // finished run continued with a larger max_samples has numbered files newer than `filename`.
  struct Candidate {
    std::string file;
    size_t samples;
  };
  std::vector<Candidate> candidates;
  std::vector<std::string> damaged;
  std::string failures;
  auto failed = [&](const std::string& file, const Error& e) {
    warn("cannot restore from checkpoint '" + file + "': " + e.what());
    failures += "\n  '" + file + "': " + e.what();
    damaged.push_back(file);
  };
  const std::vector<std::string> files = policy_.restore_candidates();
  for (const std::string& file : files) {
    try {
      candidates.push_back({file, Trainer::checkpoint_samples(file)});
    } catch (const Error& e) {
      failed(file, e);
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.samples > b.samples; });
  for (const Candidate& candidate : candidates) {
    // The session's own state is read inside the trainer's checks, so a checkpoint without it
    // (e.g. one a manual loop wrote) is refused before the trainer changes.
    std::optional<SessionState> state;
    try {
      config_.trainer->restore_from_checkpoint(candidate.file, [&](const Dictionary& external) {
        state = read_session_state(external);
      });
    } catch (const Error& e) {
      failed(candidate.file, e);
      continue;
    }
    say("Restoring training session from the checkpoint '" + candidate.file + "'");
    train_data_.source->restore_from_checkpoint(state->source);
    restored_elapsed_ms_ = state->elapsed_ms;
    start_ = config_.clock();
    policy_ = std::move(state->policy);
    // Where each action stood. The checkpoint runs last at its step, so a restore replays none
    // of that step's actions. An action configured anew (another frequency, or none saved)
    // continues from the restored counters, as in CNTK.
    for (Action& action : actions_) {
      const size_t units = units_seen(action.frequency.unit);
      action.current_index = units / action.frequency.count;
      action.units_when_last_called = units - units % action.frequency.count;
      for (const SavedAction& saved : state->actions)
        if (saved.kind == int64_t(action.kind) && saved.unit == int64_t(action.frequency.unit) &&
            saved.count == action.frequency.count) {
          action.current_index = saved.index;
          action.units_when_last_called = saved.units;
        }
    }
    last_cv_ = state->last_cv;
    if (config_.checkpoint_config.restore_state)
      config_.checkpoint_config.restore_state(state->user);
    set_aside(damaged);
    return;
  }
  if (files.empty()) return;
  throw StateError("training_session: none of the checkpoints of '" + policy_.config().filename +
                   "' can be restored; nothing was changed:" + failures +
                   "\nRemove them, or set restore = false to start afresh.");
}

TrainingSession::SessionState TrainingSession::read_session_state(
    const Dictionary& external) const {
  const Dictionary session = external.get_dictionary(kSessionKey);
  LOOM_CHECK(session.get<int64_t>("version") == kSessionStateVersion, StateError,
             "training session state of version ", session.get<int64_t>("version"),
             "; this build reads version ", kSessionStateVersion);
  CheckpointPolicy policy(policy_.config());
  policy.restore(external.get_dictionary(kPolicyKey));
  std::vector<SavedAction> actions;
  for (const DictionaryValue& v : session.get<DictionaryVector>("actions")) {
    const Dictionary a(v.get<DictionaryMap>());
    actions.push_back({a.get<int64_t>("kind"), a.get<int64_t>("unit"), a.get<uint64_t>("count"),
                       a.get<uint64_t>("index"), a.get<uint64_t>("units")});
  }
  std::optional<std::pair<size_t, double>> last_cv;
  if (session.contains("cv_samples"))
    last_cv = {session.get<uint64_t>("cv_samples"), session.get<double>("cv_error")};
  return {external.get_dictionary(kSourceKey),
          session.get<uint64_t>("elapsed_ms"),
          std::move(policy),
          std::move(actions),
          last_cv,
          external.contains(kUserKey) ? external.get_dictionary(kUserKey) : Dictionary()};
}

std::optional<double> TrainingSession::monitored_value() const {
  if (config_.checkpoint_config.monitor) return config_.checkpoint_config.monitor();
  // The cross-validation of the same step, which ran just before.
  if (last_cv_ && last_cv_->first == samples_seen()) return last_cv_->second;
  return std::nullopt;
}

bool TrainingSession::save_checkpoint(size_t index) {
  const std::optional<double> value =
      policy_.ranks_by_value() ? monitored_value() : std::optional<double>();
  const Dictionary planned = policy_.plan_save(index, value);
  write_checkpoint(policy_.file_name(index), planned);
  policy_.commit(index, planned);  // only a saved checkpoint may displace older ones
  return true;
}

void TrainingSession::write_checkpoint(const std::string& file, const Dictionary& policy_state) {
  Dictionary session;
  session["version"] = kSessionStateVersion;
  session["elapsed_ms"] = uint64_t{elapsed_ms()};
  DictionaryVector actions;
  for (const Action& a : actions_) {
    Dictionary d;
    d["kind"] = int64_t(a.kind);
    d["unit"] = int64_t(a.frequency.unit);
    d["count"] = uint64_t{a.frequency.count};
    d["index"] = uint64_t{a.current_index};
    d["units"] = uint64_t{a.units_when_last_called};
    actions.emplace_back(d);
  }
  session["actions"] = std::move(actions);
  if (last_cv_) {
    session["cv_samples"] = uint64_t{last_cv_->first};
    session["cv_error"] = last_cv_->second;
  }
  Dictionary external;
  external[kSourceKey] = train_data_.source->get_checkpoint_state();
  external[kSessionKey] = session;
  external[kPolicyKey] = policy_state;
  if (config_.checkpoint_config.save_state)
    external[kUserKey] = config_.checkpoint_config.save_state();
  const std::filesystem::path parent = std::filesystem::path(file).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  LOOM_CHECK(!ec, IOError, "training_session: cannot create the checkpoint folder '",
             parent.string(), "': ", ec.message());
  config_.trainer->save_checkpoint(file, external);
}

void TrainingSession::set_aside(const std::vector<std::string>& damaged) const {
  if (damaged.empty() || !config_.trainer->is_main_worker()) return;
  std::error_code ec;
  for (const std::string& file : damaged) {
    const std::string aside = file + kDamagedSuffix;
    std::filesystem::rename(file, aside, ec);
    if (ec) {
      warn("cannot move the damaged checkpoint '" + file + "' to '" + aside + "': " + ec.message());
    } else {
      say("Moved the damaged checkpoint '" + file + "' to '" + aside + "'");
      std::filesystem::last_write_time(aside, std::filesystem::file_time_type::clock::now(), ec);
    }
  }
  // Keep the newest kKeptDamaged files set aside for this configuration's checkpoints.
  const std::filesystem::path base(policy_.config().filename);
  const std::filesystem::path dir = base.has_parent_path() ? base.parent_path() : ".";
  const std::string prefix = base.filename().string();
  std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> kept;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    // `<filename>.damaged` or `<filename><index>.damaged`
    const std::string name = entry.path().filename().string();
    const size_t suffix = std::string_view(kDamagedSuffix).size();
    if (name.size() < prefix.size() + suffix || !name.starts_with(prefix) ||
        !name.ends_with(kDamagedSuffix))
      continue;
    const std::string index = name.substr(prefix.size(), name.size() - prefix.size() - suffix);
    if (std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; }))
      kept.emplace_back(entry.last_write_time(ec), entry.path());
  }
  std::sort(kept.begin(), kept.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = kKeptDamaged; i < kept.size(); ++i) {
    std::filesystem::remove(kept[i].second, ec);
    say("Removed the damaged checkpoint '" + kept[i].second.string() + "' (the newest " +
        std::to_string(kKeptDamaged) + " set aside are kept)");
  }
}

SummaryCollector::Entry run_evaluation(const BoundSource& data,
                                       const MinibatchSizeSchedule& mb_size, size_t max_samples,
                                       Evaluator& evaluator, const SummaryCollector& collector,
                                       const std::shared_ptr<distributed::Communicator>& workers) {
  const size_t n_workers = workers ? workers->num_workers() : 1;
  const size_t rank = workers ? workers->rank() : 0;
  // Samples read, over all workers: the source's global position, the same on every worker;
  // for a source without one, the evaluator's counts (summed over workers when distributed).
  const std::optional<size_t> start = data.source->position();
  size_t counted = 0;
  for (;;) {
    const size_t read = start ? *data.source->position() - *start : counted;
    const size_t n = std::min(mb_size.value(read), max_samples <= read ? 0 : max_samples - read);
    if (n == 0) break;
    const MinibatchMap minibatch = data.source->next_minibatch(n, data.input_map, n_workers, rank);
    if (minibatch.empty()) break;  // the source's end, on every worker at once
    evaluator.test_minibatch(minibatch, n_workers > 1);
    counted += evaluator.previous_minibatch_sample_count();
  }
  evaluator.summarize_test_progress();
  return collector.test_summaries.back();
}

SummaryCollector::Entry TrainingSession::validate() {
  // CNTK keeps the training reader's position around the pass too (for BPTT readers).
  const Dictionary train_pos = train_data_.source->get_checkpoint_state();
  const Dictionary cv_pos = cv_data_.source->get_checkpoint_state();
  const SummaryCollector::Entry r =
      run_evaluation(cv_data_, config_.cv_config.minibatch_size, config_.cv_config.max_samples,
                     *cv_evaluator_, *cv_collector_, evaluation_workers());
  cv_data_.source->restore_from_checkpoint(cv_pos);
  train_data_.source->restore_from_checkpoint(train_pos);
  return r;
}

bool TrainingSession::cross_validate(size_t index) {
  if (!cv_data_.source) return on_cross_validation_end(index, 0, 0, 0);
  const SummaryCollector::Entry r = validate();
  last_cv_ = {samples_seen(), r.metric.value_or(0)};
  return on_cross_validation_end(index, r.metric.value_or(0), r.samples, r.updates);
}

bool TrainingSession::on_cross_validation_end(size_t index, double average_error,
                                              size_t num_samples, size_t num_minibatches) {
  const CrossValidationCallback& callback = config_.cv_config.callback;
  return callback ? callback(index, average_error, num_samples, num_minibatches) : true;
}

void TrainingSession::test() {
  if (!test_data_.source) return;
  run_evaluation(test_data_, config_.test_config.minibatch_size, INFINITELY_REPEAT,
                 *test_evaluator_, *test_collector_, evaluation_workers());
}

TrainingSession training_session(TrainingSessionConfig config) {
  return TrainingSession(std::move(config));
}

}  // namespace loom
