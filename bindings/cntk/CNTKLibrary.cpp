// CNTKLibrary.h's functions: CNTK's names, shapes in CNTK's order and CNTK's exception types
// around Loom's C++ API.
#include "CNTKLibrary.h"

#include <algorithm>
#include <mutex>
#include <span>
#include <sstream>
#include <stdexcept>

#include "loom/core/error.h"
#include "loom/deploy/model_runner.h"
#include "loom/graph/graph_walk.h"
#include "loom/serialize/model_file.h"

namespace CNTK {
namespace {

// Names and paths are UTF-8 in Loom and wide (UTF-32 on Linux) in CNTK's API.
std::wstring Widen(const std::string& s) {
  std::wstring out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3 : c >> 3 == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) {  // not UTF-8: kept as one character per byte
      out.push_back(static_cast<wchar_t>(c));
      ++i;
      continue;
    }
    uint32_t code = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) code = code << 6 | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(static_cast<wchar_t>(code));
    i += n;
  }
  return out;
}

std::string Narrow(const std::wstring& s) {
  std::string out;
  out.reserve(s.size());
  for (wchar_t w : s) {
    const auto c = static_cast<uint32_t>(w);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xc0 | c >> 6));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | c >> 12));
      out.push_back(static_cast<char>(0x80 | (c >> 6 & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | c >> 18));
      out.push_back(static_cast<char>(0x80 | (c >> 12 & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (c >> 6 & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    }
  }
  return out;
}

// Runs f, rethrowing Loom's errors as the types CNTK threw for the same situations: its
// InvalidArgument (std::invalid_argument) for shapes, types and arguments, its LogicError for
// calls in the wrong state. Files that cannot be read or parsed stay std::runtime_error (Loom's
// IOError and DataError), as CNTK's RuntimeError were.
template <typename F>
decltype(auto) Translated(F&& f) {
  try {
    return f();
  } catch (const loom::ShapeError& e) {
    // Loom's messages list dimensions slowest-changing first, CNTK's NDShape the other way.
    throw std::invalid_argument(std::string(e.what()) +
                                " (Loom lists dimensions in the reverse of CNTK's NDShape order)");
  } catch (const loom::ArgumentError& e) {
    throw std::invalid_argument(e.what());
  } catch (const loom::StateError& e) {
    throw std::logic_error(e.what());
  }
}

NDShape FromLoom(const loom::NDShape& shape) {
  return NDShape(std::vector<size_t>(shape.dims().rbegin(), shape.dims().rend()));
}

loom::NDShape ToLoom(const NDShape& shape) {
  return loom::NDShape(std::vector<size_t>(shape.Dimensions().rbegin(), shape.Dimensions().rend()));
}

DataType FromLoom(loom::DataType t) {
  return t == loom::DataType::Float32 ? DataType::Float : DataType::Double;
}

std::string Describe(const Variable& v) {
  return Narrow(v.AsString());
}

// A variable's shape admits a sample shape when the ranks agree and each dimension is equal
// or left to the data (free or inferred).
bool Admits(const loom::NDShape& variable, const loom::NDShape& sample) {
  if (variable.rank() != sample.rank()) return false;
  for (size_t i = 0; i < variable.rank(); ++i)
    if (variable[i] != sample[i] && variable[i] != loom::NDShape::kFree &&
        variable[i] != loom::NDShape::kInferred)
      return false;
  return true;
}

void CheckVariableFits(const Variable& variable, const loom::Value& value) {
  if (!Admits(ToLoom(variable.Shape()), value.sample_shape()))
    throw std::invalid_argument("The Value's sample shape " +
                                Narrow(FromLoom(value.sample_shape()).AsString()) +
                                " does not match the shape " + Narrow(variable.Shape().AsString()) +
                                " of Variable '" + Describe(variable) + "'");
}

std::vector<Variable> FromLoom(const std::vector<loom::Variable>& variables) {
  return std::vector<Variable>(variables.begin(), variables.end());
}

std::string NamedList(const std::vector<loom::Variable>& variables) {
  std::string out;
  for (const loom::Variable& v : variables)
    out += (out.empty() ? "" : ", ") + Describe(Variable(v));
  return out;
}

}  // namespace

// ---- NDShape ----

const NDShape& NDShape::Unknown() {
  static const NDShape unknown(1, (size_t)-2);
  return unknown;
}

NDShape NDShape::SubShape(size_t beginAxisId, size_t endAxisId) const {
  endAxisId = endAxisId == SIZE_MAX ? Rank() : endAxisId;
  if (endAxisId < beginAxisId || endAxisId > Rank())
    throw std::invalid_argument("NDShape::SubShape: axes [" + std::to_string(beginAxisId) + ", " +
                                std::to_string(endAxisId) + ") are not within the rank " +
                                std::to_string(Rank()) + " of " + Narrow(AsString()));
  return std::vector<size_t>(m_shapeDims.begin() + beginAxisId, m_shapeDims.begin() + endAxisId);
}

bool NDShape::HasInferredDimension() const {
  return ToLoom(*this).has_inferred();
}

bool NDShape::HasFreeDimension() const {
  return ToLoom(*this).has_free();
}

size_t NDShape::TotalSize() const {
  if (HasUnboundDimension())
    throw std::runtime_error("NDShape::TotalSize: the total size of " + Narrow(AsString()) +
                             " is not known while a dimension is inferred (?) or free (*)");
  return ToLoom(*this).total_size();
}

NDShape NDShape::AppendShape(const NDShape& shape) const {
  std::vector<size_t> dims = m_shapeDims;
  dims.insert(dims.end(), shape.m_shapeDims.begin(), shape.m_shapeDims.end());
  return dims;
}

std::wstring NDShape::AsString() const {
  if (IsUnknown()) return L"[???]";
  std::wostringstream s;
  s << L"[";
  for (size_t i = 0; i < Rank(); ++i) {
    if (i) s << L" x ";
    if (m_shapeDims[i] == InferredDimension)
      s << L"?";
    else if (m_shapeDims[i] == FreeDimension)
      s << L"*";
    else
      s << m_shapeDims[i];
  }
  s << L"]";
  return s.str();
}

// ---- DeviceDescriptor, Axis ----

DeviceDescriptor DeviceDescriptor::GPUDevice(unsigned int deviceId) {
  throw std::invalid_argument("DeviceDescriptor::GPUDevice: GPU device id " +
                              std::to_string(deviceId) +
                              " is invalid: Loom computes on the CPU only; use "
                              "DeviceDescriptor::CPUDevice()");
}

std::wstring DeviceDescriptor::AsString() const {
  return m_deviceType == DeviceKind::CPU ? L"CPU" : L"GPU[" + std::to_wstring(m_deviceId) + L"]";
}

std::wstring Axis::Name() const {
  return Widen(m_axis.name());
}

// ---- Variable ----

Variable::Variable(const FunctionPtr& function)
    : Variable(function ? function->Output()
                        : throw std::invalid_argument("Variable: the FunctionPtr is null")) {}

const loom::Variable& Variable::Checked() const {
  if (!m_variable.valid())
    throw std::logic_error(
        "Variable: this Variable is empty (default-constructed); take variables from a "
        "Function's Arguments() or Outputs()");
  return m_variable;
}

NDShape Variable::Shape() const {
  return Checked().has_known_shape() ? FromLoom(Checked().shape()) : NDShape::Unknown();
}

std::vector<Axis> Variable::DynamicAxes() const {
  // CNTK lists the sequence axis before the batch axis; Loom lists the outermost first.
  const std::vector<loom::Axis>& axes = Checked().dynamic_axes();
  return std::vector<Axis>(axes.rbegin(), axes.rend());
}

VariableKind Variable::Kind() const {
  switch (Checked().kind()) {
    case loom::VariableKind::Input:
      return VariableKind::Input;
    case loom::VariableKind::Output:
      return VariableKind::Output;
    case loom::VariableKind::Parameter:
      return VariableKind::Parameter;
    case loom::VariableKind::Constant:
      return VariableKind::Constant;
    case loom::VariableKind::Placeholder:
      break;
  }
  return VariableKind::Placeholder;
}

bool Variable::IsSparse() const {
  return Checked().is_sparse();
}
bool Variable::HasBatchAxis() const {
  return Checked().has_batch_axis();
}
bool Variable::HasSequenceAxis() const {
  return Checked().has_sequence_axis();
}
std::wstring Variable::Name() const {
  return Widen(Checked().name());
}
std::wstring Variable::Uid() const {
  return Widen(Checked().uid());
}
DataType Variable::GetDataType() const {
  return FromLoom(Checked().dtype());
}
bool Variable::NeedsGradient() const {
  return Checked().needs_gradient();
}

FunctionPtr Variable::Owner() const {
  return IsOutput() ? std::make_shared<Function>(Checked().owner()) : nullptr;
}

std::wstring Variable::AsString() const {
  static const wchar_t* const kinds[] = {L"Input", L"Output", L"Parameter", L"Constant",
                                         L"Placeholder"};
  std::wstring axes;
  for (const Axis& a : DynamicAxes())
    axes += (axes.empty() ? L"" : L", ") + std::wstring(a.IsBatchAxis() ? L"#" : L"*");
  return std::wstring(kinds[static_cast<int>(Kind())]) + L"('" + Name() + L"', " +
         Shape().AsString() + L", [" + axes + L"])";
}

// ---- NDArrayView ----

DataType NDArrayView::GetDataType() const {
  return FromLoom(m_view.dtype());
}

StorageFormat NDArrayView::GetStorageFormat() const {
  return m_view.is_sparse() ? StorageFormat::SparseCSC : StorageFormat::Dense;
}

NDShape NDArrayView::Shape() const {
  return FromLoom(m_view.shape());
}

template <typename ElementType>
const ElementType* NDArrayView::DataBuffer() const {
  if (IsSparse())
    throw std::invalid_argument(
        "NDArrayView::DataBuffer: the data are sparse; copy them out "
        "with Value::CopyVariableValueTo");
  return Translated([&] { return m_view.data<ElementType>(); });
}

template <typename ElementType>
ElementType* NDArrayView::WritableDataBuffer() {
  if (m_readOnly)
    throw std::runtime_error("NDArrayView::WritableDataBuffer: the view is read-only");
  return const_cast<ElementType*>(DataBuffer<ElementType>());
}

NDArrayViewPtr NDArrayView::DeepClone(bool readOnly) const {
  return std::make_shared<NDArrayView>(m_view.deep_clone(), readOnly);
}

void NDArrayView::CopyFrom(const NDArrayView& source) {
  if (m_readOnly) throw std::runtime_error("NDArrayView::CopyFrom: the view is read-only");
  Translated([&] { m_view.copy_from(source.m_view); });
}

template const float* NDArrayView::DataBuffer<float>() const;
template const double* NDArrayView::DataBuffer<double>() const;
template float* NDArrayView::WritableDataBuffer<float>();
template double* NDArrayView::WritableDataBuffer<double>();

// ---- Value ----

template <typename ElementType>
ValuePtr Value::Create(const NDShape& sampleShape,
                       const std::vector<std::vector<ElementType>>& sequences,
                       const std::vector<bool>& sequenceStartFlags, const DeviceDescriptor&,
                       bool readOnly) {
  const loom::NDShape sample = ToLoom(sampleShape);
  const size_t sampleSize = sampleShape.TotalSize();
  std::vector<loom::NDArrayView> views;
  views.reserve(sequences.size());
  for (size_t i = 0; i < sequences.size(); ++i) {
    if (sampleSize == 0 || sequences[i].size() % sampleSize != 0)
      throw std::invalid_argument(
          "Value::Create: the number of elements (" + std::to_string(sequences[i].size()) +
          ") of sequence " + std::to_string(i) + " is not a multiple of the size (" +
          std::to_string(sampleSize) + ") of the sample shape " + Narrow(sampleShape.AsString()));
    views.push_back(loom::NDArrayView::from_vector<ElementType>(
        sample.prepend(sequences[i].size() / sampleSize), sequences[i]));
  }
  return Translated([&] {
    return std::make_shared<Value>(loom::Value::create(views, sequenceStartFlags), readOnly);
  });
}

template <typename ElementType>
ValuePtr Value::Create(const NDShape& sampleShape,
                       const std::vector<std::vector<size_t>>& oneHotSequences,
                       const std::vector<bool>& sequenceStartFlags, const DeviceDescriptor&,
                       bool readOnly) {
  // One sparse [length, dimension] tensor per sequence; CNTK's skip index is Loom's.
  const size_t dimension = sampleShape.TotalSize();
  return Translated([&] {
    std::vector<loom::NDArrayView> views;
    views.reserve(oneHotSequences.size());
    for (std::vector<size_t> indices : oneHotSequences) {
      std::replace(indices.begin(), indices.end(), OneHotSkip, loom::Value::kOneHotSkip);
      views.push_back(
          loom::Value::one_hot(dimension, indices, loom::data_type_of<ElementType>()).data());
    }
    return std::make_shared<Value>(loom::Value::create(views, sequenceStartFlags), readOnly);
  });
}

template <typename ElementType>
ValuePtr Value::CreateBatch(const NDShape& sampleShape, const std::vector<ElementType>& batchData,
                            const DeviceDescriptor&, bool readOnly) {
  return Translated([&] {
    return std::make_shared<Value>(loom::Value::create_batch(ToLoom(sampleShape), batchData),
                                   readOnly);
  });
}

template <typename ElementType>
ValuePtr Value::CreateBatch(size_t dimension, const std::vector<size_t>& batchData,
                            const DeviceDescriptor&, bool readOnly) {
  std::vector<size_t> indices = batchData;
  std::replace(indices.begin(), indices.end(), OneHotSkip, loom::Value::kOneHotSkip);
  return Translated([&] {
    return std::make_shared<Value>(
        loom::Value::one_hot(dimension, indices, loom::data_type_of<ElementType>()), readOnly);
  });
}

template <typename ElementType>
ValuePtr Value::CreateSequence(const NDShape& sampleShape, size_t sequenceLength,
                               const SparseIndexType* colStarts, const SparseIndexType* rowIndices,
                               const ElementType* nonZeroValues, size_t numNonZeroValues,
                               bool sequenceStartFlag, const DeviceDescriptor&, bool readOnly) {
  if (colStarts == nullptr ||
      (numNonZeroValues > 0 && (rowIndices == nullptr || nonZeroValues == nullptr)))
    throw std::invalid_argument("Value::CreateSequence: a CSC buffer is null");
  // CNTK's columns are samples: its CSC matrix [dimension x length] is Loom's CSR [length x
  // dimension], with the same three arrays.
  return Translated([&] {
    loom::NDArrayView view = loom::NDArrayView::sparse_csr<ElementType>(
        ToLoom(sampleShape).prepend(sequenceLength),
        std::vector<int32_t>(colStarts, colStarts + sequenceLength + 1),
        std::vector<int32_t>(rowIndices, rowIndices + numNonZeroValues),
        std::vector<ElementType>(nonZeroValues, nonZeroValues + numNonZeroValues));
    return std::make_shared<Value>(loom::Value::create({view}, {sequenceStartFlag}), readOnly);
  });
}

DataType Value::GetDataType() const {
  return FromLoom(m_value.dtype());
}

StorageFormat Value::GetStorageFormat() const {
  return IsSparse() ? StorageFormat::SparseCSC : StorageFormat::Dense;
}

NDShape Value::Shape() const {
  return FromLoom(m_value.data().shape());
}

size_t Value::MaskedCount() const {
  if (!m_value.mask()) return 0;
  const std::vector<loom::MaskKind>& kinds = m_value.mask()->kinds();
  return std::count(kinds.begin(), kinds.end(), loom::MaskKind::Invalid);
}

NDArrayViewPtr Value::Data() const {
  return std::make_shared<NDArrayView>(m_value.data(), m_readOnly);
}

ValuePtr Value::DeepClone(bool readOnly) const {
  return std::make_shared<Value>(
      loom::Value(m_value.data().deep_clone(), m_value.is_sequence(), m_value.mask()), readOnly);
}

void Value::CopyFrom(const Value& source) {
  if (m_readOnly) throw std::runtime_error("Value::CopyFrom: the Value is read-only");
  if (source.m_value.data().shape() != m_value.data().shape())
    throw std::invalid_argument("Value::CopyFrom: the source's shape " +
                                Narrow(source.Shape().AsString()) + " is not this Value's " +
                                Narrow(Shape().AsString()));
  // A dense Value keeps its storage (a caller may hold its Data()); a sparse one takes a copy.
  loom::NDArrayView data = m_value.data();
  if (data.is_sparse() || data.dtype() != source.m_value.dtype())
    data = source.m_value.data().deep_clone();
  else
    Translated([&] { data.copy_from(source.m_value.data()); });
  m_value = loom::Value(data, source.m_value.is_sequence(), source.m_value.mask());
}

template <typename ElementType>
void Value::CopyVariableValueTo(const Variable& outputVariable,
                                std::vector<std::vector<ElementType>>& sequences) {
  if (AsDataType<ElementType>() != GetDataType())
    throw std::invalid_argument(
        std::string("Value::CopyVariableValueTo: a buffer of ") +
        (AsDataType<ElementType>() == DataType::Float ? "float" : "double") + " for a Value of " +
        loom::to_string(m_value.dtype()) + " elements");
  CheckVariableFits(outputVariable, m_value);
  sequences = m_value.as_sequences<ElementType>();
}

void Value::CopyVariableValueTo(const Variable& outputVariable,
                                std::vector<std::vector<size_t>>& sequences) {
  const NDShape shape = outputVariable.Shape();
  if (shape.Rank() == 0 || shape[0] != shape.TotalSize())
    throw std::invalid_argument(
        "Value::CopyVariableValueTo: one-hot indices need a Variable of "
        "one axis; '" +
        Describe(outputVariable) + "' has shape " + Narrow(shape.AsString()));
  CheckVariableFits(outputVariable, m_value);
  const size_t dimension = shape[0];
  loom::dispatch(m_value.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::vector<std::vector<T>> dense = m_value.as_sequences<T>();
    sequences.assign(dense.size(), {});
    for (size_t s = 0; s < dense.size(); ++s) {
      for (size_t begin = 0; begin < dense[s].size(); begin += dimension) {
        size_t index = dimension;
        for (size_t j = 0; j < dimension; ++j) {
          const T x = dense[s][begin + j];
          if (x == T(0)) continue;
          if (x != T(1) || index != dimension)
            throw std::runtime_error("Value::CopyVariableValueTo: sample " +
                                     std::to_string(begin / dimension) + " of sequence " +
                                     std::to_string(s) + " is not a one-hot vector");
          index = j;
        }
        if (index == dimension)
          throw std::runtime_error("Value::CopyVariableValueTo: sample " +
                                   std::to_string(begin / dimension) + " of sequence " +
                                   std::to_string(s) + " has no 1: it is not a one-hot vector");
        sequences[s].push_back(index);
      }
    }
  });
}

