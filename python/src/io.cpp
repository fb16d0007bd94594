// Readers: stream definitions, deserializers (CTF, IDX, in-memory arrays) and MinibatchSource.
#include "python/src/binding.h"

namespace loom::python {

namespace {

py::dict minibatch_dict(const auto& minibatch) {
  py::dict d;
  for (const auto& [key, data] : minibatch) d[py::cast(key)] = data;
  return d;
}

// One in-memory stream: an array [N, sample...], a CSR matrix, or a list of sequences.
DataArray data_array(py::handle data) {
  if (py::isinstance<Value>(data)) return data.cast<Value>();
  if (!py::isinstance<py::list>(data)) return tensor_of(data);
  std::vector<NDArrayView> sequences;
  for (py::handle s : data) sequences.push_back(tensor_of(s));
  return Value::create(sequences);
}

// The enum value named `name` among `names` (CNTK's strings); ValueError listing them otherwise.
template <typename E, size_t N>
E choice(const char* function, const char* argument, const std::string& name,
         const std::pair<const char*, E> (&names)[N]) {
  std::string known;
  for (const auto& [n, e] : names) {
    if (name == n) return e;
    known += (known.empty() ? "'" : ", '") + std::string(n) + "'";
  }
  throw py::value_error(std::string(function) + ": " + argument + " is one of " + known +
                        ", not '" + name + "'");
}

// A ratio or a range (min, max) of them.
RatioRange ratio_range(py::handle r) {
  if (py::isinstance<py::tuple>(r) || py::isinstance<py::list>(r)) {
    auto pair = r.cast<std::pair<double, double>>();
    return {pair.first, pair.second};
  }
  return r.cast<double>();
}

// A crop size: a number (a square) or (width, height).
CropSize crop_size(py::handle size) {
  if (py::isinstance<py::tuple>(size) || py::isinstance<py::list>(size)) {
    auto pair = size.cast<std::pair<size_t, size_t>>();
    return {pair.first, pair.second};
  }
  return size.cast<size_t>();
}

// CNTK's cntk.io.transforms, as Loom's ImageTransform values (checked by the ImageDeserializer).
// Each alternative is a class of its own, which pybind11's variant conversion needs both ways.
void add_transforms(py::module_& m) {
  py::module_ t = m.def_submodule("transforms", "CNTK's cntk.io.transforms");
  py::class_<transforms::CropOptions>(t, "Crop");
  py::class_<transforms::Scale>(t, "Scale");
  py::class_<transforms::Mean>(t, "Mean");
  py::class_<transforms::ColorOptions>(t, "Color");
  py::class_<transforms::Intensity>(t, "Intensity");
  t.def(
      "crop",
      [](const std::string& crop_type, py::handle size, py::handle side_ratio,
         py::handle area_ratio, py::handle aspect_ratio, const std::string& jitter_type) {
        return transforms::crop(
            {.crop_type = choice("transforms.crop", "crop_type", crop_type,
                                 {std::pair{"center", CropType::center},
                                  std::pair{"randomside", CropType::randomside},
                                  std::pair{"randomarea", CropType::randomarea},
                                  std::pair{"multiview10", CropType::multiview10}}),
             .crop_size = crop_size(size),
             .side_ratio = ratio_range(side_ratio),
             .area_ratio = ratio_range(area_ratio),
             .aspect_ratio = ratio_range(aspect_ratio),
             .jitter_type = choice(
                 "transforms.crop", "jitter_type", jitter_type,
                 {std::pair{"none", JitterType::none}, std::pair{"uniratio", JitterType::uniratio},
                  std::pair{"unilength", JitterType::unilength},
                  std::pair{"uniarea", JitterType::uniarea}})});
      },
      py::arg("crop_type") = "center", py::arg("crop_size") = 0, py::arg("side_ratio") = 0.0,
      py::arg("area_ratio") = 0.0, py::arg("aspect_ratio") = 1.0, py::arg("jitter_type") = "none");
  t.def(
      "scale",
      [](size_t width, size_t height, size_t channels, const std::string& interpolations,
         const std::string& scale_mode, int pad_value) {
        return transforms::scale(
            width, height, channels,
            {.interpolations = choice("transforms.scale", "interpolations", interpolations,
                                      {std::pair{"nearest", Interpolation::nearest},
                                       std::pair{"linear", Interpolation::linear},
                                       std::pair{"cubic", Interpolation::cubic},
                                       std::pair{"lanczos", Interpolation::lanczos}}),
             .scale_mode =
                 choice("transforms.scale", "scale_mode", scale_mode,
                        {std::pair{"fill", ScaleMode::fill}, std::pair{"crop", ScaleMode::crop},
                         std::pair{"pad", ScaleMode::pad}}),
             .pad_value = pad_value});
      },
      py::arg("width"), py::arg("height"), py::arg("channels"),
      py::arg("interpolations") = "linear", py::arg("scale_mode") = "fill",
      py::arg("pad_value") = -1);
  t.def("mean", &transforms::mean, py::arg("filename"));
  t.def(
      "color",
      [](double brightness_radius, double contrast_radius, double saturation_radius) {
        return transforms::color({.brightness_radius = brightness_radius,
                                  .contrast_radius = contrast_radius,
                                  .saturation_radius = saturation_radius});
      },
      py::arg("brightness_radius") = 0.0, py::arg("contrast_radius") = 0.0,
      py::arg("saturation_radius") = 0.0);
  t.def("intensity", &transforms::intensity, py::arg("intensity_stdev"), py::arg("intensity_file"));
}

// A minibatch as a Python source returned it ({StreamInformation: MinibatchData}; {} or None
// once it has ended). A dense Value of a stream with sample shape S may be [N, T, S...] without
// sequence axis, as CNTK's Value(batch=array) is: N sequences of T samples.
Minibatch<StreamInformation> minibatch_of(py::handle result) {
  Minibatch<StreamInformation> mb;
  if (result.is_none()) return mb;
  if (!py::isinstance<py::dict>(result))
    throw py::type_error("UserMinibatchSource.next_minibatch returned " +
                         std::string(py::str(py::type::of(result).attr("__name__"))) +
                         ": return a dict {StreamInformation: MinibatchData}");
  for (auto [k, v] : result.cast<py::dict>()) {
    const auto stream = returned<StreamInformation>(k, "UserMinibatchSource.next_minibatch (a key)",
                                                    "a dict {StreamInformation: MinibatchData}");
    auto data = returned<MinibatchData>(v, "UserMinibatchSource.next_minibatch (a value)",
                                        "a dict {StreamInformation: MinibatchData}");
    const NDShape& shape = data.data.data().shape();
    if (!data.data.is_sequence() && !data.data.is_sparse() &&
        shape.rank() == stream.sample_shape.rank() + 2 && shape.sub_shape(2) == stream.sample_shape)
      data.data = Value(data.data.data(), true);
    mb.emplace(stream, std::move(data));
  }
  return mb;
}

// A UserMinibatchSource subclassed in Python: the loops call its methods with the GIL taken
// (they run with it released); what they raise propagates to the caller.
class PyUserMinibatchSource : public UserMinibatchSource {
 public:
  std::vector<StreamInformation> stream_infos() const override {
    py::gil_scoped_acquire gil;
    return returned<std::vector<StreamInformation>>(method("stream_infos")(),
                                                    "UserMinibatchSource.stream_infos",
                                                    "a list of StreamInformation");
  }
  Minibatch<StreamInformation> next_minibatch(size_t num_samples, size_t number_of_workers,
                                              size_t worker_rank) override {
    py::gil_scoped_acquire gil;
    return minibatch_of(method("next_minibatch")(num_samples, number_of_workers, worker_rank,
                                                 DeviceDescriptor::use_default_device()));
  }
  Dictionary get_checkpoint_state() const override {
    py::gil_scoped_acquire gil;
    if (py::function f = override_of("get_checkpoint_state"))
      return returned<Dictionary>(f(), "UserMinibatchSource.get_checkpoint_state", "a dict");
    return UserMinibatchSource::get_checkpoint_state();
  }
  void restore_from_checkpoint(const Dictionary& state) override {
    py::gil_scoped_acquire gil;
    if (py::function f = override_of("restore_from_checkpoint"))
      f(to_python(DictionaryValue(state.map())));
    else
      UserMinibatchSource::restore_from_checkpoint(state);
  }

