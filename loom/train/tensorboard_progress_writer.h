// TensorBoardProgressWriter: training progress as TensorBoard event files
// (cntk.logging.TensorBoardProgressWriter). The file is TensorFlow's: a sequence of TFRecords
// (length, masked CRC32C of the length, an Event protocol buffer, its masked CRC32C), the first
// event holding the file version "brain.Event:2", the second the model's graph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "loom/graph/function.h"
#include "loom/train/progress_writer.h"

namespace loom {

// The keyword arguments of CNTK's TensorBoardProgressWriter, in its order.
struct TensorBoardProgressWriterOptions {
  // Write every freq-th training minibatch's averages; nullopt: only the summaries.
  std::optional<size_t> freq = std::nullopt;
  // The folder of the event file, created if missing.
  std::string log_dir = ".";
  // In distributed training only rank 0 (or a writer without a rank) writes.
  std::optional<size_t> rank = std::nullopt;
  // Its graph is written for TensorBoard's Graphs tab.
  Function model = {};
};

// Scalars it writes, with CNTK's tags and steps:
//   minibatch/avg_loss, minibatch/avg_metric   step: training minibatches so far
//   summary/avg_loss, summary/avg_metric       step: the summary's (epoch's) number, from 1
//   minibatch/test_avg_metric                  step: training minibatches so far, or when none
//   summary/test_avg_metric                    step: the test summary's number
// Metrics are fractions (0.25 for 25 % error); a criterion without a metric writes no metric.
class TensorBoardProgressWriter : public ProgressWriter {
 public:
  // Creates log_dir and the file events.out.tfevents.<10-digit Unix time>.<host name> in it
  // (".1", ".2", ... appended if that file exists); an IOError naming the folder or file when
  // either cannot be created.
  explicit TensorBoardProgressWriter(TensorBoardProgressWriterOptions options = {});
  explicit TensorBoardProgressWriter(size_t freq)
      : TensorBoardProgressWriter(TensorBoardProgressWriterOptions{.freq = freq}) {}
  // Closes the file if close() was not called.
  ~TensorBoardProgressWriter() override;

  // Records a scalar under `name` at `step`.
  void write_value(const std::string& name, double value, uint64_t step);
  // Records images under `name/image/0`, `name/image/1`, ... at `step` (CNTK's write_image):
  // images is [N, C, H, W] (float32 or float64 values from 0 to 255, rounded and clamped; C 1
  // for grey, 3 for RGB, 4 for RGBA), each stored as a PNG file. ArgumentError for another shape.
  void write_image(const std::string& name, const NDArrayView& images, uint64_t step);
  // Writes what is buffered to the file.
  void flush();
  // Flushes and closes the file. Any later call but the destructor is a StateError.
  void close();

  // The event file's path; empty for a rank other than 0.
  const std::string& file_name() const { return file_name_; }

 protected:
  void on_write_training_update(const ProgressWindow& window) override;
  // Per-minibatch test results are not written, as in CNTK (the test frequency is never).
  void on_write_test_update(const ProgressWindow&) override {}
  void on_write_training_summary(const ProgressSummary& summary) override;
  void on_write_test_summary(const ProgressSummary& summary) override;

 private:
  void check_open(const char* operation) const;
  // Frames one serialized Event as a TFRecord and appends it.
  void write_record(const std::string& event);

  std::string file_name_;
  std::FILE* file_ = nullptr;
  bool closed_ = false;
};

}  // namespace loom