#define CNTK_VALUE_INSTANTIATE(T)                                                              \
  template ValuePtr Value::Create<T>(const NDShape&, const std::vector<std::vector<T>>&,       \
                                     const std::vector<bool>&, const DeviceDescriptor&, bool); \
  template ValuePtr Value::Create<T>(const NDShape&, const std::vector<std::vector<size_t>>&,  \
                                     const std::vector<bool>&, const DeviceDescriptor&, bool); \
  template ValuePtr Value::CreateBatch<T>(const NDShape&, const std::vector<T>&,               \
                                          const DeviceDescriptor&, bool);                      \
  template ValuePtr Value::CreateBatch<T>(size_t, const std::vector<size_t>&,                  \
                                          const DeviceDescriptor&, bool);                      \
  template ValuePtr Value::CreateSequence<T>(const NDShape&, size_t, const SparseIndexType*,   \
                                             const SparseIndexType*, const T*, size_t, bool,   \
                                             const DeviceDescriptor&, bool);                   \
  template void Value::CopyVariableValueTo<T>(const Variable&, std::vector<std::vector<T>>&);
CNTK_VALUE_INSTANTIATE(float)
CNTK_VALUE_INSTANTIATE(double)
#undef CNTK_VALUE_INSTANTIATE

// ---- Function ----

