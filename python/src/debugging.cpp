// CNTK's cntk.debugging (loom/graph/debugging.h): node timing and its print_node_timing methods
// on Function, Trainer and Evaluator, checked mode, the profiler, the network's trace level, and
// the debug graph behind loom.debugging.debug_model.
#include "loom/graph/debugging.h"
#include "python/src/binding.h"

namespace loom::python {

namespace {

// Writes text to Python's sys.stderr (where CNTK's fprintf(stderr) went), so that it mixes in
// order with what Python prints and is captured as Python's output is.
void write_stderr(const std::string& text) {
  py::object err = py::module_::import("sys").attr("stderr");
  err.attr("write")(text);
  err.attr("flush")();
}

void print_node_timing(const std::vector<Variable>& roots) {
  std::string report;
  {
    py::gil_scoped_release nogil;
    report = node_timing_report(roots);
  }
  write_stderr(report);
}

std::vector<Variable> trainer_roots(const Trainer& t) {
  std::vector<Variable> roots;
  if (t.model().valid()) roots = t.model().outputs();
  for (const Variable& v : {t.loss_function(), t.evaluation_function()})
    if (v.valid()) roots.push_back(v);
  return roots;
}

}  // namespace

void add_debugging(py::module_ m) {
  m.def("set_node_timing", &set_node_timing, py::arg("enable"));
  m.def("set_checked_mode", &set_checked_mode, py::arg("enable"));
  m.def("set_computation_network_trace_level", &set_computation_network_trace_level,
        py::arg("level"));
  m.attr("default_profiler_buffer_size") = ProfilerOptions{}.reserve_mem;
  // start_profiler's other defaults, which loom.debugging.profiler's keyword arguments take.
  m.attr("kProfilerDir") = kProfilerDir;
  m.attr("default_profiler_sync_gpu") = ProfilerOptions{}.sync_gpu;
  m.def(
      "start_profiler",
      [](const std::string& dir, bool sync_gpu, size_t reserve_mem) {
        start_profiler(dir, {.sync_gpu = sync_gpu, .reserve_mem = reserve_mem});
      },
      py::arg("dir") = kProfilerDir, py::arg("sync_gpu") = ProfilerOptions{}.sync_gpu,
      py::arg("reserve_mem") = ProfilerOptions{}.reserve_mem);
  m.def("stop_profiler", &stop_profiler);
  m.def("enable_profiler", &enable_profiler);
  m.def("disable_profiler", &disable_profiler);

  // (model, nodes): model with a debug node after every node; callback(pass, index, value) is
  // called with the GIL taken, pass 'f' or 'b', value a numpy array (a list of them for
  // sequences).
  m.def(
      "debug_graph",
      [](py::handle model, py::function callback) {
        const Function f =
            py::isinstance<Function>(model) ? model.cast<Function>() : Function(as_variable(model));
        auto held = hold(std::move(callback));
        DebugGraph d = debug_graph(f, [held](const DebugEvent& e) {
          py::gil_scoped_acquire gil;
          (*held)(e.pass == NodePass::Forward ? "f" : "b", e.node, value_to_numpy(e.value));
        });
        return py::make_tuple(d.model, d.nodes);
      },
      py::arg("model"), py::arg("callback"));

  class_of<Function>().def("print_node_timing",
                           [](const Function& f) { print_node_timing(f.outputs()); });
  class_of<Trainer, std::shared_ptr<Trainer>>().def(
      "print_node_timing", [](const Trainer& t) { print_node_timing(trainer_roots(t)); });
  class_of<Evaluator, std::shared_ptr<Evaluator>>().def(
      "print_node_timing",
      [](const Evaluator& e) { print_node_timing({e.evaluation_function()}); });
}

}  // namespace loom::python
