#include "loom/train/progress_printer.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "loom/core/error.h"
#include "loom/core/python_format.h"

namespace loom {

namespace {

// snprintf into a string; doubles go through python_format_float and are passed as %s.
__attribute__((format(printf, 1, 2))) std::string printf_string(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int size = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string text(static_cast<size_t>(size), '\0');
  std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  return text;
}

// Python's `{:{precision}f}` etc. of a double.
std::string fixed(double value, int precision, int width = 0) {
  return python_format_float(value, width, precision, 'f');
}

// CNTK's _avg: a ratio that is 0 when nothing was counted.
double average(double sum, double count) {
  return count > 0 ? sum / count : 0.0;
}

double window_average(const std::pair<double, double>& sums,
                      const std::pair<size_t, size_t>& samples) {
  return average(sums.second - sums.first, static_cast<double>(samples.second - samples.first));
}

}  // namespace

ProgressPrinter::ProgressPrinter(ProgressPrinterOptions options)
    : ProgressWriter(options.freq, options.first, options.test_freq, options.test_first,
                     options.distributed_freq, options.distributed_first, options.clock),
      options_(std::move(options)) {
  if (!options_.log_to_file.empty()) {
    log_file_name_ = options_.log_to_file;
    if (options_.rank) log_file_name_ += "rank" + std::to_string(*options_.rank);
    *options_.out << "Redirecting log to file " << log_file_name_ << std::endl;
    log_file_.open(log_file_name_, std::ios::out | std::ios::trunc);
    LOOM_CHECK(log_file_.is_open(), IOError, "cannot create the progress log file '",
               log_file_name_, "': ", std::strerror(errno));
    // The header lines CNTK's log parsers look for; 300 epochs when none were given.
    const std::string epochs = std::to_string(options_.num_epochs.value_or(300));
    print_line(log_file_name_);
    print_line("CNTKCommandTrainInfo: train : " + epochs);
    print_line("CNTKCommandTrainInfo: CNTKNoMoreCommands_Total : " + epochs);
    print_line("CNTKCommandTrainBegin: train");
  }
  if (options_.freq == 0) {
    print_line(" average      since    average      since      examples");
    print_line("    loss       last     metric       last              ");
    print_line(" ------------------------------------------------------");
  }
}

void ProgressPrinter::end_progress_print(const std::string& msg) {
  print_line("CNTKCommandTrainEnd: train");
  if (!msg.empty() && !log_file_name_.empty()) print_line(msg);
}

void ProgressPrinter::log(const std::string& message) {
  print_line(message);
}

void ProgressPrinter::print_line(const std::string& line) {
  // Distributed workers print the same numbers; on standard output only the first does.
  if (log_file_name_.empty() && options_.rank.value_or(0) != 0) return;
  // Flushed per line so that a log being watched, or left by a crash, is complete.
  std::ostream& stream = log_file_name_.empty() ? *options_.out : log_file_;
  stream << line << std::endl;
  LOOM_CHECK(stream.good(), IOError, "cannot write the progress log",
             log_file_name_.empty() ? "" : " file '" + log_file_name_ + "'");
}

void ProgressPrinter::on_write_training_update(const ProgressWindow& window) {
  write_progress_update(window, options_.freq, "");
}

void ProgressPrinter::on_write_test_update(const ProgressWindow& window) {
  write_progress_update(window, options_.test_freq, "Evaluation ");
}

void ProgressPrinter::on_write_distributed_sync_update(const ProgressWindow& window) {
  print_line(printf_string("Distributed training: #Syncs elapsed = %zu, #Samples elapsed = %zu",
                           window.updates.second - window.updates.first,
                           window.samples.second - window.samples.first));
}

void ProgressPrinter::write_progress_update(const ProgressWindow& window,
                                            std::optional<size_t> freq, const char* name) {
  const double multiplier = options_.metric_is_pct ? 100.0 : 1.0;
  std::string line = " ";
  if (freq == 0) {
    // One row of the averaged table: since the period's start, then since the last row.
    const auto columns = [&](const std::optional<std::pair<double, double>>& sums) {
      if (!sums) return std::string(8, ' ') + "   " + std::string(8, ' ') + "   ";
      const double since_start = average(sums->second, static_cast<double>(window.samples.second));
      return python_format_float(since_start, 8, 3, 'g') + "   " +
             python_format_float(window_average(*sums, window.samples), 8, 3, 'g') + "   ";
    };
    line += columns(window.loss) + columns(window.metric);
    line += printf_string(" %10zu", window.samples.second);
  } else {
    const size_t samples = window.samples.second - window.samples.first;
    line += printf_string("%sMinibatch[%4zu-%4zu]: ", name, window.updates.first + 1,
                          window.updates.second);
    if (window.loss) {
      line +=
          printf_string("loss = %s * %zu",
                        fixed(window_average(*window.loss, window.samples), 6).c_str(), samples);
    }
    if (window.metric) {
      if (window.loss) line += ", ";
      const double metric = window_average(*window.metric, window.samples) * multiplier;
      line += options_.metric_is_pct
                  ? printf_string("metric = %s%% * %zu", fixed(metric, 2).c_str(), samples)
                  : printf_string("metric = %s * %zu", fixed(metric, 6).c_str(), samples);
    }
    line += ";";
  }
  print_line(line);
}

void ProgressPrinter::on_write_training_summary(const ProgressSummary& summary) {
  if (options_.freq == 0) return;  // the geometric table has no epoch lines, as in CNTK
  const double samples = static_cast<double>(summary.samples);
  const double seconds = static_cast<double>(summary.elapsed_ms) / 1000;
  const std::string of_epochs =
      options_.num_epochs ? " of " + std::to_string(*options_.num_epochs) : "";
  const std::string tag = options_.tag.empty() ? "" : "[" + options_.tag + "] ";
  std::string line = printf_string(
      "Finished Epoch[%zu%s]: %sloss = %s * %zu", summary.summaries, of_epochs.c_str(), tag.c_str(),
      fixed(average(summary.loss.value_or(0.0), samples), 6).c_str(), summary.samples);
  if (summary.metric) {
    const double metric = average(*summary.metric, samples);
    line += options_.metric_is_pct
                ? printf_string(", metric = %s%% * %zu", fixed(metric * 100.0, 2).c_str(),
                                summary.samples)
                : printf_string(", metric = %s * %zu", fixed(metric, 6).c_str(), summary.samples);
  }
  line += printf_string(" %ss (%s samples/s);", fixed(seconds, 3).c_str(),
                        fixed(average(samples, seconds), 1, 5).c_str());
  print_line(line);
}

void ProgressPrinter::on_write_test_summary(const ProgressSummary& summary) {
  const double metric = average(summary.metric.value_or(0.0), static_cast<double>(summary.samples));
  const std::string value =
      options_.metric_is_pct ? fixed(metric * 100.0, 2) + "%" : fixed(metric, 6);
  print_line(printf_string("Finished Evaluation [%zu]: Minibatch[1-%zu]: metric = %s * %zu;",
                           summary.summaries, summary.updates, value.c_str(), summary.samples));
}

void ProgressPrinter::on_write(const std::string& key, double value) {
  print_line(key + ": " + python_float_repr(value));
}

}  // namespace loom
