// CNTK's cntk.ops: the ops, the builders of inputs, constants and parameters, and the Python
// operators of Variables and Functions. Operands may be numbers or numpy arrays wherever a
// Variable is expected: they become constants of the other operand's dtype. The ops of the op
// table that have a Python function (loom/ops/op_schema.h) are reached through _op_table and
// _apply_op, from which python/loom/ops/_table.py makes the functions.
#include <algorithm>

#include "loom/ops/op_schema.h"
#include "python/src/binding.h"

namespace loom::python {

namespace {

using Binary = Function (*)(const Variable&, const Variable&, const std::string&);

// An op's operands, numbers and arrays taking the dtype of the first Variable or Function among
// them (float32 when there is none).
std::vector<Variable> operands(const py::sequence& xs) {
  DataType like = DataType::Float32;
  for (py::handle x : xs) {
    if (py::isinstance<Variable>(x) || py::isinstance<Function>(x)) {
      like = as_variable(x).dtype();
      break;
    }
  }
  std::vector<Variable> vs;
  for (py::handle x : xs) vs.push_back(as_variable(x, like));
  return vs;
}

std::pair<Variable, Variable> operands(py::handle a, py::handle b) {
  std::vector<Variable> vs = operands(py::make_tuple(a, b));
  return {vs[0], vs[1]};
}

const char* type_name(ParamType type) {
  switch (type) {
    case ParamType::Tensor:
      return "tensor";
    case ParamType::OptionalTensor:
      return "optional_tensor";
    case ParamType::Tensors:
      return "tensors";
    case ParamType::Double:
      return "double";
    case ParamType::Doubles:
      return "doubles";
    case ParamType::Int:
      return "int";
    case ParamType::Bool:
      return "bool";
    case ParamType::Bools:
      return "bools";
    case ParamType::Axis:
      return "axis";
    case ParamType::Ints:
      return "ints";
    case ParamType::Shape:
      return "shape";
    case ParamType::DataType:
      return "dtype";
    case ParamType::String:
      return "str";
    case ParamType::Seed:
      return "seed";
  }
  return "";
}

// What a parameter of type `type` takes, for errors.
std::string expected(ParamType type) {
  switch (type) {
    case ParamType::Axis:
      return "an axis (int, Axis or None)";
    case ParamType::Double:
      return "a number";
    case ParamType::Doubles:
      return "a number or a list of numbers";
    case ParamType::Bools:
      return "a bool or a list of bools";
    case ParamType::Int:
      return "an int";
    case ParamType::Ints:
      return "an int, or a list of ints or of pairs of ints";
    case ParamType::Shape:
      return "a shape (an int or a tuple of ints, -1 for one dimension to infer)";
    case ParamType::DataType:
      return "a data type (np.float32 or np.float64)";
    case ParamType::Seed:
      return "an int (a seed), or None for auto_select";
    default:
      return std::string("a ") + type_name(type);
  }
}

// Whether value is a Python or numpy integer (not a bool).
bool is_integer(py::handle value) {
  static const py::handle numpy_integer =
      py::object(py::module_::import("numpy").attr("integer")).release();  // never released
  return !py::isinstance<py::bool_>(value) &&
         (py::isinstance<py::int_>(value) || py::isinstance(value, numpy_integer));
}
bool is_list(py::handle value) {
  return py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value);
}
// The elements of a list or tuple, or the value alone.
py::tuple elements(py::handle value) {
  return is_list(value) ? py::tuple(value.cast<py::sequence>()) : py::make_tuple(value);
}

// The ints of a Python int, or of a list or tuple of ints or of pairs of ints (ParamType::Ints),
// flattened in order; false for anything else.
bool append_ints(py::handle value, DictionaryVector& ints, bool in_list = false) {
  if (is_integer(value)) {
    ints.emplace_back(value.cast<int64_t>());
    return true;
  }
  if (!is_list(value) || (in_list && py::len(value) != 2)) return false;
  for (py::handle v : value)
    if (in_list ? !is_integer(v) : !append_ints(v, ints, true)) return false;
  if (in_list)
    for (py::handle v : value) ints.emplace_back(v.cast<int64_t>());
  return true;
}

// An attribute's default as Python shows it: a list type's as a tuple, or as a list where
// CNTK shows one (OpParam::list_default); an axis as its int, an Axis object, or None for all
// static axes (CNTK's axis=None).
py::object python_default(const OpParam& p) {
  if (p.type == ParamType::Ints || p.type == ParamType::Bools || p.type == ParamType::Doubles) {
    const py::list values(to_python(p.default_value));
    return p.list_default ? py::object(values) : py::tuple(values);
  }
  if (p.type == ParamType::Shape) {
    py::list dims;
    for (size_t d : p.default_value.get<NDShape>().dims())
      dims.append(d == NDShape::kInferred ? py::int_(-1) : py::int_(d));
    return py::tuple(dims);
  }
  if (p.type == ParamType::DataType)
    return numpy_dtype(attribute_dtype(p.default_value)).attr("type");
  if (p.type != ParamType::Axis) return to_python(p.default_value);
  const Axis axis = attribute_axis(p.default_value);
  if (axis.is_all_static()) return py::none();
  if (axis.is_static()) return py::int_(axis.static_index());
  return py::cast(axis);
}

// A Python argument as the attribute of a parameter of type `type`; a TypeError names the op and
// the parameter. A seed that stands for auto_select is no value (the attribute left out).
DictionaryValue attribute_of(const char* op, const std::string& key, ParamType type,
                             py::handle value) {
  try {
    switch (type) {
      case ParamType::Double:  // pybind11's double takes Python and numpy numbers, no strings
        return value.cast<double>();
      case ParamType::Doubles: {
        DictionaryVector numbers;
        for (py::handle v : elements(value)) numbers.emplace_back(v.cast<double>());
        return numbers;
      }
      case ParamType::Bools: {
        DictionaryVector bools;
        for (py::handle v : elements(value)) bools.emplace_back(v.cast<bool>());
        return bools;
      }
      case ParamType::Int:
        if (!py::isinstance<py::bool_>(value)) return value.cast<int64_t>();
        break;
      case ParamType::Bool:
        return value.cast<bool>();
      case ParamType::Axis:
        if (value.is_none()) return axis_attribute(Axis::all_static_axes());
        if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
          DictionaryVector axes;  // several axes at once (the reductions)
          for (py::handle a : value) axes.push_back(attribute_of(op, key, type, a));
          return axes;
        }
        if (py::isinstance<Axis>(value)) return axis_attribute(value.cast<Axis>());
        if (!py::isinstance<py::bool_>(value)) return axis_attribute(Axis(value.cast<int>()));
        break;
      case ParamType::Ints: {
        DictionaryVector ints;
        if (append_ints(value, ints)) return ints;
        break;
      }
      case ParamType::Shape: {
        if (!is_integer(value) && !is_list(value)) break;
        std::vector<size_t> shape;
        for (py::handle d : elements(value)) {
          if (!is_integer(d)) throw py::cast_error();
          const int64_t n = d.cast<int64_t>();
          if (n < -1)
            throw ArgumentError(std::string(op) + ": '" + key + "' has dimension " +
                                std::to_string(n) + "; dimensions are >= 0, or -1 to infer one");
          shape.push_back(n == -1 ? NDShape::kInferred : size_t(n));
        }
        return NDShape(std::move(shape));
      }
      case ParamType::DataType:
        // numpy's dtype() takes None as float64, which CNTK does not
        if (value.is_none() || py::isinstance<py::bool_>(value) || is_integer(value)) break;
        try {
          return dtype_attribute(data_type(value));
        } catch (const py::error_already_set&) {  // not a dtype at all
        } catch (const py::type_error&) {         // a dtype other than float32 and float64
        }
        break;
      case ParamType::String:
        if (py::isinstance<py::str>(value)) return value.cast<std::string>();
        break;
      case ParamType::Seed: {
        if (value.is_none()) return {};
        if (!is_integer(value)) break;
        const py::int_ seed(py::reinterpret_borrow<py::object>(value));
        if (seed < py::int_(0) || seed > py::int_(UINT64_MAX))
          throw ArgumentError(std::string(op) + ": " + key + " must be None (auto_select) or an " +
                              "int in [0, 2**64), not " + py::repr(value).cast<std::string>());
        const uint64_t v = seed.cast<uint64_t>();
        if (v == kAutoSelectRandomSeed) return {};
        return v;
      }
      case ParamType::Tensor:
      case ParamType::OptionalTensor:
      case ParamType::Tensors:
        break;
    }
  } catch (const py::cast_error&) {
  }
  throw py::type_error(std::string(op) + ": '" + key + "' must be " + expected(type) + ", not " +
                       py::str(py::type::of(value).attr("__name__")).cast<std::string>());
}