// The runner of one graph (it plans each set of requested outputs once, computing only what
// they need, so a model's criterion outputs need no labels when only its scores are asked
// for). Made on the first Evaluate and shared by a function and its Share-clones; ModelRunner
// is thread safe.
struct Function::Runner {
  std::once_flag made;
  std::unique_ptr<const loom::ModelRunner> runner;
};

Function::Function(loom::Function function)
    : Function(std::move(function), std::make_shared<Runner>()) {}

Function::Function(loom::Function function, std::shared_ptr<Runner> runner)
    : m_function(std::move(function)), m_runner(std::move(runner)) {}

Function::~Function() = default;

FunctionPtr Function::Load(const std::wstring& filepath, const DeviceDescriptor&, ModelFormat) {
  return Translated([&] { return std::make_shared<Function>(loom::load_model(Narrow(filepath))); });
}

FunctionPtr Function::Load(const char* buffer, size_t length, const DeviceDescriptor&,
                           ModelFormat) {
  if (buffer == nullptr || length == 0)
    throw std::invalid_argument("Function::Load: the model buffer is null or empty");
  return Translated([&] {
    return std::make_shared<Function>(loom::load_model_from_bytes(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buffer), length)));
  });
}

std::vector<Variable> Function::Arguments(bool) const {
  return FromLoom(m_function.arguments());
}

