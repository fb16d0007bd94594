// CNTK's cntk.layers and default_options. An option left out (the module's UNSET) takes
// default_options' value, as CNTK's default_override_or; given explicitly, even
// activation=None, it wins.
#include "loom/layers/attention.h"
#include "loom/layers/recurrent.h"
#include "python/src/binding.h"

namespace loom::python {

namespace {

py::object& unset() {
  static py::object* u = new py::object(py::module_::import("builtins").attr("object")());
  return *u;
}
bool given(py::handle x) {
  return !x.is(unset());
}

std::optional<Activation> activation_option(py::handle x) {
  if (!given(x)) return std::nullopt;
  return activation_of(x);
}

// CNTK's init: an initializer, a number (every value), or an array (the values themselves).
Initializer initializer_of(py::handle x) {
  if (py::isinstance<Initializer>(x)) return x.cast<Initializer>();
  if (py::isinstance<py::array>(x) || py::isinstance<py::list>(x))
    return array_initializer(dense_view(x));
  return constant_initializer(x.cast<double>());
}
std::optional<Initializer> init_option(py::handle x) {
  if (!given(x)) return std::nullopt;
  return initializer_of(x);
}

std::optional<bool> bool_option(py::handle x) {
  if (!given(x)) return std::nullopt;
  return x.cast<bool>();
}

std::optional<PadFlags> pad_option(py::handle x) {
  if (!given(x)) return std::nullopt;
  PadFlags flags(false);
  if (py::isinstance<py::bool_>(x))
    flags.flags = {x.cast<bool>()};
  else
    flags.flags = x.cast<std::vector<bool>>();
  return flags;
}

// An int for every axis, or a tuple with one per axis.
template <typename T>
std::vector<T> per_axis(py::handle x) {
  if (py::isinstance<py::tuple>(x) || py::isinstance<py::list>(x)) return x.cast<std::vector<T>>();
  return {x.cast<T>()};
}

// A layer from a Function, a Python callable over Variables, or a list of them (a Sequential).
Function layer_of(py::handle x) {
  if (py::isinstance<Function>(x)) return x.cast<Function>();
  if (py::isinstance<py::list>(x)) {
    std::vector<Function> layers;
    for (py::handle l : x) layers.push_back(layer_of(l));
    return Sequential(layers);
  }
  return py::type::of<Function>()(x).cast<Function>();
}

// The options both convolution layers share, from their Python arguments.
template <typename Options>
Options convolution_options(py::handle activation, py::handle init, py::handle pad,
                            py::handle strides, py::handle sharing, py::handle bias,
                            py::handle init_bias, size_t reduction_rank, py::handle dilation,
                            size_t max_temp_mem_size_in_samples, py::handle dtype,
                            const std::string& name) {
  Options o;
  o.activation = activation_option(activation);
  o.init = init_option(init);
  o.pad = pad_option(pad);
  o.strides = per_axis<size_t>(strides);
  o.sharing = per_axis<bool>(sharing);
  o.bias = bool_option(bias);
  o.init_bias = init_option(init_bias);
  o.reduction_rank = reduction_rank;
  o.dilation = per_axis<size_t>(dilation);
  o.max_temp_mem_size_in_samples = max_temp_mem_size_in_samples;
  o.dtype = data_type(dtype);
  o.name = name;
  return o;
}

// An initial state: None or the number 0 (none: zeros), another number (a scalar constant), or
// a Variable.
Variable initial_state_of(py::handle x) {
  if (x.is_none()) return {};
  if ((py::isinstance<py::int_>(x) || py::isinstance<py::float_>(x)) && x.cast<double>() == 0)
    return {};
  return as_variable(x);
}

// with default_options(...): the C++ scope opened on entry and closed on exit.
class DefaultOptions {
 public:
  explicit DefaultOptions(LayerDefaults defaults) : defaults_(std::move(defaults)) {}
  void enter() { scope_.emplace(defaults_); }
  void exit() { scope_.reset(); }