// The table's entries that Python generates its functions from (python/loom/ops/_table.py):
// each op's function and its variants' (variant: the index in OpSchema::variants, -1 for the
// op's own), each parameter as (name, type, default, after_name, none_warning). A parameter the
// caller must give has the default inspect.Parameter.empty, which the generated signatures take
// as is.
py::list op_table_entries() {
  const py::object required = py::module_::import("inspect").attr("Parameter").attr("empty");
  py::list entries;
  auto add = [&](const OpSchema& s, int variant, const char* python, const char* module,
                 const std::vector<OpParam>& ps, const char* doc) {
    py::list params;
    for (const OpParam& p : ps)
      params.append(py::make_tuple(
          p.name, type_name(p.type),
          p.type == ParamType::OptionalTensor || p.none_default ? py::none()
          : p.default_value.has_value()                         ? python_default(p)
                                                                : required,
          p.after_name, p.none_warning ? py::object(py::str(p.none_warning)) : py::none()));
    py::dict entry;
    entry["op"] = s.name();
    entry["variant"] = variant;
    entry["python"] = python;
    entry["module"] = module;
    entry["associative"] = s.associative;
    entry["doc"] = doc;
    entry["params"] = params;
    entries.append(entry);
  };
  for (const OpSchema& s : op_table()) {
    if (s.python) add(s, -1, s.python, s.module, s.params, s.doc);
    for (size_t i = 0; i < s.variants.size(); ++i) {
      const PythonVariant& v = s.variants[i];
      add(s, int(i), v.python, v.module, v.params, v.doc);
    }
  }
  return entries;
}