std::vector<Variable> Function::Inputs(bool) const {
  return FromLoom(m_function.inputs());
}

Variable Function::Output() const {
  const std::vector<loom::Variable> outputs = m_function.outputs();
  if (outputs.size() != 1)
    throw std::runtime_error("Function::Output: " + m_function.to_string() + " has " +
                             std::to_string(outputs.size()) +
                             " outputs; use Outputs() and pick one");
  return Variable(outputs[0]);
}

std::vector<Variable> Function::Outputs() const {
  return FromLoom(m_function.outputs());
}

std::wstring Function::Name() const {
  return Widen(m_function.name());
}
std::wstring Function::Uid() const {
  return Widen(m_function.uid());
}
std::wstring Function::OpName() const {
  return Widen(m_function.op_name());
}
std::wstring Function::AsString(bool) const {
  return Widen(m_function.to_string());
}
bool Function::IsComposite() const {
  return m_function.is_composite();
}

FunctionPtr Function::RootFunction() const {
  const std::vector<loom::Variable> outputs = m_function.outputs();
  if (IsComposite() && outputs.size() == 1 && outputs[0].is_output())
    return std::make_shared<Function>(outputs[0].owner());
  return std::const_pointer_cast<Function>(shared_from_this());
}

std::vector<FunctionPtr> Function::FindAllWithName(const std::wstring& name, bool) {
  std::vector<FunctionPtr> found;
  for (const loom::GraphNode& node : loom::find_all_with_name(m_function, Narrow(name)))
    if (const auto* f = std::get_if<loom::Function>(&node))
      found.push_back(std::make_shared<Function>(*f));
  return found;
}

