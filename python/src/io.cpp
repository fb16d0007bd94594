// CNTK's cntk.io: stream definitions, deserializers (CTF, IDX, images, HTK, CBF, in-memory
// arrays, user deserializers), MinibatchSource, and cntk.io.transforms.
#include <algorithm>

#include "loom/io/cbf_deserializer.h"
#include "loom/io/htk_deserializer.h"
#include "loom/io/user_deserializer.h"
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

// The name of value among names (a C++ default as CNTK's string).
template <typename E, size_t N>
const char* name_of(const std::pair<const char*, E> (&names)[N], E value) {
  return std::ranges::find(names, value, &std::pair<const char*, E>::second)->first;
}

// CNTK's names of the transforms' choices.
constexpr std::pair<const char*, CropType> kCropTypes[] = {{"center", CropType::center},
                                                           {"randomside", CropType::randomside},
                                                           {"randomarea", CropType::randomarea},
                                                           {"multiview10", CropType::multiview10}};
constexpr std::pair<const char*, JitterType> kJitterTypes[] = {{"none", JitterType::none},
                                                               {"uniratio", JitterType::uniratio},
                                                               {"unilength", JitterType::unilength},
                                                               {"uniarea", JitterType::uniarea}};
constexpr std::pair<const char*, Interpolation> kInterpolations[] = {
    {"nearest", Interpolation::nearest},
    {"linear", Interpolation::linear},
    {"cubic", Interpolation::cubic},
    {"lanczos", Interpolation::lanczos}};
constexpr std::pair<const char*, ScaleMode> kScaleModes[] = {
    {"fill", ScaleMode::fill}, {"crop", ScaleMode::crop}, {"pad", ScaleMode::pad}};