// The op named op_name (OpSchema::name) applied to inputs (numbers and arrays among them become
// constants) and to attributes given by their parameters' names, as its function `variant` (an
// index in OpSchema::variants; -1: the op's own).
Function apply_op(const std::string& op_name, const py::sequence& inputs,
                  const py::dict& attributes, const std::string& name, int variant) {
  const OpSchema* schema = find_schema(op_name);
  if (!schema) throw ArgumentError("no op named '" + op_name + "' is in the op table");
  if (variant < -1 || variant >= int(schema->variants.size()))
    throw ArgumentError(op_name + " has no Python variant " + std::to_string(variant));
  const PythonVariant* v = variant < 0 ? nullptr : &schema->variants[size_t(variant)];
  const std::vector<OpParam>& params = v ? v->params : schema->params;
  const char* function = v ? v->python : schema->python ? schema->python : op_name.c_str();
  Dictionary values;
  for (auto [key, value] : attributes) {
    const std::string k = key.cast<std::string>();
    const auto p =
        std::find_if(params.begin(), params.end(), [&k](const OpParam& q) { return k == q.name; });
    if (p == params.end() || is_tensor(p->type))
      throw ArgumentError(op_name + " has no attribute '" + k + "'");
    if (p->none_default && value.is_none()) continue;
    DictionaryValue attribute = attribute_of(function, k, p->type, value);
    if (attribute.has_value()) values[p->attribute_key()] = std::move(attribute);
  }
  return schema->apply(operands(inputs), values, name, v);
}

// x[i], x[a:b], x[i, a:b, ...] as slices along the static axes (an index keeps its axis).
Function index(py::handle x, py::handle key) {
  Variable v = as_variable(x);
  py::tuple keys = py::isinstance<py::tuple>(key) ? key.cast<py::tuple>() : py::make_tuple(key);
  Function result(v);
  bool sliced = false;
  for (size_t axis = 0; axis < keys.size(); ++axis) {
    py::handle k = keys[axis];
    int begin = 0, end = 0;
    if (py::isinstance<py::slice>(k)) {
      py::slice s = k.cast<py::slice>();
      if (!s.attr("step").is_none() && s.attr("step").cast<int>() != 1)
        throw py::index_error("slicing a Variable takes no step");
      if (s.attr("start").is_none() && s.attr("stop").is_none()) continue;
      begin = s.attr("start").is_none() ? 0 : s.attr("start").cast<int>();
      end = s.attr("stop").is_none() ? 0 : s.attr("stop").cast<int>();
    } else {
      begin = k.cast<int>();
      end = begin == -1 ? 0 : begin + 1;
    }
    result = slice(Variable(result), Axis(int(axis)), begin, end);
    sliced = true;
  }
  return sliced ? result : Function(v);
}

template <typename Class>
void add_operators(Class& c) {
  auto bin = [&c](const char* name, const char* reflected, Binary op) {
    c.def(name, [op](py::handle a, py::handle b) {
      auto [x, y] = operands(a, b);
      return op(x, y, "");
    });
    c.def(reflected, [op](py::handle a, py::handle b) {
      auto [y, x] = operands(b, a);
      return op(y, x, "");
    });
  };
  bin("__add__", "__radd__", &plus);
  bin("__sub__", "__rsub__", &minus);
  bin("__mul__", "__rmul__", &element_times);
  bin("__truediv__", "__rtruediv__", &element_divide);
  c.def("__matmul__",
        [](py::handle a, py::handle b) {
          auto [x, y] = operands(a, b);
          return times(x, y);
        })
      .def("__rmatmul__",
           [](py::handle a, py::handle b) {
             auto [y, x] = operands(b, a);
             return times(y, x);
           })
      .def("__neg__", [](py::handle a) { return negate(as_variable(a)); })
      .def("__abs__", [](py::handle a) { return abs(as_variable(a)); })
      .def("__getitem__", &index);
  // numpy leaves `array * variable` to the variable's __rmul__.
  c.attr("__array_ufunc__") = py::none();
}

}  // namespace

