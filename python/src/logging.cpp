// CNTK's cntk.logging: progress writers (including ones written in Python, whose on_write_*
// methods get CNTK's arguments), ProgressPrinter printing into Python's sys.stdout, the
// TensorBoard writer, and the trace level.
#include <streambuf>

#include "python/src/binding.h"

namespace loom::python {

namespace {

// An output stream into Python's sys.stdout, so that what Loom's ProgressPrinter prints and
// what the script prints arrive in order, wherever sys.stdout goes (a pipe, pytest's capture).
class PythonStdout : public std::streambuf {
 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) pending_ += char(c);
    if (c == '\n') sync();
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    pending_.append(s, size_t(n));
    return n;
  }
  int sync() override {
    if (pending_.empty()) return 0;
    py::gil_scoped_acquire gil;
    try {
      py::module_::import("sys").attr("stdout").attr("write")(pending_);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("writing Loom's progress to sys.stdout");
    }
    pending_.clear();
    return 0;
  }

 private:
  std::string pending_;
};

std::ostream& python_stdout() {
  static PythonStdout buffer;
  static std::ostream out(&buffer);
  return out;
}

py::object window_pair(const std::pair<size_t, size_t>& p) {
  return py::make_tuple(p.first, p.second);
}
py::object window_pair(const std::optional<std::pair<double, double>>& p) {
  if (!p) return py::none();
  return py::make_tuple(p->first, p->second);
}

// A ProgressWriter subclassed in Python: the on_write_* methods it defines are called with
// CNTK's arguments: (first, last) pairs for updates, sums for summaries.
class PyProgressWriter : public ProgressWriter {
 public:
  using ProgressWriter::ProgressWriter;

 protected:
  // Calls the Python method `name` if the subclass defines it; the caller holds the GIL (the
  // arguments are Python objects already).
  template <typename... Args>
  void call(const char* name, Args&&... args) {
    if (py::function f = py::get_override(static_cast<const ProgressWriter*>(this), name))
      f(std::forward<Args>(args)...);
  }
  void on_write_training_update(const ProgressWindow& w) override {
    py::gil_scoped_acquire gil;
    call("on_write_training_update", window_pair(w.samples), window_pair(w.updates),
         window_pair(w.loss), window_pair(w.metric));
  }
  void on_write_test_update(const ProgressWindow& w) override {
    py::gil_scoped_acquire gil;
    call("on_write_test_update", window_pair(w.samples), window_pair(w.updates),
         window_pair(w.metric));
  }
  void on_write_distributed_sync_update(const ProgressWindow& w) override {
    py::gil_scoped_acquire gil;
    call("on_write_distributed_sync_update", window_pair(w.samples), window_pair(w.updates));
  }
  void on_write_training_summary(const ProgressSummary& s) override {
    py::gil_scoped_acquire gil;
    call("on_write_training_summary", s.samples, s.updates, s.summaries, s.loss, s.metric,
         s.elapsed_ms);
  }
  void on_write_test_summary(const ProgressSummary& s) override {
    py::gil_scoped_acquire gil;
    call("on_write_test_summary", s.samples, s.updates, s.summaries, s.metric, s.elapsed_ms);
  }
  void on_write(const std::string& key, double value) override {
    py::gil_scoped_acquire gil;
    call("write", key, value);
  }
  void on_training_update_end() override {
    py::gil_scoped_acquire gil;
    call("on_training_update_end");
  }
};

// A (first, last) pair of Python's as a window's pair.
template <typename T>
std::pair<T, T> pair_of(py::handle p) {
  return p.cast<std::pair<T, T>>();
}
std::optional<std::pair<double, double>> optional_pair(py::handle p) {
  if (p.is_none()) return std::nullopt;
  return pair_of<double>(p);
}

}  // namespace