// A deserializer's streams: a dict {name: StreamDef} (CNTK's StreamDefs), or CNTK's list of
// StreamConfiguration.
StreamDefs stream_defs(py::handle streams) {
  StreamDefs defs;
  if (py::isinstance<py::dict>(streams)) {
    for (auto [name, def] : streams.cast<py::dict>())
      defs.emplace_back(name.cast<std::string>(), def.cast<StreamDef>());
    return defs;
  }
  for (py::handle c : streams) {
    auto config = c.cast<StreamConfiguration>();
    defs.emplace_back(config.name, config.stream_def());
  }
  return defs;
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
  py::module_ t = submodule(m, "transforms");
  py::class_<transforms::CropOptions>(t, "Crop");
  py::class_<transforms::Scale>(t, "Scale");
  py::class_<transforms::Mean>(t, "Mean");
  py::class_<transforms::ColorOptions>(t, "Color");
  py::class_<transforms::Intensity>(t, "Intensity");
  const transforms::CropOptions crop;  // the defaults
  t.def(
      "crop",
      [](const std::string& crop_type, py::handle size, py::handle side_ratio,
         py::handle area_ratio, py::handle aspect_ratio, const std::string& jitter_type) {
        return transforms::crop(
            {.crop_type = choice("transforms.crop", "crop_type", crop_type, kCropTypes),
             .crop_size = crop_size(size),
             .side_ratio = ratio_range(side_ratio),
             .area_ratio = ratio_range(area_ratio),
             .aspect_ratio = ratio_range(aspect_ratio),
             .jitter_type = choice("transforms.crop", "jitter_type", jitter_type, kJitterTypes)});
      },
      py::arg("crop_type") = name_of(kCropTypes, crop.crop_type),
      py::arg("crop_size") = crop.crop_size.width, py::arg("side_ratio") = crop.side_ratio.min,
      py::arg("area_ratio") = crop.area_ratio.min, py::arg("aspect_ratio") = crop.aspect_ratio.min,
      py::arg("jitter_type") = name_of(kJitterTypes, crop.jitter_type));
  const transforms::ScaleOptions scale;
  t.def(
      "scale",
      [](size_t width, size_t height, size_t channels, const std::string& interpolations,
         const std::string& scale_mode, int pad_value) {
        return transforms::scale(
            width, height, channels,
            {.interpolations =
                 choice("transforms.scale", "interpolations", interpolations, kInterpolations),
             .scale_mode = choice("transforms.scale", "scale_mode", scale_mode, kScaleModes),
             .pad_value = pad_value});
      },
      py::arg("width"), py::arg("height"), py::arg("channels"),
      py::arg("interpolations") = name_of(kInterpolations, scale.interpolations),
      py::arg("scale_mode") = name_of(kScaleModes, scale.scale_mode),
      py::arg("pad_value") = scale.pad_value);
  t.def("mean", &transforms::mean, py::arg("filename"));
  const transforms::ColorOptions color;
  t.def(
      "color",
      [](double brightness_radius, double contrast_radius, double saturation_radius) {
        return transforms::color({.brightness_radius = brightness_radius,
                                  .contrast_radius = contrast_radius,
                                  .saturation_radius = saturation_radius});
      },
      py::arg("brightness_radius") = color.brightness_radius,
      py::arg("contrast_radius") = color.contrast_radius,
      py::arg("saturation_radius") = color.saturation_radius);
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
    // A sequence Value is taken as it is (data() would pad a packed one).
    if (!data.data.is_sequence() && !data.data.is_sparse()) {
      const NDShape& shape = data.data.data().shape();
      if (shape.rank() == stream.sample_shape.rank() + 2 &&
          shape.sub_shape(2) == stream.sample_shape)
        data.data = Value(data.data.data(), true);
    }
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

// A UserDeserializer subclassed in Python (CNTK's cntk.io.UserDeserializer): stream_infos(),
// num_chunks() and get_chunk(chunk_id) -> {stream name: numpy array, scipy.sparse.csr_matrix or
// a list of them, one per sequence}. MinibatchSource calls get_chunk on its reader threads
// (with the GIL released): each call takes the GIL. What a method raises, or data that do not
// fit, surface as an exception naming the method and the chunk.
class PyUserDeserializer : public UserDeserializer {
 public:
  std::vector<StreamInformation> declared_stream_infos() override {
    py::gil_scoped_acquire gil;
    return returned<std::vector<StreamInformation>>(
        call("stream_infos", "()"), "UserDeserializer.stream_infos", "a list of StreamInformation");
  }
  size_t num_chunks() override {
    py::gil_scoped_acquire gil;
    return returned<size_t>(call("num_chunks", "()"), "UserDeserializer.num_chunks",
                            "a non-negative int");
  }
  DataStreams get_chunk(size_t chunk_id) override {
    py::gil_scoped_acquire gil;
    const std::string where = "UserDeserializer.get_chunk(" + std::to_string(chunk_id) + ")";
    py::object result = call("get_chunk", "(" + std::to_string(chunk_id) + ")", chunk_id);
    if (!py::isinstance<py::dict>(result))
      throw py::type_error(where + " returned " +
                           py::str(py::type::of(result).attr("__name__")).cast<std::string>() +
                           "; it must return a dict {stream name: data}");
    DataStreams out;
    for (auto [key, data] : result.cast<py::dict>()) {
      const std::string name = py::str(key);
      // The declared dtype, so that float64 data for a float32 stream is converted.
      std::optional<DataType> want;
      std::optional<size_t> rank;
      for (const StreamInformation& s : declared_streams())
        if (s.name == name) want = s.dtype, rank = s.sample_shape.rank();
      // A sequence given as one sample (CNTK: an array of the sample's shape) is a sequence
      // of length 1.
      auto sequence = [&](py::handle seq) {
        if (!rank || is_sparse_matrix(seq)) return tensor_of(seq, want);
        py::array a = py::array::ensure(seq);
        if (!a || size_t(a.ndim()) != *rank) return tensor_of(seq, want);
        py::object shape = py::make_tuple(1) + py::tuple(a.attr("shape"));
        return tensor_of(a.attr("reshape")(shape), want);
      };
      try {
        if (py::isinstance<py::list>(data)) {
          std::vector<NDArrayView> sequences;
          for (py::handle seq : data) sequences.push_back(sequence(seq));
          LOOM_CHECK(!sequences.empty(), DataError, where, ": stream '", name,
                     "' is an empty list; a chunk holds at least one sequence");
          out.emplace_back(name, Value::create(sequences));
        } else {
          out.emplace_back(name, tensor_of(data, want));
        }
      } catch (const py::type_error& e) {
        throw py::type_error(where + ": stream '" + name + "': " + e.what() +
                             "; expected a numpy array, a scipy.sparse.csr_matrix, or a list of "
                             "them (one per sequence)");
      } catch (const Error& e) {
        if (dynamic_cast<const DataError*>(&e)) throw;
        throw DataError(where + ": stream '" + name + "': " + e.what());
      }
    }
    return out;
  }

 private:
  // The Python method `name` called with args; a Python exception it raises becomes a
  // DataError naming the method (with the original type and message), since it may be raised
  // on a reader thread.
  template <typename... Args>
  py::object call(const char* name, const std::string& shown, Args&&... args) {
    // Looked up on the class, not the object: Deserializer's stream_infos property must not
    // count as the subclass's method (getattr on the object would call it, and so this).
    py::handle self =
        py::detail::get_object_handle(static_cast<const UserDeserializer*>(this),
                                      py::detail::get_type_info(typeid(UserDeserializer)));
    py::object method = self ? py::getattr(py::type::of(self), name, py::none()) : py::none();
    // A function of the subclass, not one of pybind11's (PyInstanceMethod over a PyCFunction).
    const bool defined = PyFunction_Check(method.ptr()) ||
                         (PyCallable_Check(method.ptr()) && !PyCFunction_Check(method.ptr()) &&
                          !PyInstanceMethod_Check(method.ptr()));
    if (!defined)
      throw py::type_error(std::string("a UserDeserializer subclass must define ") + name +
                           (std::string(name) == "get_chunk" ? "(chunk_id)" : "()"));
    try {
      return self.attr(name)(std::forward<Args>(args)...);
    } catch (py::error_already_set& e) {
      const std::string type = py::str(e.type().attr("__name__"));
      const std::string what = py::str(e.value());
      throw DataError("UserDeserializer." + std::string(name) + shown + " raised " + type + ": " +
                      what);
    }
  }
};

// Raises NotImplementedError (CNTK's UserDeserializer base methods).
py::object not_implemented(const char* message) {
  PyErr_SetString(PyExc_NotImplementedError, message);
  throw py::error_already_set();
}

// The deserializers of a MinibatchSource: one or a list; each pointer keeps its Python object
// (a UserDeserializer subclass's state) alive.
std::vector<std::shared_ptr<Deserializer>> deserializers_of(py::handle deserializers) {
  std::vector<py::handle> all;
  if (py::isinstance<py::list>(deserializers) || py::isinstance<py::tuple>(deserializers))
    for (py::handle d : deserializers) all.push_back(d);
  else
    all.push_back(deserializers);
  std::vector<std::shared_ptr<Deserializer>> out;
  for (py::handle d : all) {
    auto cpp = d.cast<std::shared_ptr<Deserializer>>();
    Deserializer* raw = cpp.get();
    out.emplace_back(raw, [python = hold(py::reinterpret_borrow<py::object>(d))](auto*) {});
  }
  return out;
}

// A MinibatchSource whose last owner drops it with the GIL released: its destructor waits for
// the minibatch being read ahead, which may call a UserDeserializer.
std::shared_ptr<MinibatchSource> gil_free_deleting(MinibatchSource* source) {
  return std::shared_ptr<MinibatchSource>(source, [](MinibatchSource* p) {
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release nogil;
      delete p;
    } else {
      delete p;
    }
  });
}

}  // namespace

