// CNTK's cntk.train: Trainer, training_session with its configs, and Function.train/test. The
// core computes with the GIL released; it takes the GIL only to call back into Python
// (callbacks, Python progress writers and learners, printing to sys.stdout).
#include "python/src/binding.h"

namespace loom::python {

namespace {

// A TrainingSession subclassed in Python: its on_cross_validation_end, when it defines one, is
// called in place of the C++ one (which calls the CV config's callback).
class PyTrainingSession : public TrainingSession {
 public:
  using TrainingSession::TrainingSession;
  bool on_cross_validation_end(size_t index, double average_error, size_t num_samples,
                               size_t num_minibatches) override {
    PYBIND11_OVERRIDE(bool, TrainingSession, on_cross_validation_end, index, average_error,
                      num_samples, num_minibatches);
  }
};

InputMap input_map_of(py::handle map) {
  InputMap m;
  if (map.is_none()) return m;
  for (auto [k, v] : map.cast<py::dict>())
    m.emplace(k.cast<Variable>(), v.cast<StreamInformation>());
  return m;
}

std::optional<Frequency> frequency_of(py::handle f) {
  if (f.is_none()) return std::nullopt;
  return f.cast<Frequency>();
}

std::vector<Variable> arguments_of(const Function& criterion) {
  return criterion.valid() ? criterion.arguments() : std::vector<Variable>{};
}

DataSource source_of(py::handle data, const Function& criterion) {
  if (data.is_none()) return {};
  return data_source(data, arguments_of(criterion));
}

// A Python callable returning True (go on) or False (stop), as a cross-validation callback.
CrossValidationCallback cv_callback(py::handle callback) {
  if (callback.is_none()) return {};
  return [f = hold(py::reinterpret_borrow<py::object>(callback))](
             size_t index, double average_error, size_t samples, size_t minibatches) {
    py::gil_scoped_acquire gil;
    py::object r = (*f)(index, average_error, samples, minibatches);
    if (r.is_none())
      throw py::type_error(
          "the cross-validation callback returned None: return True to go on or False to stop");
    return returned<bool>(r, "the cross-validation callback", "True to go on or False to stop");
  };
}

std::shared_ptr<PyTrainingSession> make_session(
    std::shared_ptr<Trainer> trainer, py::handle mb_source, const MinibatchSizeSchedule& mb_size,
    py::handle model_inputs_to_streams, py::handle progress_frequency,
    std::optional<size_t> max_samples, py::handle checkpoint_config, py::handle cv_config,
    py::handle test_config, std::optional<size_t> max_sweeps) {
  TrainingSessionConfig c{.trainer = trainer,
                          .mb_source = minibatch_source(mb_source),
                          .mb_size = mb_size,
                          .model_inputs_to_streams = input_map_of(model_inputs_to_streams),
                          .max_samples = max_samples,
                          .max_sweeps = max_sweeps,
                          .progress_frequency = frequency_of(progress_frequency)};
  if (!checkpoint_config.is_none())
    c.checkpoint_config = checkpoint_config.cast<CheckpointConfig>();
  if (!cv_config.is_none()) c.cv_config = cv_config.cast<CrossValidationConfig>();
  if (!test_config.is_none()) c.test_config = test_config.cast<TestConfig>();
  return std::make_shared<PyTrainingSession>(std::move(c));
}

}  // namespace

void add_train(py::module_ m) {
  py::enum_<DataUnit>(m, "DataUnit")
      .value("sample", DataUnit::sample)
      .value("minibatch", DataUnit::minibatch)
      .value("sweep", DataUnit::sweep)
      .value("second", DataUnit::second);
  py::class_<Frequency>(m, "Frequency")
      .def(py::init<size_t, DataUnit>(), py::arg("count"), py::arg("unit") = DataUnit::sample)
      .def(py::init<size_t>())
      .def_readonly("count", &Frequency::count)
      .def_readonly("unit", &Frequency::unit);
  py::implicitly_convertible<py::int_, Frequency>();

  py::class_<Trainer, std::shared_ptr<Trainer>>(m, "Trainer")
      // criterion: a Function with outputs (loss[, metric]), or a tuple (loss, metric).
      .def(py::init([](py::handle model, py::handle criterion,
                       std::vector<std::shared_ptr<Learner>> learners, ProgressWriters writers) {
             const Function f = function_or_none(model);
             if (py::isinstance<py::tuple>(criterion) || py::isinstance<py::list>(criterion)) {
               // (loss, None): no metric, as CNTK's Trainer takes it.
               if (py::len(criterion) == 1 ||
                   (py::len(criterion) == 2 && criterion[py::int_(1)].is_none()))
                 return std::make_shared<Trainer>(f, as_variable(criterion[py::int_(0)]), learners,
                                                  writers);
               return std::make_shared<Trainer>(f,
                                                std::pair(as_variable(criterion[py::int_(0)]),
                                                          as_variable(criterion[py::int_(1)])),
                                                learners, writers);
             }
             const Function c = py::isinstance<Function>(criterion)
                                    ? criterion.cast<Function>()
                                    : Function(as_variable(criterion));
             return std::make_shared<Trainer>(f, c, learners, writers);
           }),
           py::arg("model"), py::arg("criterion"), py::arg("parameter_learners"),
           py::arg("progress_writers") = ProgressWriters{}, py::keep_alive<1, 4>(),
           py::keep_alive<1, 5>())
      .def(
          "train_minibatch",
          [](Trainer& t, py::dict arguments, py::handle outputs, py::handle device,
             std::optional<bool> is_sweep_end) {
            check_device(device);
            if (outputs.is_none())
              return py::object(py::bool_(with_minibatch(arguments, [&](const auto& data) {
                if constexpr (std::is_same_v<std::decay_t<decltype(data)>, ValueMap>)
                  return t.train_minibatch(data, is_sweep_end.value_or(false));
                else
                  return t.train_minibatch(data);
              })));
            // CNTK's (updated, {output: value}) for the outputs asked for.
            const auto wanted = outputs.cast<std::vector<Variable>>();
            ValueMap values;
            const bool updated = with_minibatch(arguments, [&](const auto& data) {
              if constexpr (std::is_same_v<std::decay_t<decltype(data)>, ValueMap>) {
                return t.train_minibatch(data, wanted, values, is_sweep_end.value_or(false));
              } else {
                ValueMap plain;
                bool sweep_end = false;
                for (const auto& [v, d] : data) {
                  plain.insert_or_assign(v, d.data);
                  sweep_end = sweep_end || d.sweep_end;
                }
                return t.train_minibatch(plain, wanted, values, sweep_end);
              }
            });
            py::dict out;
            for (const Variable& v : wanted)
              if (auto it = values.find(v); it != values.end())
                out[py::cast(v)] = value_to_numpy(it->second);
            return py::object(py::make_tuple(updated, out));
          },
          py::arg("arguments"), py::arg("outputs") = py::none(), py::arg("device") = py::none(),
          py::arg("is_sweep_end") = py::none())
      .def(
          "test_minibatch",
          [](Trainer& t, py::dict arguments, py::handle device) {
            check_device(device);
            return with_minibatch(arguments,
                                  [&](const auto& data) { return t.test_minibatch(data); });
          },
          py::arg("arguments"), py::arg("device") = py::none())
      .def(
          "save_checkpoint",
          [](const Trainer& t, const std::string& filename, py::handle external_state) {
            Dictionary state =
                external_state.is_none() ? Dictionary() : external_state.cast<Dictionary>();
            py::gil_scoped_release nogil;
            t.save_checkpoint(filename, state);
          },
          py::arg("filename"), py::arg("external_state") = py::none())
      .def(
          "restore_from_checkpoint",
          [](Trainer& t, const std::string& filename) {
            py::gil_scoped_release nogil;
            return t.restore_from_checkpoint(filename);
          },
          py::arg("filename"))
      .def_property_readonly("total_number_of_samples_seen", &Trainer::total_number_of_samples_seen)
      .def_property_readonly("previous_minibatch_loss_average",
                             &Trainer::previous_minibatch_loss_average)
      .def_property_readonly("previous_minibatch_evaluation_average",
                             &Trainer::previous_minibatch_evaluation_average)
      .def_property_readonly("previous_minibatch_sample_count",
                             &Trainer::previous_minibatch_sample_count)
      .def_property(
          "compute_precision",
          [](const Trainer& t) { return std::string(to_string(t.compute_precision())); },
          [](Trainer& t, const std::string& p) { t.set_compute_precision(precision_of(p)); })
      .def("summarize_training_progress", &Trainer::summarize_training_progress)
      .def("summarize_test_progress", &Trainer::summarize_test_progress)
      .def_property_readonly("model", &Trainer::model)
      .def_property_readonly("loss_function", &Trainer::loss_function)
      .def_property_readonly("evaluation_function",
                             [](const Trainer& t) -> py::object {
                               const Variable& metric = t.evaluation_function();
                               return metric.valid() ? py::cast(metric) : py::none();
                             })
      .def_property_readonly("parameter_learners", &Trainer::parameter_learners)
      .def_property_readonly("progress_writers", &Trainer::progress_writers);

  // monitor() -> number, save_state() -> dict and restore_state(dict): Loom's checkpoint
  // callables (checkpoint_policy.h), called with the GIL taken.
  const CheckpointConfig checkpoint;  // the defaults
  py::class_<CheckpointConfig>(m, "CheckpointConfig")
      .def(
          py::init([](const std::string& filename, py::handle frequency, bool restore,
                      bool preserve_all, size_t max_to_keep, size_t keep_best,
                      const std::string& mode, bool keep_latest, py::handle monitor,
                      py::handle save_state, py::handle restore_state) {
            if (mode != "min" && mode != "max")
              throw py::value_error("CheckpointConfig: mode is 'min' or 'max', not '" + mode + "'");
            CheckpointConfig c{.filename = filename,
                               .frequency = frequency_of(frequency),
                               .restore = restore,
                               .preserve_all = preserve_all,
                               .max_to_keep = max_to_keep,
                               .keep_best = keep_best,
                               .mode = mode == "min" ? MonitorMode::min : MonitorMode::max,
                               .keep_latest = keep_latest};
            if (!monitor.is_none())
              c.monitor = [f = hold(py::reinterpret_borrow<py::object>(monitor))] {
                py::gil_scoped_acquire gil;
                return returned<double>((*f)(), "CheckpointConfig's monitor()", "a number");
              };
            if (!save_state.is_none())
              c.save_state = [f = hold(py::reinterpret_borrow<py::object>(save_state))] {
                py::gil_scoped_acquire gil;
                return returned<Dictionary>((*f)(), "CheckpointConfig's save_state()", "a dict");
              };
            if (!restore_state.is_none())
              c.restore_state = [f = hold(py::reinterpret_borrow<py::object>(restore_state))](
                                    const Dictionary& state) {
                py::gil_scoped_acquire gil;
                (*f)(to_python(DictionaryValue(state.map())));
              };
            return c;
          }),
          py::arg("filename"), py::arg("frequency") = py::none(),
          py::arg("restore") = checkpoint.restore,
          py::arg("preserve_all") = checkpoint.preserve_all,
          py::arg("max_to_keep") = checkpoint.max_to_keep,
          py::arg("keep_best") = checkpoint.keep_best,
          py::arg("mode") = checkpoint.mode == MonitorMode::min ? "min" : "max",
          py::arg("keep_latest") = checkpoint.keep_latest, py::arg("monitor") = py::none(),
          py::arg("save_state") = py::none(), py::arg("restore_state") = py::none())
      .def_readonly("filename", &CheckpointConfig::filename);

  py::class_<CrossValidationConfig>(m, "CrossValidationConfig")
      .def(py::init([](py::handle source, py::handle frequency,
                       const MinibatchSizeSchedule& minibatch_size, py::handle callback,
                       std::optional<size_t> max_samples, py::handle input_map,
                       py::handle criterion) {
             const Function c = function_or_none(criterion);
             return CrossValidationConfig{.source = source_of(source, c),
                                          .frequency = frequency_of(frequency),
                                          .minibatch_size = minibatch_size,
                                          .callback = cv_callback(callback),
                                          .max_samples = max_samples.value_or(INFINITELY_REPEAT),
                                          .model_inputs_to_streams = input_map_of(input_map),
                                          .criterion = c};
           }),
           py::arg("minibatch_source") = py::none(), py::arg("frequency") = py::none(),
           py::arg("minibatch_size") = CrossValidationConfig{}.minibatch_size,
           py::arg("callback") = py::none(), py::arg("max_samples") = py::none(),
           py::arg("model_inputs_to_streams") = py::none(), py::arg("criterion") = py::none());

  py::class_<TestConfig>(m, "TestConfig")
      .def(py::init([](py::handle source, const MinibatchSizeSchedule& minibatch_size,
                       py::handle input_map, py::handle criterion) {
             const Function c = function_or_none(criterion);
             return TestConfig{.source = source_of(source, c),
                               .minibatch_size = minibatch_size,
                               .model_inputs_to_streams = input_map_of(input_map),
                               .criterion = c};
           }),
           py::arg("minibatch_source") = py::none(),
           py::arg("minibatch_size") = TestConfig{}.minibatch_size,
           py::arg("model_inputs_to_streams") = py::none(), py::arg("criterion") = py::none());

  // CNTK's TrainingSession(...) and training_session(...), with CNTK's parameters in CNTK's
  // order, then Loom's max_sweeps. A Python subclass may override on_cross_validation_end.
  auto session_args = [] {
    return std::make_tuple(
        py::arg("trainer"), py::arg("mb_source"),
        py::arg("mb_size") = TrainingSessionConfig{}.mb_size,
        py::arg("model_inputs_to_streams") = py::none(), py::arg("progress_frequency") = py::none(),
        py::arg("max_samples") = py::none(), py::arg("checkpoint_config") = py::none(),
        py::arg("cv_config") = py::none(), py::arg("test_config") = py::none(),
        py::arg("max_sweeps") = py::none());
  };
  py::class_<TrainingSession, PyTrainingSession, std::shared_ptr<TrainingSession>> session(
      m, "TrainingSession");
  std::apply([&](auto... a) { session.def(py::init(&make_session), a..., py::keep_alive<1, 2>()); },
             session_args());
  session
      .def(
          "train",
          [](TrainingSession& s, py::handle device) {
            check_device(device);
            py::gil_scoped_release nogil;
            s.train();
          },
          py::arg("device") = py::none())
      .def("on_cross_validation_end", &TrainingSession::on_cross_validation_end, py::arg("index"),
           py::arg("average_error"), py::arg("num_samples"), py::arg("num_minibatches"));
  std::apply(
      [&](auto... a) { m.def("training_session", &make_session, a..., py::keep_alive<0, 1>()); },
      session_args());

  py::class_<TrainingProgress>(m, "TrainingProgress")
      .def_readonly("loss", &TrainingProgress::loss)
      .def_readonly("metric", &TrainingProgress::metric)
      .def_readonly("samples", &TrainingProgress::samples);
  py::class_<TestSummary>(m, "TestSummary")
      .def_readonly("metric", &TestSummary::metric)
      .def_readonly("samples", &TestSummary::samples);
  py::class_<TrainSummary>(m, "TrainSummary")
      .def_readonly("epoch_summaries", &TrainSummary::epoch_summaries)
      .def_readonly("updates", &TrainSummary::updates)
      .def_readonly("test_summary", &TrainSummary::test_summary);

  auto function = class_of<Function>();
  function.def(
      "train",
      [](const Function& f, py::handle minibatch_source,
         const MinibatchSizeSchedule& minibatch_size, std::vector<std::string> streams,
         py::handle model_inputs_to_streams,
         std::vector<std::shared_ptr<Learner>> parameter_learners, py::list callbacks,
         py::handle progress_frequency, std::optional<size_t> max_epochs,
         std::optional<size_t> epoch_size, std::optional<size_t> max_samples) {
        TrainOptions o{.minibatch_size = minibatch_size,
                       .streams = streams,
                       .model_inputs_to_streams = input_map_of(model_inputs_to_streams),
                       .parameter_learners = parameter_learners,
                       .progress_frequency = frequency_of(progress_frequency),
                       .max_epochs = max_epochs,
                       .epoch_size = epoch_size,
                       .max_samples = max_samples};
        for (py::handle c : callbacks) {
          if (py::isinstance<ProgressWriter>(c))
            o.callbacks.emplace_back(c.cast<std::shared_ptr<ProgressWriter>>());
          else if (py::isinstance<CheckpointConfig>(c))
            o.callbacks.emplace_back(c.cast<CheckpointConfig>());
          else if (py::isinstance<CrossValidationConfig>(c))
            o.callbacks.emplace_back(c.cast<CrossValidationConfig>());
          else
            o.callbacks.emplace_back(c.cast<TestConfig>());
        }
        const DataSource data = data_source(minibatch_source, f.arguments());
        py::gil_scoped_release nogil;
        return f.train(data, o);
      },
      py::arg("minibatch_source"), py::arg("minibatch_size") = TrainOptions{}.minibatch_size,
      py::arg("streams") = TrainOptions{}.streams, py::arg("model_inputs_to_streams") = py::none(),
      py::arg("parameter_learners") = TrainOptions{}.parameter_learners,
      py::arg("callbacks") = py::list(), py::arg("progress_frequency") = py::none(),
      py::arg("max_epochs") = py::none(), py::arg("epoch_size") = py::none(),
      py::arg("max_samples") = py::none());
  function.def(
      "test",
      [](const Function& f, py::handle minibatch_source,
         const MinibatchSizeSchedule& minibatch_size, std::vector<std::string> streams,
         py::handle model_inputs_to_streams, ProgressWriters callbacks) {
        const DataSource data = data_source(minibatch_source, f.arguments());
        const TestOptions o{.minibatch_size = minibatch_size,
                            .streams = streams,
                            .model_inputs_to_streams = input_map_of(model_inputs_to_streams),
                            .callbacks = callbacks};
        py::gil_scoped_release nogil;
        return f.test(data, o);
      },
      py::arg("minibatch_source"), py::arg("minibatch_size") = TestOptions{}.minibatch_size,
      py::arg("streams") = TestOptions{}.streams, py::arg("model_inputs_to_streams") = py::none(),
      py::arg("callbacks") = ProgressWriters{});
}

}  // namespace loom::python
