// Schedules and learners, including learners written in Python: UserLearner subclasses and
// universal() with a Python function that builds the update graph.
#include "python/src/binding.h"

namespace loom::python {

namespace {

// A schedule from a number, a list of values or a list of (count, value) pairs.
template <typename T, typename Make>
auto schedule_of(py::handle values, Make make) {
  if (!py::isinstance<py::list>(values) && !py::isinstance<py::tuple>(values))
    return make(values.cast<T>());
  if (py::len(values) > 0 && (py::isinstance<py::tuple>(values[py::int_(0)]) ||
                              py::isinstance<py::list>(values[py::int_(0)])))
    return make(values.cast<std::vector<std::pair<size_t, T>>>());
  return make(values.cast<std::vector<T>>());
}

size_t epoch(std::optional<size_t> epoch_size) {
  return epoch_size.value_or(FULL_DATA_SWEEP_EPOCH);
}

// Gradients {parameter: data} for Learner.update, in each parameter's dtype.
std::unordered_map<Variable, NDArrayView> gradients_of(const py::dict& data) {
  std::unordered_map<Variable, NDArrayView> gradients;
  for (auto [key, value] : data) {
    Variable p = key.cast<Variable>();
    gradients.insert_or_assign(p, tensor_of(value, p.dtype()));
  }
  return gradients;
}

// A count given as any number (seed 003 passes np.float32(mbsize)).
size_t count_of(py::handle n) {
  return size_t(n.cast<double>());
}

// A learner subclassed in Python: its update() is the Python method.
class PyUserLearner : public UserLearner {
 public:
  PyUserLearner(std::vector<Parameter> parameters, LearningRateSchedule lr, bool as_numpy)
      : UserLearner(std::move(parameters), std::move(lr)), as_numpy_(as_numpy) {}

  bool update(std::unordered_map<Variable, NDArrayView>& gradient_values,
              size_t training_sample_count, bool sweep_end) override {
    py::gil_scoped_acquire gil;
    py::function update = py::get_override(static_cast<const UserLearner*>(this), "update");
    if (!update) throw py::type_error("a UserLearner subclass must define update()");
    py::dict gradients;
    for (auto& [p, g] : gradient_values)
      gradients[py::cast(Parameter(p))] = as_numpy_ ? py::object(to_numpy(g, true)) : py::cast(g);
    return returned<bool>(update(gradients, training_sample_count, sweep_end), "UserLearner.update",
                          "a bool (True: the update was made)");
  }