 private:
  py::function override_of(const char* name) const {
    return py::get_override(static_cast<const UserMinibatchSource*>(this), name);
  }
  py::function method(const char* name) const {
    py::function f = override_of(name);
    if (!f)
      throw py::type_error(std::string("a UserMinibatchSource subclass must define ") + name +
                           "()");
    return f;
  }
};

}  // namespace

void add_io(py::module_& m) {
  add_transforms(m);
  m.attr("INFINITELY_REPEAT") = INFINITELY_REPEAT;
  m.attr("FULL_DATA_SWEEP") = FULL_DATA_SWEEP;

  py::class_<StreamDef>(m, "StreamDef")
      .def(py::init([](py::handle field, std::optional<size_t> shape, bool is_sparse,
                       std::optional<std::vector<ImageTransform>> transforms, py::handle dtype,
                       bool defines_mb_size) {
             return StreamDef{.field = field.is_none() ? "" : field.cast<std::string>(),
                              .shape = shape.value_or(0),
                              .is_sparse = is_sparse,
                              .transforms = transforms.value_or(std::vector<ImageTransform>{}),
                              .dtype = data_type(dtype),
                              .defines_mb_size = defines_mb_size};
           }),
           py::arg("field") = py::none(), py::arg("shape") = py::none(),
           py::arg("is_sparse") = false, py::arg("transforms") = py::none(),
           py::arg("dtype") = py::none(), py::arg("defines_mb_size") = false)
      .def_readonly("field", &StreamDef::field)
      .def_readonly("shape", &StreamDef::shape)
      .def_readonly("is_sparse", &StreamDef::is_sparse);

  py::class_<IDXStreamDef>(m, "IDXStreamDef")
      .def(py::init([](const std::string& path, py::handle shape, double scale, size_t num_classes,
                       bool is_sparse, py::handle dtype) {
             return IDXStreamDef{.path = path,
                                 .shape = shape.is_none() ? NDShape{} : shape_of(shape),
                                 .scale = scale,
                                 .num_classes = num_classes,
                                 .is_sparse = is_sparse,
                                 .dtype = data_type(dtype)};
           }),
           py::arg("path"), py::arg("shape") = py::none(), py::arg("scale") = 1.0,
           py::arg("num_classes") = 0, py::arg("is_sparse") = false, py::arg("dtype") = py::none());

  py::class_<StreamInformation>(m, "StreamInformation")
      .def(py::init([](const std::string& name, size_t id, const std::string& storage,
                       py::handle dtype, py::handle shape) {
             return StreamInformation{
                 .name = name,
                 .id = id,
                 .storage = storage == "sparse" ? StorageFormat::SparseCSR : StorageFormat::Dense,
                 .dtype = data_type(dtype),
                 .sample_shape = shape_of(shape)};
           }),
           py::arg("name"), py::arg("stream_id"), py::arg("storage_format"), py::arg("dtype"),
           py::arg("shape"))
      .def_readonly("name", &StreamInformation::name)
      .def_readonly("stream_id", &StreamInformation::id)
      .def_property_readonly("is_sparse", &StreamInformation::is_sparse)
      .def_property_readonly("dtype",
                             [](const StreamInformation& s) { return numpy_dtype(s.dtype); })
      .def_property_readonly("shape",
                             [](const StreamInformation& s) { return shape_tuple(s.sample_shape); })
      .def("__eq__", &StreamInformation::operator==)
      .def("__hash__", [](const StreamInformation& s) { return std::hash<StreamInformation>()(s); })
      .def("__repr__",
           [](const StreamInformation& s) { return "StreamInformation(" + s.name + ")"; });

  py::class_<MinibatchData>(m, "MinibatchData")
      .def(
          py::init([](const Value& data, size_t num_sequences, size_t num_samples, bool sweep_end) {
            return MinibatchData{data, num_sequences, num_samples, sweep_end};
          }),
          py::arg("value"), py::arg("num_sequences"), py::arg("num_samples"), py::arg("sweep_end"))
      .def_readonly("data", &MinibatchData::data)
      .def_readonly("number_of_sequences", &MinibatchData::number_of_sequences)
      .def_readonly("number_of_samples", &MinibatchData::number_of_samples)
      .def_readonly("end_of_sweep", &MinibatchData::sweep_end)
      .def_readonly("sweep_end", &MinibatchData::sweep_end)
      .def_property_readonly(
          "shape", [](const MinibatchData& d) { return shape_tuple(d.data.data().shape()); })
      .def_property_readonly("is_sparse", [](const MinibatchData& d) { return d.data.is_sparse(); })
      .def("asarray", [](const MinibatchData& d) { return value_to_numpy(d.data); })
      .def("__len__", [](const MinibatchData& d) { return d.number_of_sequences; });

  py::class_<Deserializer, std::shared_ptr<Deserializer>>(m, "Deserializer")
      .def_property_readonly("stream_infos", &Deserializer::stream_infos);
  py::class_<CTFDeserializer, Deserializer, std::shared_ptr<CTFDeserializer>>(m, "CTFDeserializer")
      .def(py::init([](const std::string& filename, py::dict streams, size_t max_errors,
                       int trace_level, bool skip_sequence_ids) {
             StreamDefs defs;
             for (auto [name, def] : streams)
               defs.emplace_back(name.cast<std::string>(), def.cast<StreamDef>());
             return std::make_shared<CTFDeserializer>(
                 filename, defs,
                 CTFOptions{.max_errors = max_errors,
                            .trace_level = trace_level,
                            .skip_sequence_ids = skip_sequence_ids});
           }),
           py::arg("filename"), py::arg("streams"), py::arg("max_errors") = 0,
           py::arg("trace_level") = 1, py::arg("skip_sequence_ids") = false);
  py::class_<IDXDeserializer, Deserializer, std::shared_ptr<IDXDeserializer>>(m, "IDXDeserializer")
      .def(py::init([](py::dict streams) {
             IDXStreamDefs defs;
             for (auto [name, def] : streams)
               defs.emplace_back(name.cast<std::string>(), def.cast<IDXStreamDef>());
             return std::make_shared<IDXDeserializer>(defs);
           }),
           py::arg("streams"));
  py::class_<ImageDeserializer, Deserializer, std::shared_ptr<ImageDeserializer>>(
      m, "ImageDeserializer")
      .def(py::init([](const std::string& filename, py::dict streams, size_t max_errors) {
             StreamDefs defs;
             for (auto [name, def] : streams)
               defs.emplace_back(name.cast<std::string>(), def.cast<StreamDef>());
             return std::make_shared<ImageDeserializer>(filename, defs,
                                                        ImageOptions{.max_errors = max_errors});
           }),
           py::arg("filename"), py::arg("streams"), py::arg("max_errors") = 0)
      .def_property_readonly("number_of_skipped", &ImageDeserializer::number_of_skipped);

  // What every source has (Loom's reader and sources written in Python alike).
  py::class_<MinibatchSourceInterface, std::shared_ptr<MinibatchSourceInterface>>(
      m, "MinibatchSourceInterface")
      .def("stream_infos", &MinibatchSourceInterface::stream_infos)
      .def("__getitem__", &MinibatchSourceInterface::operator[], py::arg("name"))
      .def("stream_info", &MinibatchSourceInterface::operator[], py::arg("name"))
      .def_property_readonly("streams",
                             [](const MinibatchSourceInterface& s) {
                               py::dict d;
                               for (const auto& i : s.stream_infos()) d[py::str(i.name)] = i;
                               return py::module_::import("types").attr("SimpleNamespace")(**d);
                             })
      .def("is_infinite", &MinibatchSourceInterface::is_infinite)
      // {Variable: MinibatchData} with an input map, {StreamInformation: MinibatchData}
      // without; {} once the source has ended.
      .def(
          "next_minibatch",
          [](MinibatchSourceInterface& s, size_t size, py::handle input_map, py::handle /*device*/,
             std::optional<size_t> num_data_partitions,
             std::optional<size_t> partition_index) -> py::dict {
            const size_t parts = num_data_partitions.value_or(1),
                         index = partition_index.value_or(0);
            if (input_map.is_none()) {
              Minibatch<StreamInformation> mb;
              {
                py::gil_scoped_release nogil;
                mb = s.next_minibatch(size, parts, index);
              }
              return minibatch_dict(mb);
            }
            std::unordered_map<Variable, StreamInformation> map;
            for (auto [k, v] : input_map.cast<py::dict>())
              map.emplace(k.cast<Variable>(), v.cast<StreamInformation>());
            Minibatch<Variable> mb;
            {
              py::gil_scoped_release nogil;
              mb = s.next_minibatch(size, map, parts, index);
            }
            return minibatch_dict(mb);
          },
          py::arg("minibatch_size_in_samples"), py::arg("input_map") = py::none(),
          py::arg("device") = py::none(), py::arg("num_data_partitions") = py::none(),
          py::arg("partition_index") = py::none())
      .def("get_checkpoint_state", &MinibatchSourceInterface::get_checkpoint_state)
      .def("restore_from_checkpoint", &MinibatchSourceInterface::restore_from_checkpoint,
           py::arg("checkpoint"));

  py::class_<MinibatchSource, MinibatchSourceInterface, std::shared_ptr<MinibatchSource>>(
      m, "MinibatchSource")
      .def(
          py::init([](py::handle deserializers, size_t max_samples, size_t max_sweeps,
                      size_t randomization_window_in_chunks, uint64_t randomization_seed,
                      bool frame_mode, bool randomize) {
            std::vector<std::shared_ptr<Deserializer>> all;
            if (py::isinstance<py::list>(deserializers) || py::isinstance<py::tuple>(deserializers))
              all = deserializers.cast<std::vector<std::shared_ptr<Deserializer>>>();
            else
              all.push_back(deserializers.cast<std::shared_ptr<Deserializer>>());
            return std::make_shared<MinibatchSource>(
                all, MinibatchSourceConfig{
                         .randomize = randomize,
                         .max_samples = max_samples,
                         .max_sweeps = max_sweeps,
                         .randomization_seed = randomization_seed,
                         .randomization_window_in_chunks = randomization_window_in_chunks,
                         .frame_mode = frame_mode});
          }),
          py::arg("deserializers"), py::arg("max_samples") = INFINITELY_REPEAT,
          py::arg("max_sweeps") = INFINITELY_REPEAT,
          py::arg("randomization_window_in_chunks") = 128, py::arg("randomization_seed") = 0,
          py::arg("frame_mode") = false, py::arg("randomize") = true)
      .def_property_readonly("samples_per_sweep", &MinibatchSource::samples_per_sweep)
      .def_property_readonly("position", &MinibatchSource::position);

  // Subclassed in Python (CNTK's cntk.io.UserMinibatchSource): define stream_infos(),
  // next_minibatch(num_samples, number_of_workers, worker_rank, device=None) and, for a source
  // with a position to resume from, get_checkpoint_state() and restore_from_checkpoint(state).
  py::class_<UserMinibatchSource, MinibatchSourceInterface, PyUserMinibatchSource,
             std::shared_ptr<UserMinibatchSource>>(m, "UserMinibatchSource")
      .def(py::init<>());

  m.def(
      "MinibatchSourceFromData",
      [](py::dict data_streams, size_t max_samples, size_t max_sweeps, bool randomize) {
        DataStreams streams;
        for (auto [name, data] : data_streams)
          streams.emplace_back(name.cast<std::string>(), data_array(data));
        return std::make_shared<MinibatchSource>(MinibatchSourceFromData(
            streams,
            {.randomize = randomize, .max_samples = max_samples, .max_sweeps = max_sweeps}));
      },
      py::arg("data_streams"), py::arg("max_samples") = INFINITELY_REPEAT,
      py::arg("max_sweeps") = INFINITELY_REPEAT, py::arg("randomize") = false);
}

}  // namespace loom::python