FunctionPtr Function::FindByName(const std::wstring& name, bool nested) {
  std::vector<FunctionPtr> found = FindAllWithName(name, nested);
  if (found.size() > 1)
    throw std::runtime_error("Function::FindByName: " + std::to_string(found.size()) +
                             " functions are named '" + Narrow(name) + "' in " +
                             m_function.to_string() + "; use FindAllWithName");
  return found.empty() ? nullptr : found[0];
}

FunctionPtr Function::Clone(ParameterCloningMethod method,
                            const std::unordered_map<Variable, Variable>& replacements) const {
  if (method == ParameterCloningMethod::Share && replacements.empty())
    return std::shared_ptr<Function>(new Function(m_function, m_runner));
  std::unordered_map<loom::Variable, loom::Variable> substitutions;
  for (const auto& [from, to] : replacements)
    substitutions.emplace(from.LoomVariable(), to.LoomVariable());
  loom::ParameterCloneMethod loomMethod;
  switch (method) {
    case ParameterCloningMethod::Share:
      loomMethod = loom::ParameterCloneMethod::Share;
      break;
    case ParameterCloningMethod::Clone:
      loomMethod = loom::ParameterCloneMethod::Clone;
      break;
    case ParameterCloningMethod::Freeze:
      loomMethod = loom::ParameterCloneMethod::Freeze;
      break;
    default:
      throw std::invalid_argument("Function::Clone: ParameterCloningMethod::Invalid");
  }
  return Translated(
      [&] { return std::make_shared<Function>(m_function.clone(loomMethod, substitutions)); });
}