 private:
  bool as_numpy_;
};

}  // namespace

void add_learners(py::module_ m) {
  py::enum_<UnitType>(m, "UnitType")
      .value("sample", UnitType::sample)
      .value("minibatch", UnitType::minibatch);
  m.attr("IGNORE") = IGNORE;
  m.attr("FULL_DATA_SWEEP_EPOCH") = FULL_DATA_SWEEP_EPOCH;

  py::class_<LearningRateSchedule>(m, "TrainingParameterSchedule")
      .def("__getitem__", &LearningRateSchedule::value)
      .def("value", &LearningRateSchedule::value, py::arg("count"))
      .def_property_readonly("epoch_size", &LearningRateSchedule::epoch_size)
      .def_property_readonly("minibatch_size", &LearningRateSchedule::minibatch_size);
  py::class_<MinibatchSizeSchedule>(m, "MinibatchSizeSchedule")
      .def(py::init<size_t>())
      .def("__getitem__", &MinibatchSizeSchedule::value)
      .def_property_readonly("epoch_size", &MinibatchSizeSchedule::epoch_size);
  py::implicitly_convertible<py::int_, MinibatchSizeSchedule>();

  m.def(
      "learning_rate_schedule",
      [](py::handle lr, UnitType unit, std::optional<size_t> epoch_size) {
        return schedule_of<double>(
            lr, [&](const auto& v) { return learning_rate_schedule(v, unit, epoch(epoch_size)); });
      },
      py::arg("lr"), py::arg("unit"), py::arg("epoch_size") = py::none());
  m.def(
      "learning_parameter_schedule",
      [](py::handle schedule, std::optional<size_t> minibatch_size,
         std::optional<size_t> epoch_size) {
        return schedule_of<double>(schedule, [&](const auto& v) {
          return learning_parameter_schedule(v, minibatch_size, epoch(epoch_size));
        });
      },
      py::arg("schedule"), py::arg("minibatch_size") = py::none(),
      py::arg("epoch_size") = py::none());
  m.def(
      "learning_parameter_schedule_per_sample",
      [](py::handle schedule, std::optional<size_t> epoch_size) {
        return schedule_of<double>(schedule, [&](const auto& v) {
          return learning_parameter_schedule_per_sample(v, epoch(epoch_size));
        });
      },
      py::arg("schedule"), py::arg("epoch_size") = py::none());
  m.def(
      "momentum_schedule",
      [](py::handle momentum, std::optional<size_t> epoch_size,
         std::optional<size_t> minibatch_size) {
        return schedule_of<double>(momentum, [&](const auto& v) {
          return momentum_schedule(v, epoch(epoch_size), minibatch_size);
        });
      },
      py::arg("momentum"), py::arg("epoch_size") = py::none(),
      py::arg("minibatch_size") = py::none());
  m.def(
      "momentum_schedule_per_sample",
      [](py::handle momentum, std::optional<size_t> epoch_size) {
        return schedule_of<double>(momentum, [&](const auto& v) {
          return momentum_schedule_per_sample(v, epoch(epoch_size));
        });
      },
      py::arg("momentum"), py::arg("epoch_size") = py::none());
  m.def(
      "momentum_as_time_constant_schedule",
      [](py::handle momentum, std::optional<size_t> epoch_size) {
        return schedule_of<double>(momentum, [&](const auto& v) {
          return momentum_as_time_constant_schedule(v, epoch(epoch_size));
        });
      },
      py::arg("momentum"), py::arg("epoch_size") = py::none());
  m.def(
      "minibatch_size_schedule",
      [](py::handle schedule, size_t epoch_size) {
        return schedule_of<size_t>(
            schedule, [&](const auto& v) { return minibatch_size_schedule(v, epoch_size); });
      },
      py::arg("schedule"), py::arg("epoch_size") = kMinibatchSizeScheduleEpochSize);
  m.def("default_variance_momentum_schedule", &default_variance_momentum_schedule);
  m.def("set_default_unit_gain_value", &set_default_unit_gain_value, py::arg("value"));
  m.def("default_unit_gain_value", &default_unit_gain_value);

  py::class_<LearnerOptions>(m, "LearnerOptions")
      .def(py::init([](bool unit_gain, double l1, double l2, double noise, double clipping,
                       bool truncation, std::optional<size_t> minibatch_size) {
             return LearnerOptions{.unit_gain = unit_gain,
                                   .l1_regularization_weight = l1,
                                   .l2_regularization_weight = l2,
                                   .gaussian_noise_injection_std_dev = noise,
                                   .gradient_clipping_threshold_per_sample = clipping,
                                   .gradient_clipping_with_truncation = truncation,
                                   .minibatch_size = minibatch_size};
           }),
           py::arg("unit_gain"), py::arg("l1_regularization_weight"),
           py::arg("l2_regularization_weight"), py::arg("gaussian_noise_injection_std_dev"),
           py::arg("gradient_clipping_threshold_per_sample"),
           py::arg("gradient_clipping_with_truncation"), py::arg("minibatch_size"))
      // The defaults, which loom.learners' keyword arguments take.
      .def(py::init<>())
      .def_readonly("l1_regularization_weight", &LearnerOptions::l1_regularization_weight)
      .def_readonly("l2_regularization_weight", &LearnerOptions::l2_regularization_weight)
      .def_property_readonly(
          "gaussian_noise_injection_std_dev",
          [](const LearnerOptions& o) { return o.gaussian_noise_injection_std_dev.value(0); })
      .def_readonly("gradient_clipping_threshold_per_sample",
                    &LearnerOptions::gradient_clipping_threshold_per_sample)
      .def_readonly("gradient_clipping_with_truncation",
                    &LearnerOptions::gradient_clipping_with_truncation);

  py::class_<Learner, std::shared_ptr<Learner>>(m, "Learner")
      .def_property_readonly("parameters", &Learner::parameters)
      .def(
          "update",
          [](Learner& l, py::dict gradient_values, py::handle training_sample_count,
             bool sweep_end) {
            auto gradients = gradients_of(gradient_values);
            const size_t n = count_of(training_sample_count);
            py::gil_scoped_release nogil;
            return l.update(gradients, n, sweep_end);
          },
          py::arg("gradient_values"), py::arg("training_sample_count"),
          py::arg("sweep_end") = false)
      .def("learning_rate", &Learner::learning_rate)
      .def(
          "reset_learning_rate",
          [](Learner& l, const LearningRateSchedule& s) { l.reset_learning_rate(s); },
          py::arg("learning_rate"))
      .def_property_readonly("total_number_of_samples_seen",
                             &Learner::total_number_of_samples_seen);

  py::class_<UserLearner, PyUserLearner, Learner, std::shared_ptr<UserLearner>>(m, "UserLearner")
      .def(py::init_alias<std::vector<Parameter>, LearningRateSchedule, bool>(),
           py::arg("parameters"), py::arg("lr_schedule"), py::arg("as_numpy") = true);

  // The learners' own defaults, which loom.learners' keyword arguments take.
  m.attr("kNeedAveMultiplier") = kNeedAveMultiplier;
  m.attr("kAdaDeltaLearningRate") = kAdaDeltaLearningRate;
  m.attr("kAdaDeltaRho") = kAdaDeltaRho;
  m.attr("kAdaDeltaEpsilon") = kAdaDeltaEpsilon;
  m.attr("kAdamEpsilon") = kAdamEpsilon;
  m.def("sgd", &sgd, py::arg("parameters"), py::arg("lr"), py::arg("options"));
  m.def("momentum_sgd", &momentum_sgd, py::arg("parameters"), py::arg("lr"), py::arg("momentum"),
        py::arg("options"));
  m.def("nesterov", &nesterov, py::arg("parameters"), py::arg("lr"), py::arg("momentum"),
        py::arg("options"));
  m.def("adagrad", &adagrad, py::arg("parameters"), py::arg("lr"), py::arg("need_ave_multiplier"),
        py::arg("options"));
  m.def("adadelta", &adadelta, py::arg("parameters"), py::arg("lr"), py::arg("rho"),
        py::arg("epsilon"), py::arg("options"));
  m.def("adam", &adam, py::arg("parameters"), py::arg("lr"), py::arg("momentum"),
        py::arg("variance_momentum"), py::arg("epsilon"), py::arg("adamax"), py::arg("options"));
  m.def("fsadagrad", &fsadagrad, py::arg("parameters"), py::arg("lr"), py::arg("momentum"),
        py::arg("variance_momentum"), py::arg("options"));
  m.def("rmsprop", &rmsprop, py::arg("parameters"), py::arg("lr"), py::arg("gamma"), py::arg("inc"),
        py::arg("dec"), py::arg("max"), py::arg("min"), py::arg("need_ave_multiplier"),
        py::arg("options"));
  m.def(
      "universal",
      [](py::function update_func, std::vector<Parameter> parameters) {
        return universal(
            [f = hold(update_func)](const std::vector<Parameter>& ps,
                                    const std::vector<Variable>& gs) {
              py::gil_scoped_acquire gil;
              py::object graph = (*f)(ps, gs);
              return py::isinstance<Function>(graph) ? graph.cast<Function>()
                                                     : Function(graph.cast<Variable>());
            },
            parameters);
      },
      py::arg("update_func"), py::arg("parameters"));
}

}  // namespace loom::python