 private:
  LayerDefaults defaults_;
  std::optional<DefaultOptionsScope> scope_;
};

}  // namespace

void add_layers(py::module_ m) {
  m.attr("UNSET") = unset();
  const py::object u = unset();

  // The options' defaults, which loom.layers' keyword arguments take.
  m.attr("kStabilizerSteepness") = kStabilizerSteepness;
  m.attr("kDelayTimeStep") = sequence::kDelayTimeStep;
  py::class_<ConvolutionLayerOptions>(m, "ConvolutionLayerOptions")
      .def(py::init<>())
      .def_readonly("reduction_rank", &ConvolutionLayerOptions::reduction_rank)
      .def_readonly("groups", &ConvolutionLayerOptions::groups)
      .def_readonly("max_temp_mem_size_in_samples",
                    &ConvolutionLayerOptions::max_temp_mem_size_in_samples);
  py::class_<ConvolutionTransposeLayerOptions>(m, "ConvolutionTransposeLayerOptions")
      .def(py::init<>())
      .def_readonly("reduction_rank", &ConvolutionTransposeLayerOptions::reduction_rank)
      .def_readonly("max_temp_mem_size_in_samples",
                    &ConvolutionTransposeLayerOptions::max_temp_mem_size_in_samples);
  py::class_<BatchNormalizationOptions>(m, "BatchNormalizationOptions")
      .def(py::init<>())
      .def_readonly("init_scale", &BatchNormalizationOptions::init_scale)
      .def_readonly("normalization_time_constant",
                    &BatchNormalizationOptions::normalization_time_constant)
      .def_readonly("blend_time_constant", &BatchNormalizationOptions::blend_time_constant)
      .def_readonly("epsilon", &BatchNormalizationOptions::epsilon);
  py::class_<LayerNormalizationOptions>(m, "LayerNormalizationOptions")
      .def(py::init<>())
      .def_readonly("initial_scale", &LayerNormalizationOptions::initial_scale)
      .def_readonly("initial_bias", &LayerNormalizationOptions::initial_bias)
      .def_readonly("epsilon", &LayerNormalizationOptions::epsilon);
  py::class_<UnfoldOptions>(m, "UnfoldOptions")
      .def(py::init<>())
      .def_readonly("length_increase", &UnfoldOptions::length_increase);

  py::class_<DefaultOptions>(m, "DefaultOptions")
      .def(py::init([](py::handle activation, py::handle init, py::handle bias,
                       py::handle init_bias, py::handle pad) {
             LayerDefaults d;
             d.activation = activation_option(activation);
             d.init = init_option(init);
             d.bias = bool_option(bias);
             d.init_bias = init_option(init_bias);
             d.pad = bool_option(pad);
             return new DefaultOptions(d);
           }),
           py::arg("activation") = u, py::arg("init") = u, py::arg("bias") = u,
           py::arg("init_bias") = u, py::arg("pad") = u)
      .def("__enter__", &DefaultOptions::enter)
      .def("__exit__", [](DefaultOptions& o, py::args) { o.exit(); });

  m.def(
      "Dense",
      [](py::handle shape, py::handle activation, py::handle init, std::optional<size_t> input_rank,
         std::optional<size_t> map_rank, py::handle bias, py::handle init_bias, py::handle dtype,
         const std::string& name) {
        return Dense(shape_of(shape), {.activation = activation_option(activation),
                                       .init = init_option(init),
                                       .input_rank = input_rank,
                                       .map_rank = map_rank,
                                       .bias = bool_option(bias),
                                       .init_bias = init_option(init_bias),
                                       .dtype = data_type(dtype),
                                       .name = name});
      },
      py::arg("shape"), py::arg("activation") = u, py::arg("init") = u,
      py::arg("input_rank") = py::none(), py::arg("map_rank") = py::none(), py::arg("bias") = u,
      py::arg("init_bias") = u, py::arg("dtype") = py::none(), py::arg("name") = "");

  // The convolutions take every option of CNTK's Convolution; loom.layers gives each its
  // CNTK signature.
  const ConvolutionLayerOptions conv;  // the defaults
  using Conv = Function (*)(const NDShape&, std::optional<size_t>, const ConvolutionLayerOptions&);
  for (auto [layer, f] : {std::pair<const char*, Conv>{"Convolution", &Convolution},
                          {"SequentialConvolution", &SequentialConvolution},
                          {"Convolution1D", &Convolution1D},
                          {"Convolution2D", &Convolution2D},
                          {"Convolution3D", &Convolution3D}})
    m.def(
        layer,
        [f](py::handle filter_shape, py::handle num_filters, bool sequential, py::handle activation,
            py::handle init, py::handle pad, py::handle strides, py::handle sharing,
            py::handle bias, py::handle init_bias, size_t reduction_rank, bool transpose_weight,
            py::handle dilation, size_t groups, size_t max_temp_mem_size_in_samples,
            const std::string& op_name, py::handle dtype, const std::string& name) {
          std::optional<size_t> filters;
          if (!num_filters.is_none() &&
              !(py::isinstance<py::tuple>(num_filters) && py::len(num_filters) == 0))
            filters = num_filters.cast<size_t>();
          auto o = convolution_options<ConvolutionLayerOptions>(
              activation, init, pad, strides, sharing, bias, init_bias, reduction_rank, dilation,
              max_temp_mem_size_in_samples, dtype, name);
          o.sequential = sequential;
          o.transpose_weight = transpose_weight;
          o.groups = groups;
          o.op_name = op_name;
          return f(shape_of(filter_shape), filters, o);
        },
        py::arg("filter_shape"), py::arg("num_filters") = py::none(),
        py::arg("sequential") = conv.sequential, py::arg("activation") = u, py::arg("init") = u,
        py::arg("pad") = u, py::arg("strides") = 1, py::arg("sharing") = true, py::arg("bias") = u,
        py::arg("init_bias") = u, py::arg("reduction_rank") = conv.reduction_rank,
        py::arg("transpose_weight") = conv.transpose_weight, py::arg("dilation") = 1,
        py::arg("groups") = conv.groups,
        py::arg("max_temp_mem_size_in_samples") = conv.max_temp_mem_size_in_samples,
        py::arg("op_name") = conv.op_name, py::arg("dtype") = py::none(), py::arg("name") = "");
  const ConvolutionTransposeLayerOptions conv_t;
  using ConvT = Function (*)(const NDShape&, size_t, const ConvolutionTransposeLayerOptions&);
  for (auto [layer, f] :
       {std::pair<const char*, ConvT>{"ConvolutionTranspose", &ConvolutionTranspose},
        {"ConvolutionTranspose1D", &ConvolutionTranspose1D},
        {"ConvolutionTranspose2D", &ConvolutionTranspose2D},
        {"ConvolutionTranspose3D", &ConvolutionTranspose3D}})
    m.def(
        layer,
        [f](py::handle filter_shape, size_t num_filters, py::handle activation, py::handle init,
            py::handle pad, py::handle strides, py::handle sharing, py::handle bias,
            py::handle init_bias, py::handle output_shape, size_t reduction_rank,
            py::handle dilation, size_t max_temp_mem_size_in_samples, py::handle dtype,
            const std::string& name) {
          auto o = convolution_options<ConvolutionTransposeLayerOptions>(
              activation, init, pad, strides, sharing, bias, init_bias, reduction_rank, dilation,
              max_temp_mem_size_in_samples, dtype, name);
          if (!output_shape.is_none()) o.output_shape = shape_of(output_shape);
          return f(shape_of(filter_shape), num_filters, o);
        },
        py::arg("filter_shape"), py::arg("num_filters"), py::arg("activation") = u,
        py::arg("init") = u, py::arg("pad") = u, py::arg("strides") = 1, py::arg("sharing") = true,
        py::arg("bias") = u, py::arg("init_bias") = u, py::arg("output_shape") = py::none(),
        py::arg("reduction_rank") = conv_t.reduction_rank, py::arg("dilation") = 1,
        py::arg("max_temp_mem_size_in_samples") = conv_t.max_temp_mem_size_in_samples,
        py::arg("dtype") = py::none(), py::arg("name") = "");

  using Pool = Function (*)(const NDShape&, const PoolingLayerOptions&);
  for (auto [layer, f] : {std::pair<const char*, Pool>{"MaxPooling", &MaxPooling},
                          {"AveragePooling", &AveragePooling}})
    m.def(
        layer,
        [f](py::handle filter_shape, py::handle strides, py::handle pad, const std::string& name) {
          return f(shape_of(filter_shape),
                   {.strides = per_axis<size_t>(strides), .pad = pad_option(pad), .name = name});
        },
        py::arg("filter_shape"), py::arg("strides") = 1, py::arg("pad") = u, py::arg("name") = "");
  m.def(
      "MaxUnpooling",
      [](py::handle filter_shape, py::handle strides, py::handle pad, const std::string& name) {
        return MaxUnpooling(
            shape_of(filter_shape),
            {.strides = per_axis<size_t>(strides), .pad = pad_option(pad), .name = name});
      },
      py::arg("filter_shape"), py::arg("strides") = 1, py::arg("pad") = false,
      py::arg("name") = "");
  m.def("GlobalMaxPooling", &GlobalMaxPooling, py::arg("name") = "");
  m.def("GlobalAveragePooling", &GlobalAveragePooling, py::arg("name") = "");

  m.def(
      "Dropout",
      [](std::optional<double> dropout_rate, std::optional<double> keep_prob,
         std::optional<uint64_t> seed, const std::string& name) {
        return Dropout(DropoutOptions{
            .dropout_rate = dropout_rate, .keep_prob = keep_prob, .seed = seed, .name = name});
      },
      py::arg("dropout_rate") = py::none(), py::arg("keep_prob") = py::none(),
      py::arg("seed") = py::none(), py::arg("name") = "");
  const BatchNormalizationOptions batch_norm;
  m.def(
      "BatchNormalization",
      [](std::optional<int> map_rank, double init_scale, double normalization_time_constant,
         double blend_time_constant, double epsilon, bool use_cntk_engine,
         bool disable_regularization, py::handle dtype, const std::string& name) {
        return BatchNormalization({.map_rank = map_rank,
                                   .init_scale = init_scale,
                                   .normalization_time_constant = normalization_time_constant,
                                   .blend_time_constant = blend_time_constant,
                                   .epsilon = epsilon,
                                   .use_cntk_engine = use_cntk_engine,
                                   .disable_regularization = disable_regularization,
                                   .dtype = data_type(dtype),
                                   .name = name});
      },
      py::arg("map_rank") = py::none(), py::arg("init_scale") = batch_norm.init_scale,
      py::arg("normalization_time_constant") = batch_norm.normalization_time_constant,
      py::arg("blend_time_constant") = batch_norm.blend_time_constant,
      py::arg("epsilon") = batch_norm.epsilon,
      py::arg("use_cntk_engine") = batch_norm.use_cntk_engine,
      py::arg("disable_regularization") = batch_norm.disable_regularization,
      py::arg("dtype") = py::none(), py::arg("name") = "");
  m.def(
      "LayerNormalization",
      [](double initial_scale, double initial_bias, double epsilon, py::handle dtype,
         const std::string& name) {
        return LayerNormalization({.initial_scale = initial_scale,
                                   .initial_bias = initial_bias,
                                   .epsilon = epsilon,
                                   .dtype = data_type(dtype),
                                   .name = name});
      },
      py::arg("initial_scale") = LayerNormalizationOptions{}.initial_scale,
      py::arg("initial_bias") = LayerNormalizationOptions{}.initial_bias,
      py::arg("epsilon") = LayerNormalizationOptions{}.epsilon, py::arg("dtype") = py::none(),
      py::arg("name") = "");
  m.def(
      "Sequential",
      [](py::list layers, const std::string& name) {
        std::vector<Function> fs;
        for (py::handle l : layers) fs.push_back(layer_of(l));
        return Sequential(fs, name);
      },
      py::arg("layers"), py::arg("name") = "");
  m.def("Identity", &Identity, py::arg("name") = "");
  m.def("identity", &identity);
  m.def(
      "Activation",
      [](py::handle activation, const std::string& name) {
        return ActivationLayer(activation_option(activation), name);
      },
      py::arg("activation") = u, py::arg("name") = "");
  m.def("Label", &Label, py::arg("name"));
  m.def(
      "ResNetBlock",
      [](py::handle f, const std::string& name) { return ResNetBlock(layer_of(f), name); },
      py::arg("f"), py::arg("name") = "");
  m.def(
      "SequentialClique",
      [](py::handle functions, const std::string& name) {
        std::vector<Function> fs;
        if (py::isinstance<py::list>(functions) || py::isinstance<py::tuple>(functions))
          for (py::handle f : functions) fs.push_back(layer_of(f));
        else
          fs.push_back(layer_of(functions));
        return SequentialClique(fs, name);
      },
      py::arg("functions"), py::arg("name") = "");
  m.def("ForwardDeclaration", &ForwardDeclaration, py::arg("name") = "forward_declaration");
  m.def(
      "resolve_to",
      [](const Variable& forward, py::handle value) { resolve_to(forward, as_variable(value)); },
      py::arg("forward"), py::arg("value"));

  // Recurrence.
  using Recur = Function (*)(const Function&, const RecurrenceOptions&);
  for (auto [layer, f] : {std::pair<const char*, Recur>{"Recurrence", &Recurrence},
                          {"RecurrenceFrom", &RecurrenceFrom},
                          {"Fold", &Fold}})
    m.def(
        layer,
        [f](py::handle step, bool go_backwards, py::handle initial_state, bool return_full_state,
            const std::string& name) {
          RecurrenceOptions o{
              .go_backwards = go_backwards, .return_full_state = return_full_state, .name = name};
          if (py::isinstance<py::list>(initial_state) || py::isinstance<py::tuple>(initial_state))
            for (py::handle s : initial_state) o.initial_state.push_back(as_variable(s));
          else
            o.initial_state.push_back(initial_state_of(initial_state));
          if (o.initial_state.size() == 1 && !o.initial_state[0].valid()) o.initial_state.clear();
          return f(layer_of(step), o);
        },
        py::arg("step_function"), py::arg("go_backwards") = RecurrenceOptions{}.go_backwards,
        py::arg("initial_state") = py::none(),
        py::arg("return_full_state") = RecurrenceOptions{}.return_full_state, py::arg("name") = "");
  m.def(
      "Delay",
      [](int64_t T, py::handle initial_state, const std::string& name) {
        return Delay(T, initial_state_of(initial_state), name);
      },
      py::arg("T") = sequence::kDelayTimeStep, py::arg("initial_state") = py::none(),
      py::arg("name") = "");
  m.def(
      "PastValueWindow",
      [](size_t window_size, int axis, bool go_backwards, const std::string& name) {
        return PastValueWindow(window_size, axis, {.go_backwards = go_backwards, .name = name});
      },
      py::arg("window_size"), py::arg("axis"),
      py::arg("go_backwards") = PastValueWindowOptions{}.go_backwards, py::arg("name") = "");
  m.def(
      "UnfoldFrom",
      [](py::handle generator_function, py::handle until_predicate, double length_increase,
         const std::string& name) {
        return UnfoldFrom(
            layer_of(generator_function),
            {.until_predicate = until_predicate.is_none() ? Function() : layer_of(until_predicate),
             .length_increase = length_increase,
             .name = name});
      },
      py::arg("generator_function"), py::arg("until_predicate") = py::none(),
      py::arg("length_increase") = UnfoldOptions{}.length_increase, py::arg("name") = "");
  m.def(
      "AttentionModel",
      [](size_t attention_dim, std::optional<size_t> attention_span,
         std::optional<int> attention_axis, py::handle init, bool go_backwards,
         bool enable_self_stabilization, py::handle dtype, const std::string& name) {
        return AttentionModel(attention_dim,
                              {.attention_span = attention_span,
                               .attention_axis = attention_axis,
                               .init = init_option(init),
                               .go_backwards = go_backwards,
                               .enable_self_stabilization = enable_self_stabilization,
                               .dtype = data_type(dtype),
                               .name = name});
      },
      py::arg("attention_dim"), py::arg("attention_span") = py::none(),
      py::arg("attention_axis") = py::none(), py::arg("init") = u,
      py::arg("go_backwards") = AttentionModelOptions{}.go_backwards,
      py::arg("enable_self_stabilization") = AttentionModelOptions{}.enable_self_stabilization,
      py::arg("dtype") = py::none(), py::arg("name") = "");
  using Cell = Function (*)(size_t, const RecurrentCellOptions&);
  for (auto [layer, f] :
       {std::pair<const char*, Cell>{"LSTM", &LSTM}, {"GRU", &GRU}, {"RNNStep", &RNNStep}})
    m.def(
        layer,
        [f](size_t shape, std::optional<size_t> cell_shape, py::handle activation,
            bool use_peepholes, py::handle init, py::handle init_bias,
            bool enable_self_stabilization, py::handle dtype, const std::string& name) {
          return f(shape, {.cell_shape = cell_shape,
                           .activation = activation_option(activation),
                           .use_peepholes = use_peepholes,
                           .init = init_option(init),
                           .init_bias = init_option(init_bias),
                           .enable_self_stabilization = enable_self_stabilization,
                           .dtype = data_type(dtype),
                           .name = name});
        },
        py::arg("shape"), py::arg("cell_shape") = py::none(), py::arg("activation") = u,
        py::arg("use_peepholes") = RecurrentCellOptions{}.use_peepholes, py::arg("init") = u,
        py::arg("init_bias") = u,
        py::arg("enable_self_stabilization") = RecurrentCellOptions{}.enable_self_stabilization,
        py::arg("dtype") = py::none(), py::arg("name") = "");
  m.def(
      "Embedding",
      [](std::optional<size_t> shape, py::handle init, py::handle weights, py::handle dtype,
         const std::string& name) {
        if (!weights.is_none()) return Embedding(dense_view(weights).deep_clone(), name);
        if (!shape) throw py::value_error("Embedding needs a shape or weights");
        return Embedding(*shape,
                         {.init = init_option(init), .dtype = data_type(dtype), .name = name});
      },
      py::arg("shape") = py::none(), py::arg("init") = u, py::arg("weights") = py::none(),
      py::arg("dtype") = py::none(), py::arg("name") = "");
  m.def(
      "Stabilizer",
      [](double steepness, bool enable, py::handle dtype, const std::string& name) {
        return Stabilizer(steepness, enable, data_type(dtype), name);
      },
      py::arg("steepness") = kStabilizerSteepness, py::arg("enable_self_stabilization") = true,
      py::arg("dtype") = py::none(), py::arg("name") = "");
}

}  // namespace loom::python