void add_logging(py::module_ m) {
  py::class_<ProgressWriter, PyProgressWriter, std::shared_ptr<ProgressWriter>>(m, "ProgressWriter")
      .def(py::init([](std::optional<size_t> freq, size_t first, std::optional<size_t> test_freq,
                       size_t test_first, std::optional<size_t> distributed_freq,
                       size_t distributed_first) {
             return new PyProgressWriter(freq, first, test_freq, test_first, distributed_freq,
                                         distributed_first);
           }),
           py::arg("freq") = py::none(), py::arg("first") = ProgressWriter::kReportFirst,
           py::arg("test_freq") = py::none(), py::arg("test_first") = ProgressWriter::kReportFirst,
           py::arg("distributed_freq") = py::none(),
           py::arg("distributed_first") = ProgressWriter::kReportFirst)
      .def_property_readonly("total_training_updates", &ProgressWriter::total_training_updates)
      .def_property_readonly("total_test_updates", &ProgressWriter::total_test_updates);

  const ProgressPrinterOptions printer;  // the defaults
  py::class_<ProgressPrinter, ProgressWriter, std::shared_ptr<ProgressPrinter>>(m,
                                                                                "ProgressPrinter")
      .def(py::init([](std::optional<size_t> freq, size_t first, const std::string& tag,
                       std::optional<std::string> log_to_file, std::optional<size_t> rank,
                       bool /*gen_heartbeat*/, std::optional<size_t> num_epochs,
                       std::optional<size_t> test_freq, size_t test_first, bool metric_is_pct,
                       std::optional<size_t> distributed_freq, size_t distributed_first) {
             return std::make_shared<ProgressPrinter>(
                 ProgressPrinterOptions{.freq = freq,
                                        .first = first,
                                        .tag = tag,
                                        .log_to_file = log_to_file.value_or(""),
                                        .rank = rank,
                                        .num_epochs = num_epochs,
                                        .test_freq = test_freq,
                                        .test_first = test_first,
                                        .metric_is_pct = metric_is_pct,
                                        .distributed_freq = distributed_freq,
                                        .distributed_first = distributed_first,
                                        .out = &python_stdout()});
           }),
           py::arg("freq") = py::none(), py::arg("first") = printer.first,
           py::arg("tag") = printer.tag, py::arg("log_to_file") = py::none(),
           py::arg("rank") = py::none(), py::arg("gen_heartbeat") = false,
           py::arg("num_epochs") = py::none(), py::arg("test_freq") = py::none(),
           py::arg("test_first") = printer.test_first,
           py::arg("metric_is_pct") = printer.metric_is_pct,
           py::arg("distributed_freq") = py::none(),
           py::arg("distributed_first") = printer.distributed_first)
      .def("end_progress_print", &ProgressPrinter::end_progress_print, py::arg("msg") = "")
      .def("log", &ProgressPrinter::log, py::arg("message"))
      // CNTK's writer callbacks, called directly: (first, last) pairs for updates, totals for
      // summaries, as the Trainer would give them.
      .def(
          "on_write_training_update",
          [](ProgressPrinter& p, py::handle samples, py::handle updates, py::handle loss,
             py::handle metric) {
            p.on_write_training_update({pair_of<size_t>(samples), pair_of<size_t>(updates),
                                        optional_pair(loss), optional_pair(metric)});
          },
          py::arg("samples"), py::arg("updates"), py::arg("aggregate_loss"),
          py::arg("aggregate_metric"))
      .def(
          "on_write_test_update",
          [](ProgressPrinter& p, py::handle samples, py::handle updates, py::handle metric) {
            p.on_write_test_update({pair_of<size_t>(samples), pair_of<size_t>(updates),
                                    std::nullopt, optional_pair(metric)});
          },
          py::arg("samples"), py::arg("updates"), py::arg("aggregate_metric"))
      .def(
          "on_write_distributed_sync_update",
          [](ProgressPrinter& p, py::handle samples, py::handle updates, py::handle metric) {
            p.on_write_distributed_sync_update({pair_of<size_t>(samples), pair_of<size_t>(updates),
                                                std::nullopt, optional_pair(metric)});
          },
          py::arg("samples"), py::arg("updates"), py::arg("aggregate_metric"))
      .def(
          "on_write_training_summary",
          [](ProgressPrinter& p, size_t samples, size_t updates, size_t summaries,
             std::optional<double> loss, std::optional<double> metric, uint64_t elapsed_ms) {
            p.on_write_training_summary({samples, updates, summaries, loss, metric, elapsed_ms});
          },
          py::arg("samples"), py::arg("updates"), py::arg("summaries"), py::arg("aggregate_loss"),
          py::arg("aggregate_metric"), py::arg("elapsed_milliseconds"))
      .def(
          "on_write_test_summary",
          [](ProgressPrinter& p, size_t samples, size_t updates, size_t summaries,
             std::optional<double> metric, uint64_t elapsed_ms) {
            p.on_write_test_summary(
                {samples, updates, summaries, std::nullopt, metric, elapsed_ms});
          },
          py::arg("samples"), py::arg("updates"), py::arg("summaries"), py::arg("aggregate_metric"),
          py::arg("elapsed_milliseconds"))
      .def("on_training_update_end", &ProgressWriter::on_training_update_end)
      .def("write", &ProgressWriter::write, py::arg("key"), py::arg("value"));

  py::class_<TensorBoardProgressWriter, ProgressWriter, std::shared_ptr<TensorBoardProgressWriter>>(
      m, "TensorBoardProgressWriter")
      .def(py::init([](std::optional<size_t> freq, const std::string& log_dir,
                       std::optional<size_t> rank, py::handle model) {
             return std::make_shared<TensorBoardProgressWriter>(TensorBoardProgressWriterOptions{
                 .freq = freq, .log_dir = log_dir, .rank = rank, .model = function_or_none(model)});
           }),
           py::arg("freq") = py::none(),
           py::arg("log_dir") = TensorBoardProgressWriterOptions{}.log_dir,
           py::arg("rank") = py::none(), py::arg("model") = py::none())
      .def("write_value", &TensorBoardProgressWriter::write_value, py::arg("name"),
           py::arg("value"), py::arg("step"))
      // images: [N, C, H, W] numbers from 0 to 255 (C 1 or 3).
      .def(
          "write_image",
          [](TensorBoardProgressWriter& w, const std::string& name, py::handle data,
             uint64_t step) { w.write_image(name, dense_view(data), step); },
          py::arg("name"), py::arg("data"), py::arg("step"))
      .def("flush", &TensorBoardProgressWriter::flush)
      .def("close", &TensorBoardProgressWriter::close)
      .def_property_readonly("file_name", &TensorBoardProgressWriter::file_name);

  m.def(
      "set_trace_level",
      [](int value) {
        if (value < 0 || value > 2)
          throw py::value_error("trace level " + std::to_string(value) +
                                ": use TraceLevel.Error (0), TraceLevel.Warning (1) or "
                                "TraceLevel.Info (2)");
        set_trace_level(TraceLevel(value));
      },
      py::arg("value"));
  m.def("get_trace_level", [] { return int(get_trace_level()); });
}

}  // namespace loom::python
