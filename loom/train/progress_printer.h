// ProgressPrinter: prints training and evaluation progress in CNTK's exact text formats
// (cntk.logging.ProgressPrinter), to standard output or to a log file.
#pragma once

#include <cstddef>
#include <fstream>
#include <iostream>
#include <optional>
#include <ostream>
#include <string>

#include "loom/train/progress_writer.h"

namespace loom {

// The keyword arguments of CNTK's ProgressPrinter, plus where "standard output" is and
// which clock measures epochs (both for tests).
struct ProgressPrinterOptions {
  // Report every freq-th training minibatch; 0: geometrically (1, 3, 7, 15, ...) as an
  // averaged table; nullopt: only epoch summaries.
  std::optional<size_t> freq = std::nullopt;
  size_t first = ProgressWriter::kReportFirst;  // also report each of the first `first` minibatches
  std::string tag = "";                         // shown as "[tag] " in epoch summaries
  std::string log_to_file = "";                 // empty: print to `out`
  // The worker's rank in distributed training: a log file's name gets "rank{r}" appended (each
  // worker its own file, as CNTK); without a log file only rank 0 prints (Loom: the workers'
  // lines would be the same, since distributed learners report numbers over all workers).
  std::optional<size_t> rank = std::nullopt;
  std::optional<size_t> num_epochs = std::nullopt;  // shown as "Finished Epoch[k of n]"
  std::optional<size_t> test_freq = std::nullopt;
  size_t test_first = ProgressWriter::kReportFirst;
  bool metric_is_pct = true;  // metric as "12.58%" rather than "0.125800"
  std::optional<size_t> distributed_freq = std::nullopt;
  size_t distributed_first = ProgressWriter::kReportFirst;
  std::ostream* out = &std::cout;
  ProgressClock clock = {};  // empty: the steady clock
};

class ProgressPrinter : public ProgressWriter {
 public:
  // An IOError when the log file cannot be created.
  explicit ProgressPrinter(ProgressPrinterOptions options = {});
  explicit ProgressPrinter(size_t freq) : ProgressPrinter(ProgressPrinterOptions{.freq = freq}) {}

  // Marks the end of training in the log; msg, when given, follows in a log file.
  void end_progress_print(const std::string& msg = "");
  // Writes a line of the caller's own to the log.
  void log(const std::string& message);

  // Public as CNTK's: a program may call a printer's writer callbacks itself.
  void on_write_training_update(const ProgressWindow& window) override;
  void on_write_test_update(const ProgressWindow& window) override;
  void on_write_distributed_sync_update(const ProgressWindow& window) override;
  void on_write_training_summary(const ProgressSummary& summary) override;
  void on_write_test_summary(const ProgressSummary& summary) override;
  void on_write(const std::string& key, double value) override;

 private:
  void write_progress_update(const ProgressWindow& window, std::optional<size_t> freq,
                             const char* name);
  void print_line(const std::string& line);

  ProgressPrinterOptions options_;
  std::string log_file_name_;  // empty when printing to options_.out
  std::ofstream log_file_;
};

}  // namespace loom
