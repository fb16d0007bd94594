#include "loom/train/tensorboard_progress_writer.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "loom/core/crc32c.h"
#include "loom/core/error.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/op.h"
#include "loom/train/png.h"
#include "loom/train/tensorboard_event.pb.h"

namespace loom {

namespace {

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Creates log_dir/events.out.tfevents.<time>.<host> (TensorFlow's name), or the first of
// <name>.1, <name>.2, ... that does not exist: a second writer started in the same second never
// overwrites the first one's file.
std::FILE* create_event_file(const std::string& log_dir, std::time_t time, std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(log_dir, error);
  LOOM_CHECK(!error, IOError, "cannot create the TensorBoard log folder '", log_dir,
             "': ", error.message());
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%010lld", static_cast<long long>(time));
  const std::string base = (std::filesystem::path(log_dir) /
                            ("events.out.tfevents." + std::string(stamp) + "." + host_name()))
                               .string();
  for (int n = 0;; ++n) {
    path = n == 0 ? base : base + "." + std::to_string(n);
    if (std::FILE* file = std::fopen(path.c_str(), "wbx")) return file;
    LOOM_CHECK(errno == EEXIST, IOError, "cannot create the TensorBoard event file '", path,
               "': ", std::strerror(errno));
  }
}

// A tensor shape as TensorBoard shows it: each dynamic axis (batch, sequence) and each
// dimension not inferred yet as -1, then the static dimensions.
void set_shape(const Variable& v, tensorboard::TensorShapeProto& shape) {
  for (size_t i = 0; i < v.dynamic_axes().size(); ++i) shape.add_dim()->set_size(-1);
  for (size_t d : v.shape().dims()) {
    shape.add_dim()->set_size(d == NDShape::kInferred ? -1 : static_cast<int64_t>(d));
  }
}

// The node's data type and its outputs' shapes, the attributes TensorBoard shows on nodes
// and edges.
void set_attributes(const std::vector<Variable>& outputs, tensorboard::NodeDef& node) {
  auto& attr = *node.mutable_attr();
  attr["dtype"].set_type(outputs[0].dtype() == DataType::Float64 ? tensorboard::DT_DOUBLE
                                                                 : tensorboard::DT_FLOAT);
  auto& shapes = *attr["_output_shapes"].mutable_list();
  for (const Variable& v : outputs) set_shape(v, *shapes.add_shape());
}

// TensorBoard draws "Const" nodes as constants.
const char* leaf_op(VariableKind kind) {
  switch (kind) {
    case VariableKind::Input:
      return "Input";
    case VariableKind::Parameter:
      return "Parameter";
    case VariableKind::Constant:
      return "Const";
    case VariableKind::Placeholder:
      return "Placeholder";
    case VariableKind::Output:
      break;
  }
  throw StateError("an output variable is not a leaf of the graph");
}

// The model as a TensorFlow GraphDef for TensorBoard's graph view, as CNTK wrote it: a node
// per primitive function (op: its op name) and per variable it reads that no function
// produces (op: Input, Parameter, Const or Placeholder), each named by its name when that is
// unique and by its uid otherwise, with an edge from each input.
std::string graph_def(const Function& model) {
  tensorboard::GraphDef graph;
  std::unordered_map<const void*, std::string> node_names;  // FunctionImpl or VariableImpl
  std::unordered_set<std::string> taken;
  const auto unique_name = [&](const std::string& name, const std::string& uid) {
    const std::string& chosen = !name.empty() && !taken.contains(name) ? name : uid;
    taken.insert(chosen);
    return chosen;
  };
  // The node name an input edge refers to: "node" for its first output, "node:k" otherwise.
  const auto input_name = [&](const Variable& v) -> std::string {
    if (v.is_output()) {
      const std::string& node = node_names.at(v.producer().impl().get());
      const size_t index = v.impl()->output_index;
      return index == 0 ? node : node + ":" + std::to_string(index);
    }
    auto [it, added] = node_names.try_emplace(v.impl().get());
    if (added) {
      it->second = unique_name(v.name(), v.uid());
      tensorboard::NodeDef& node = *graph.add_node();
      node.set_name(it->second);
      node.set_op(leaf_op(v.kind()));
      set_attributes({v}, node);
    }
    return it->second;
  };
  for (const auto& f : topological_order(model.outputs())) {
    std::vector<std::string> inputs;
    for (const Variable& v : f->inputs) inputs.push_back(input_name(v));
    Function function(f);
    tensorboard::NodeDef& node = *graph.add_node();
    node.set_name(unique_name(f->name, f->uid));
    node.set_op(f->op->name());
    for (auto& input : inputs) node.add_input(std::move(input));
    set_attributes(function.outputs(), node);
    node_names.emplace(f.get(), node.name());
  }
  return graph.SerializeAsString();
}

std::string scalar_event(const std::string& tag, double value, uint64_t step) {
  tensorboard::Event event;
  event.set_wall_time(wall_time());
  event.set_step(static_cast<int64_t>(step));
  tensorboard::Summary::Value& summary_value = *event.mutable_summary()->add_value();
  summary_value.set_tag(tag);
  summary_value.set_simple_value(static_cast<float>(value));
  return event.SerializeAsString();
}

// CNTK's _avg: a ratio that is 0 when nothing was counted.
double average(double sum, size_t count) {
  return count > 0 ? sum / static_cast<double>(count) : 0.0;
}

}  // namespace

TensorBoardProgressWriter::TensorBoardProgressWriter(TensorBoardProgressWriterOptions options)
    : ProgressWriter(options.freq, 0, std::nullopt, 0, std::nullopt, 0) {
  if (options.rank.value_or(0) != 0) return;
  const std::time_t now = std::time(nullptr);
  file_ = create_event_file(options.log_dir, now, file_name_);
  tensorboard::Event version;
  version.set_wall_time(static_cast<double>(now));
  version.set_file_version("brain.Event:2");
  write_record(version.SerializeAsString());
  if (options.model.valid()) {
    tensorboard::Event graph;
    graph.set_wall_time(wall_time());
    graph.set_graph_def(graph_def(options.model));
    write_record(graph.SerializeAsString());
  }
  flush();
}

TensorBoardProgressWriter::~TensorBoardProgressWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardProgressWriter::check_open(const char* operation) const {
  LOOM_CHECK(!closed_, StateError, "TensorBoardProgressWriter::", operation,
             " called after close()");
}

void TensorBoardProgressWriter::write_value(const std::string& name, double value, uint64_t step) {
  check_open("write_value");
  if (file_) write_record(scalar_event(name, value, step));
}

void TensorBoardProgressWriter::write_image(const std::string& name, const NDArrayView& images,
                                            uint64_t step) {
  check_open("write_image");
  const NDShape& s = images.shape();
  LOOM_CHECK(s.rank() == 4 && (s[1] == 1 || s[1] == 3 || s[1] == 4) && s[2] > 0 && s[3] > 0,
             ArgumentError, "write_image '", name, "': images of shape ", s.to_string(),
             " (give [N, C, H, W] with C 1, 3 or 4)");
  if (!file_) return;
  const size_t n = s[0], channels = s[1], height = s[2], width = s[3];
  const NDArrayView dense = images.is_sparse() ? images.to_dense() : images;
  std::vector<double> values;
  if (dense.dtype() == DataType::Float64) {
    values = dense.to_vector<double>();
  } else {
    const std::vector<float> f = dense.to_vector<float>();
    values.assign(f.begin(), f.end());
  }
  tensorboard::Event event;
  event.set_wall_time(wall_time());
  event.set_step(static_cast<int64_t>(step));
  std::vector<uint8_t> pixels(channels * height * width);
  for (size_t i = 0; i < n; ++i) {
    // [C, H, W] to PNG's interleaved [H, W, C].
    const double* image = values.data() + i * pixels.size();
    for (size_t c = 0; c < channels; ++c)
      for (size_t p = 0; p < height * width; ++p)
        pixels[p * channels + c] =
            static_cast<uint8_t>(std::clamp(std::round(image[c * height * width + p]), 0.0, 255.0));
    tensorboard::Summary::Value& value = *event.mutable_summary()->add_value();
    value.set_tag(name + "/image/" + std::to_string(i));
    tensorboard::Summary::Image& png = *value.mutable_image();
    png.set_height(static_cast<int32_t>(height));
    png.set_width(static_cast<int32_t>(width));
    png.set_colorspace(static_cast<int32_t>(channels));
    png.set_encoded_image_string(encode_png(pixels, height, width, channels));
  }
  write_record(event.SerializeAsString());
}

void TensorBoardProgressWriter::flush() {
  check_open("flush");
  LOOM_CHECK(!file_ || std::fflush(file_) == 0, IOError,
             "cannot write the TensorBoard event file '", file_name_, "': ", std::strerror(errno));
}

void TensorBoardProgressWriter::close() {
  check_open("close");
  flush();
  closed_ = true;
  if (!file_) return;
  const int result = std::fclose(file_);
  file_ = nullptr;
  LOOM_CHECK(result == 0, IOError, "cannot close the TensorBoard event file '", file_name_,
             "': ", std::strerror(errno));
}

void TensorBoardProgressWriter::write_record(const std::string& event) {
  // Little-endian, as TensorFlow writes and reads it on every platform it runs on.
  static_assert(std::endian::native == std::endian::little);
  unsigned char header[12];
  const uint64_t length = event.size();
  std::memcpy(header, &length, 8);
  const uint32_t length_crc = crc32c_mask(crc32c(header, 8));
  std::memcpy(header + 8, &length_crc, 4);
  const uint32_t data_crc = crc32c_mask(crc32c(event.data(), event.size()));
  const bool written = std::fwrite(header, 1, sizeof header, file_) == sizeof header &&
                       std::fwrite(event.data(), 1, event.size(), file_) == event.size() &&
                       std::fwrite(&data_crc, 1, 4, file_) == 4;
  LOOM_CHECK(written, IOError, "cannot write the TensorBoard event file '", file_name_,
             "': ", std::strerror(errno));
}

void TensorBoardProgressWriter::on_write_training_update(const ProgressWindow& window) {
  const size_t samples = window.samples.second - window.samples.first;
  const size_t step = total_training_updates();
  write_value("minibatch/avg_loss", average(window.loss->second - window.loss->first, samples),
              step);
  if (window.metric) {
    write_value("minibatch/avg_metric",
                average(window.metric->second - window.metric->first, samples), step);
  }
}

void TensorBoardProgressWriter::on_write_training_summary(const ProgressSummary& summary) {
  write_value("summary/avg_loss", average(summary.loss.value_or(0.0), summary.samples),
              summary.summaries);
  if (summary.metric) {
    write_value("summary/avg_metric", average(*summary.metric, summary.samples), summary.summaries);
  }
  // A finished epoch is on disk even if the program is killed later.
  flush();
}

void TensorBoardProgressWriter::on_write_test_summary(const ProgressSummary& summary) {
  const double metric = average(summary.metric.value_or(0.0), summary.samples);
  // Against the training minibatches when there were any, so the test metric lines up with
  // the training curves, as CNTK does.
  if (total_training_updates() != 0) {
    write_value("minibatch/test_avg_metric", metric, total_training_updates());
  } else {
    write_value("summary/test_avg_metric", metric, summary.summaries);
  }
  flush();
}

}  // namespace loom