void add_ops(py::module_ m) {
  // The inputs, constants, parameters and placeholders, combine and as_block.
  const InputOptions input;  // the defaults
  // CNTK's as_block: the composite applied to the variables given for its placeholders, seen
  // as one function of op block_op_name ([(placeholder, variable), ...] or a dict).
  m.def(
      "as_block",
      [](const Function& composite, py::handle block_arguments_map,
         const std::string& block_op_name, const std::string& block_instance_name) {
        std::vector<std::pair<Variable, Variable>> arguments;
        py::object pairs =
            py::isinstance<py::dict>(block_arguments_map)
                ? py::reinterpret_borrow<py::dict>(block_arguments_map).attr("items")()
                : py::reinterpret_borrow<py::object>(block_arguments_map);
        for (py::handle pair : pairs) {
          py::tuple t = py::cast<py::tuple>(pair);
          if (t.size() != 2)
            throw py::type_error(
                "as_block: block_arguments_map holds (placeholder, variable) pairs");
          arguments.emplace_back(as_variable(t[0]), as_variable(t[1]));
        }
        return as_block(composite, arguments, block_op_name, block_instance_name);
      },
      py::arg("composite"), py::arg("block_arguments_map"), py::arg("block_op_name"),
      py::arg("block_instance_name") = "");

  m.def(
      "input_variable",
      [](py::handle shape, py::handle dtype, bool needs_gradient, bool is_sparse,
         py::handle dynamic_axes, const std::string& name) {
        InputOptions o{.dtype = data_type(dtype),
                       .is_sparse = is_sparse,
                       .name = name,
                       .needs_gradient = needs_gradient};
        if (!dynamic_axes.is_none()) o.dynamic_axes = dynamic_axes.cast<std::vector<Axis>>();
        return input_variable(shape_of(shape), o);
      },
      py::arg("shape"), py::arg("dtype") = py::none(),
      py::arg("needs_gradient") = input.needs_gradient, py::arg("is_sparse") = input.is_sparse,
      py::arg("dynamic_axes") = py::none(), py::arg("name") = "");
  m.def(
      "constant",
      [](py::handle value, py::handle shape, py::handle dtype, py::handle device,
         const std::string& name) {
        return make_constant(value, shape, dtype, device, name, true);
      },
      py::arg("value") = py::none(), py::arg("shape") = py::none(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("name") = "");
  m.def(
      "parameter",
      [](py::handle shape, py::handle init, py::handle dtype, py::handle device,
         const std::string& name) {
        return make_parameter(shape, init, dtype, device, name, true);
      },
      py::arg("shape") = py::none(), py::arg("init") = py::none(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("name") = "");
  m.def(
      "placeholder",
      [](py::handle shape, py::handle dtype, py::handle dynamic_axes, const std::string& name) {
        if (shape.is_none()) return placeholder(name);
        // Loom knows a placeholder's type whole or not at all: with a shape, axes left unknown
        // are the batch axis.
        std::vector<Axis> axes =
            dynamic_axes.is_none() ? default_batch_axes() : dynamic_axes.cast<std::vector<Axis>>();
        if (axes == unknown_dynamic_axes()) axes = default_batch_axes();
        return placeholder(shape_of(shape), data_type(dtype), axes, name);
      },
      py::arg("shape") = py::none(), py::arg("dtype") = py::none(),
      py::arg("dynamic_axes") = py::none(), py::arg("name") = "");
  m.def(
      "combine",
      [](py::handle operands, const std::string& name) {
        return combine(variables_of(operands), name);
      },
      py::arg("operands"), py::arg("name") = "");

  auto variable = class_of<Variable>();
  auto function = class_of<Function>();
  add_operators(variable);
  add_operators(function);

  // The ops of the op table with a Python function: python/loom/ops/_table.py makes the
  // functions from _op_table() and calls them through _apply_op.
  m.def("_op_table", &op_table_entries);
  m.def("_apply_op", &apply_op, py::arg("op"), py::arg("inputs"), py::arg("attributes"),
        py::arg("name") = "", py::arg("variant") = -1);
  // CNTK's seed argument that stands for auto_select (as None does).
  m.attr("SentinelValueForAutoSelectRandomSeed") = kAutoSelectRandomSeed;
}

}  // namespace loom::python
