// Checkpoint configuration and retention for training_session (CNTK's CheckpointConfig plus
// Loom's strategies: keep the newest N, keep all, keep the best K by a monitored value).
//
// Without any strategy a session overwrites `filename` at every save, as CNTK does. With one,
// save k goes to `filename + str(k)` (CNTK's preserve_all naming) and the policy decides which
// of these files stay. Its bookkeeping (the retained indices and their monitored values) is
// stored inside each checkpoint, so a resumed run keeps honouring it.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/dictionary.h"

namespace loom {

// How an action's schedule is counted: samples, minibatches and sweeps as the trainer's first
// learner counts them (CNTK's DataUnit), or whole seconds of training time.
enum class DataUnit { sample, minibatch, sweep, second };

// Every `count` units; a bare number means samples, as in CNTK.
struct Frequency {
  Frequency(size_t samples) : count(samples) {}
  Frequency(size_t count, DataUnit unit) : count(count), unit(unit) {}

  size_t count;
  DataUnit unit = DataUnit::sample;
};

// Which monitored values are better.
enum class MonitorMode { min, max };

struct CheckpointConfig {
  std::string filename = {};  // empty: no checkpoints
  // nullopt: one checkpoint at the end of training (CNTK's frequency=None).
  std::optional<Frequency> frequency = std::nullopt;
  // Resume from the newest valid checkpoint when one exists.
  bool restore = true;
  bool preserve_all = false;  // keep every numbered checkpoint
  size_t max_to_keep = 0;     // > 0: keep the newest max_to_keep numbered checkpoints
  size_t keep_best = 0;       // > 0: keep the keep_best checkpoints with the best values
  MonitorMode mode = MonitorMode::min;
  // With keep_best: also keep the newest checkpoint, best or not, so that a run resumes where
  // it stopped. False keeps exactly the keep_best best (a resume then starts from the newest of
  // them).
  bool keep_latest = true;
  // The value a checkpoint is ranked by, read when it is saved. Empty: the average error of
  // the cross-validation run at the same step; a checkpoint without one is never "best".
  std::function<double()> monitor = {};
  // The program's own state that a resumed run needs (what a cross-validation callback
  // remembers between calls, say): save_state is called at every save and its dictionary
  // stored in the checkpoint; restore_state gets it back when a session resumes.
  std::function<Dictionary()> save_state = {};
  std::function<void(const Dictionary&)> restore_state = {};
};

class CheckpointPolicy {
 public:
  // ArgumentError for a frequency of 0 or strategies without a filename.
  explicit CheckpointPolicy(CheckpointConfig config);

  const CheckpointConfig& config() const { return config_; }
  bool enabled() const { return !config_.filename.empty(); }
  // Whether saves are numbered (any strategy is set) rather than overwriting `filename`.
  bool numbered() const;
  bool ranks_by_value() const { return config_.keep_best > 0; }
  // Where save `index` goes.
  std::string file_name(size_t index) const;

  // The bookkeeping once save `index` (with its monitored value) has succeeded. Saves carry it
  // in their external state, so it is computed before the save and committed after.
  Dictionary plan_save(size_t index, std::optional<double> value) const;
  // Adopts the bookkeeping planned for save `index` and deletes the numbered files it does not
  // retain (save `index` itself included).
  void commit(size_t index, const Dictionary& planned);
  // The bookkeeping of the checkpoint a session resumed from (StateError when malformed).
  void restore(const Dictionary& state);
  Dictionary state() const;

  // The retained numbered checkpoints, oldest first.
  std::vector<std::string> retained_files() const;
  // The existing checkpoint files of this configuration: `filename` itself (a finished run's
  // final save, or the only file without strategies), then `filenameN` by descending N. The
  // session orders them by the position each records.
  std::vector<std::string> restore_candidates() const;

 private:
  struct Entry {
    size_t index;
    std::optional<double> value;
  };
  static Dictionary encode(const std::vector<Entry>& entries);
  static std::vector<Entry> decode(const Dictionary& state);

  CheckpointConfig config_;
  std::vector<Entry> entries_;  // retained numbered checkpoints, ascending index
};

}  // namespace loom