void add_io(py::module_ m) {
  add_transforms(m);
  m.attr("INFINITELY_REPEAT") = INFINITELY_REPEAT;
  m.attr("FULL_DATA_SWEEP") = FULL_DATA_SWEEP;
  m.attr("DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS") = DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS;

  // CNTK's StreamDef: field (the name in the file; CNTK's stream_alias), shape (CNTK's dim),
  // and the HTK deserializers' context, scp, mlf (which makes the stream sparse), broadcast and
  // max_sequence_length.
  const StreamDef stream_def;  // the defaults
  py::class_<StreamDef>(m, "StreamDef")
      .def(py::init([](py::handle field, std::optional<size_t> shape, bool is_sparse,
                       std::optional<std::vector<ImageTransform>> transforms, py::handle context,
                       py::handle scp, py::handle mlf, std::optional<bool> broadcast,
                       bool defines_mb_size, size_t max_sequence_length, py::handle dtype) {
             auto files = [](py::handle f) {
               if (f.is_none()) return std::vector<std::string>{};
               if (py::isinstance<py::str>(f))
                 return std::vector<std::string>{f.cast<std::string>()};
               return f.cast<std::vector<std::string>>();
             };
             StreamDef d{.field = field.is_none() ? "" : field.cast<std::string>(),
                         .shape = shape.value_or(0),
                         .is_sparse = is_sparse || !mlf.is_none(),
                         .transforms = transforms.value_or(std::vector<ImageTransform>{}),
                         .dtype = data_type(dtype),
                         .defines_mb_size = defines_mb_size,
                         .scp = files(scp),
                         .mlf = files(mlf),
                         .broadcast = broadcast.value_or(false),
                         .max_sequence_length = max_sequence_length};
             if (!context.is_none()) d.context = context.cast<std::pair<size_t, size_t>>();
             return d;
           }),
           py::arg("field") = py::none(), py::arg("shape") = py::none(),
           py::arg("is_sparse") = stream_def.is_sparse, py::arg("transforms") = py::none(),
           py::arg("context") = py::none(), py::arg("scp") = py::none(),
           py::arg("mlf") = py::none(), py::arg("broadcast") = py::none(),
           py::arg("defines_mb_size") = stream_def.defines_mb_size,
           py::arg("max_sequence_length") = stream_def.max_sequence_length,
           py::arg("dtype") = py::none())
      .def_readonly("field", &StreamDef::field)
      .def_property_readonly("stream_alias",
                             [](const StreamDef& d) -> py::object {
                               if (d.field.empty()) return py::none();
                               return py::str(d.field);
                             })
      .def_readonly("shape", &StreamDef::shape)
      .def_readonly("dim", &StreamDef::shape)
      .def_readonly("is_sparse", &StreamDef::is_sparse)
      .def_readonly("transforms", &StreamDef::transforms)
      .def_readonly("context", &StreamDef::context)
      .def_readonly("scp", &StreamDef::scp)
      .def_readonly("mlf", &StreamDef::mlf)
      .def_readonly("broadcast", &StreamDef::broadcast)
      .def_readonly("defines_mb_size", &StreamDef::defines_mb_size)
      .def_readonly("max_sequence_length", &StreamDef::max_sequence_length);

  // CNTK's low-level stream configuration of the text and binary format readers.
  const StreamConfiguration stream_configuration;
  py::class_<StreamConfiguration>(m, "StreamConfiguration")
      .def(py::init([](const std::string& name, size_t dim, bool is_sparse,
                       const std::string& stream_alias, bool defines_mb_size) {
             return StreamConfiguration{name, dim, is_sparse, stream_alias, defines_mb_size};
           }),
           py::arg("name"), py::arg("dim"), py::arg("is_sparse") = stream_configuration.is_sparse,
           py::arg("stream_alias") = stream_configuration.stream_alias,
           py::arg("defines_mb_size") = stream_configuration.defines_mb_size)
      .def_readwrite("name", &StreamConfiguration::name)
      .def_readwrite("dim", &StreamConfiguration::dim)
      .def_readwrite("is_sparse", &StreamConfiguration::is_sparse)
      .def_readwrite("stream_alias", &StreamConfiguration::stream_alias)
      .def_readwrite("defines_mb_size", &StreamConfiguration::defines_mb_size)
      .def("__repr__", [](const StreamConfiguration& c) {
        return "StreamConfiguration(" + c.name + ", " + std::to_string(c.dim) + ")";
      });

  const IDXStreamDef idx_stream_def;
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
           py::arg("path"), py::arg("shape") = py::none(), py::arg("scale") = idx_stream_def.scale,
           py::arg("num_classes") = idx_stream_def.num_classes,
           py::arg("is_sparse") = idx_stream_def.is_sparse, py::arg("dtype") = py::none());

  py::class_<StreamInformation>(m, "StreamInformation")
      .def(py::init([](const std::string& name, size_t id, const std::string& storage,
                       py::handle dtype, py::handle shape, bool defines_mb_size) {
             return StreamInformation{
                 .name = name,
                 .id = id,
                 .storage = choice("StreamInformation", "storage_format", storage,
                                   {std::pair{"dense", StorageFormat::Dense},
                                    std::pair{"sparse", StorageFormat::SparseCSR}}),
                 .dtype = data_type(dtype),
                 .sample_shape = shape_of(shape),
                 .defines_mb_size = defines_mb_size};
           }),
           py::arg("name"), py::arg("stream_id"), py::arg("storage_format"), py::arg("dtype"),
           py::arg("shape"), py::arg("defines_mb_size") = StreamInformation{}.defines_mb_size)
      .def_readonly("defines_mb_size", &StreamInformation::defines_mb_size)
      .def_property_readonly(
          "storage_format",
          [](const StreamInformation& s) { return s.is_sparse() ? "sparse" : "dense"; })
      .def_property_readonly("sample_shape",
                             [](const StreamInformation& s) { return shape_tuple(s.sample_shape); })
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
      .def_readonly("num_sequences", &MinibatchData::number_of_sequences)
      .def_readonly("num_samples", &MinibatchData::number_of_samples)
      .def_readonly("number_of_sequences", &MinibatchData::number_of_sequences)
      .def_readonly("number_of_samples", &MinibatchData::number_of_samples)
      .def_property_readonly("mask", [](const MinibatchData& d) { return mask_of(d.data); })
      .def(
          "as_sequences",
          [](const MinibatchData& d, py::handle /*variable*/) {
            return sequences_of(d.data, true);
          },
          py::arg("variable") = py::none())
      .def_readonly("end_of_sweep", &MinibatchData::sweep_end)
      .def_readonly("sweep_end", &MinibatchData::sweep_end)
      .def_property_readonly("shape",
                             [](const MinibatchData& d) { return shape_tuple(d.data.shape()); })
      .def_property_readonly("is_sparse", [](const MinibatchData& d) { return d.data.is_sparse(); })
      .def("asarray", [](const MinibatchData& d) { return padded_numpy(d.data); })
      .def("__len__", [](const MinibatchData& d) { return d.number_of_sequences; });

  py::class_<Deserializer, std::shared_ptr<Deserializer>>(m, "Deserializer")
      .def_property_readonly("stream_infos", &Deserializer::stream_infos);
  const CTFOptions ctf;
  py::class_<CTFDeserializer, Deserializer, std::shared_ptr<CTFDeserializer>>(m, "CTFDeserializer")
      .def(py::init([](const std::string& filename, py::handle streams, size_t max_errors,
                       int trace_level, bool skip_sequence_ids) {
             return std::make_shared<CTFDeserializer>(
                 filename, stream_defs(streams),
                 CTFOptions{.max_errors = max_errors,
                            .trace_level = trace_level,
                            .skip_sequence_ids = skip_sequence_ids});
           }),
           py::arg("filename"), py::arg("streams"), py::arg("max_errors") = ctf.max_errors,
           py::arg("trace_level") = ctf.trace_level,
           py::arg("skip_sequence_ids") = ctf.skip_sequence_ids);
  py::class_<IDXDeserializer, Deserializer, std::shared_ptr<IDXDeserializer>>(m, "IDXDeserializer")
      .def(py::init([](py::dict streams) {
             IDXStreamDefs defs;
             for (auto [name, def] : streams)
               defs.emplace_back(name.cast<std::string>(), def.cast<IDXStreamDef>());
             return std::make_shared<IDXDeserializer>(defs);
           }),
           py::arg("streams"));
  const ImageOptions image;
  py::class_<ImageDeserializer, Deserializer, std::shared_ptr<ImageDeserializer>>(
      m, "ImageDeserializer")
      .def(py::init([](const std::string& filename, py::handle streams, size_t max_errors) {
             return std::make_shared<ImageDeserializer>(filename, stream_defs(streams),
                                                        ImageOptions{.max_errors = max_errors});
           }),
           py::arg("filename"), py::arg("streams"), py::arg("max_errors") = image.max_errors)
      .def_property_readonly("number_of_skipped", &ImageDeserializer::number_of_skipped);
  // CNTK's Base64ImageDeserializer: the images in the map file, "[key\t]label\tbase64" lines.
  py::class_<Base64ImageDeserializer, ImageDeserializer, std::shared_ptr<Base64ImageDeserializer>>(
      m, "Base64ImageDeserializer")
      .def(py::init([](const std::string& filename, py::handle streams, size_t max_errors) {
             return std::make_shared<Base64ImageDeserializer>(
                 filename, stream_defs(streams), ImageOptions{.max_errors = max_errors});
           }),
           py::arg("filename"), py::arg("streams"), py::arg("max_errors") = image.max_errors);
  // CNTK's binary format reader (cbf_deserializer.h): the streams, a dict of StreamDef or a
  // list of StreamConfiguration, rename the file's streams; every stream of the file is read.
  py::class_<CBFDeserializer, Deserializer, std::shared_ptr<CBFDeserializer>>(m, "CBFDeserializer")
      .def(py::init([](const std::string& filename, py::handle streams) {
             return std::make_shared<CBFDeserializer>(
                 filename, streams.is_none() ? StreamDefs{} : stream_defs(streams));
           }),
           py::arg("filename"), py::arg("streams") = py::dict());

  // CNTK's speech readers (htk_deserializer.h): StreamDef(shape=dim, scp=..., context=(l, r))
  // and StreamDef(shape=labels, mlf=...).
  py::class_<HTKFeatureDeserializer, Deserializer, std::shared_ptr<HTKFeatureDeserializer>>(
      m, "HTKFeatureDeserializer")
      .def(py::init([](py::handle streams) {
             return std::make_shared<HTKFeatureDeserializer>(stream_defs(streams));
           }),
           py::arg("streams"));
  py::class_<HTKMLFDeserializer, Deserializer, std::shared_ptr<HTKMLFDeserializer>>(
      m, "HTKMLFDeserializer")
      .def(py::init([](const std::string& label_mapping_file, py::handle streams,
                       bool phone_boundaries) {
             return std::make_shared<HTKMLFDeserializer>(label_mapping_file, stream_defs(streams),
                                                         phone_boundaries);
           }),
           py::arg("label_mapping_file"), py::arg("streams"),
           py::arg("phoneBoundaries") = HTKMLFDeserializer::kPhoneBoundaries);

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
            auto by_stream = [&] {
              Minibatch<StreamInformation> mb;
              {
                py::gil_scoped_release nogil;
                mb = s.next_minibatch(size, parts, index);
              }
              return minibatch_dict(mb);
            };
            if (input_map.is_none()) return by_stream();
            const py::dict given = input_map.cast<py::dict>();
            if (std::ranges::any_of(given,
                                    [](auto kv) { return !py::isinstance<Variable>(kv.first); })) {
              // CNTK's input map takes any keys: each gets its stream's data.
              const py::dict streams = by_stream();
              py::dict out;
              if (streams.empty()) return out;
              for (auto [k, v] : given) out[k] = streams[v];
              return out;
            }
            std::unordered_map<Variable, StreamInformation> map;
            for (auto [k, v] : given) map.emplace(k.cast<Variable>(), v.cast<StreamInformation>());
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
           py::arg("checkpoint"), py::call_guard<py::gil_scoped_release>());

  const MinibatchSourceConfig config;  // the defaults
  // CNTK's MinibatchSource. trace_level and multithreaded_deserializer do not change what is
  // read (Loom reads on reader threads always); max_errors is a deserializer's option in Loom
  // (CTFDeserializer, ImageDeserializer): here it must be 0.
  py::class_<MinibatchSource, MinibatchSourceInterface, std::shared_ptr<MinibatchSource>>(
      m, "MinibatchSource")
      .def(
          py::init([](py::handle deserializers, size_t max_samples, size_t max_sweeps,
                      size_t randomization_window_in_chunks, size_t randomization_window_in_samples,
                      uint64_t randomization_seed, py::handle /*trace_level*/,
                      py::handle /*multithreaded_deserializer*/, bool frame_mode,
                      size_t truncation_length, bool randomize, size_t max_errors) {
            if (max_errors != 0)
              throw py::value_error(
                  "MinibatchSource: max_errors is an option of the deserializer in Loom; pass "
                  "it to CTFDeserializer or ImageDeserializer");
            // CNTK: a window in samples replaces the default window in chunks.
            if (randomization_window_in_samples > 0 &&
                randomization_window_in_chunks == DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS)
              randomization_window_in_chunks = 0;
            auto all = deserializers_of(deserializers);
            align_htk_by_key(all);
            return gil_free_deleting(new MinibatchSource(
                all, MinibatchSourceConfig{
                         .randomize = randomize,
                         .max_samples = max_samples,
                         .max_sweeps = max_sweeps,
                         .randomization_seed = randomization_seed,
                         .randomization_window_in_chunks = randomization_window_in_chunks,
                         .randomization_window_in_samples = randomization_window_in_samples,
                         .frame_mode = frame_mode,
                         .truncation_length = truncation_length}));
          }),
          py::arg("deserializers"), py::arg("max_samples") = config.max_samples,
          py::arg("max_sweeps") = config.max_sweeps,
          py::arg("randomization_window_in_chunks") = config.randomization_window_in_chunks,
          py::arg("randomization_window_in_samples") = config.randomization_window_in_samples,
          py::arg("randomization_seed") = config.randomization_seed,
          py::arg("trace_level") = py::none(), py::arg("multithreaded_deserializer") = py::none(),
          py::arg("frame_mode") = config.frame_mode,
          py::arg("truncation_length") = config.truncation_length,
          py::arg("randomize") = config.randomize, py::arg("max_errors") = 0)
      .def_property_readonly("samples_per_sweep", &MinibatchSource::samples_per_sweep)
      .def_property_readonly("position", &MinibatchSource::position)
      // CNTK: the checkpoint state; setting it restores the source to that position.
      .def_property(
          "current_position", &MinibatchSource::get_checkpoint_state,
          [](MinibatchSource& s, const Dictionary& position) {
            s.restore_from_checkpoint(position);
          },
          py::call_guard<py::gil_scoped_release>());

  // Subclassed in Python (CNTK's cntk.io.UserDeserializer): define stream_infos(),
  // num_chunks() and get_chunk(chunk_id), and pass it to MinibatchSource.
  py::class_<UserDeserializer, Deserializer, PyUserDeserializer, std::shared_ptr<UserDeserializer>>(
      m, "UserDeserializer")
      .def(py::init<>());
  {
    // CNTK's base methods, which the subclass defines (set directly: pybind11 will not define a
    // method over Deserializer's stream_infos property).
    py::object cls = m.attr("UserDeserializer");
    auto base = [&](const char* name, const char* message) {
      cls.attr(name) = py::cpp_function([message](py::args) { return not_implemented(message); },
                                        py::name(name), py::is_method(cls));
    };
    base("stream_infos", "should return a list of StreamInformation for all streams");
    base("num_chunks", "should return the total number of chunks.");
    base("get_chunk", "should return data for the chunk.");
  }

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
      py::arg("data_streams"), py::arg("max_samples") = config.max_samples,
      py::arg("max_sweeps") = config.max_sweeps,
      py::arg("randomize") = false);  // CNTK's reads in order (the C++ config randomizes)
}

}  // namespace loom::python