void Function::Evaluate(const std::unordered_map<Variable, ValuePtr>& arguments,
                        std::unordered_map<Variable, ValuePtr>& outputs, const DeviceDescriptor&) {
  if (outputs.empty())
    throw std::invalid_argument("Function::Evaluate: no output requested of " +
                                m_function.to_string() +
                                "; give the outputs as keys of the output map");
  std::vector<loom::Variable> requested;
  for (const auto& entry : outputs) requested.push_back(entry.first.LoomVariable());
  std::call_once(m_runner->made, [&] {
    m_runner->runner = Translated([&] { return std::make_unique<loom::ModelRunner>(m_function); });
  });
  const loom::ModelRunner& runner = *m_runner->runner;
  // Any output of a function of the graph may be asked for, as in CNTK.
  const std::vector<loom::Variable>& needed = Translated(
      [&]() -> const std::vector<loom::Variable>& { return runner.arguments(requested); });

  loom::ValueMap bound;
  std::vector<loom::Variable> missing;
  for (const loom::Variable& a : needed) {
    auto it = arguments.find(Variable(a));
    if (it == arguments.end()) {
      missing.push_back(a);
      continue;
    }
    if (it->second == nullptr)
      throw std::invalid_argument("Function::Evaluate: the Value of argument " +
                                  Describe(Variable(a)) + " is null");
    loom::Value value = it->second->LoomValue();
    CheckVariableFits(Variable(a), value);
    bound.emplace(a, std::move(value));  // a batch for a sequence input: ModelRunner's rule
  }
  // Values for arguments of the function that these outputs do not need are ignored, as in
  // CNTK; a variable that is not an argument of the function at all is a mistake.
  if (bound.size() < arguments.size()) {
    const std::vector<loom::Variable>& all = runner.arguments();
    for (const auto& entry : arguments)
      if (std::find(all.begin(), all.end(), entry.first.LoomVariable()) == all.end())
        throw std::invalid_argument("Function::Evaluate: " + Describe(entry.first) +
                                    " is not an argument of " + m_function.to_string() +
                                    "; its arguments: " + NamedList(all));
  }
  if (!missing.empty())
    throw std::invalid_argument("Function::Evaluate: values for " + std::to_string(missing.size()) +
                                " required argument(s) " + NamedList(missing) +
                                " have not been provided");

  loom::ValueMap results = Translated([&] { return runner.evaluate(bound, requested); });
  for (auto& [variable, value] : outputs) {
    loom::Value& result = results.at(variable.LoomVariable());
    if (value == nullptr)
      value = std::make_shared<Value>(std::move(result));
    else
      value->CopyFrom(Value(std::move(result)));
  }
}

FunctionPtr Combine(const std::vector<Variable>& operands, const std::wstring& name) {
  std::vector<loom::Variable> outputs;
  for (const Variable& v : operands) outputs.push_back(v.LoomVariable());
  return Translated(
      [&] { return std::make_shared<Function>(loom::combine(outputs, Narrow(name))); });
}

FunctionPtr AsComposite(const FunctionPtr& rootFunction, const std::wstring& name) {
  if (rootFunction == nullptr) throw std::invalid_argument("AsComposite: the function is null");
  std::vector<Variable> outputs = rootFunction->Outputs();
  return Combine(outputs, name);
}

}  // namespace CNTK
