// CNTKLibrary.h: CNTK 2.7's C++ evaluation API (namespace CNTK) over Loom, so that an
// evaluation client written for CNTK's CNTKLibrary.h compiles unchanged and computes with Loom.
// Every call goes to Loom's C++ API: Function::Load is loom::load_model (CNTK's v1 and v2 model
// files, ONNX and Loom's own format, told apart by content), Evaluate is a loom::ModelRunner
// shared by a function and its Share-clones, values are loom::Values.
//
// Covered (the subset CNTK's evaluation examples use, with CNTK's names and signatures):
//   - Function: Load (file; memory buffer), Arguments, Inputs, Output, Outputs, FindByName,
//     FindAllWithName, Name, Uid, OpName, AsString, RootFunction, IsComposite, IsPrimitive,
//     Clone, Evaluate; the free functions Combine and AsComposite.
//   - Variable: Shape, DynamicAxes, Kind and the Is* tests, IsSparse, Name, Uid, GetDataType,
//     NeedsGradient, Owner, AsString, std::hash and ==; Axis as DynamicAxes gives it.
//   - Value: CreateBatch, CreateSequence, CreateBatchOfSequences and Create, dense and one-hot,
//     CreateSequence from CSC sparse buffers; Shape, Data, GetDataType, IsSparse, IsReadOnly,
//     MaskedCount, DeepClone, CopyFrom, CopyVariableValueTo (dense and one-hot).
//   - NDShape (CNTK's order: the fastest-changing dimension first, the REVERSE of Loom's and
//     of CNTK's Python API), NDArrayView as Value::Data gives it, DeviceDescriptor (CPU only),
//     DataType, StorageFormat, VariableKind, ParameterCloningMethod, ModelFormat.
//   - Errors as CNTK threw them: std::runtime_error (files, CNTK's RuntimeError),
//     std::invalid_argument (CNTK's InvalidArgument: shapes, sizes, variables, devices),
//     std::logic_error (CNTK's LogicError; here also an empty, default-constructed Variable).
// Not covered: building or training graphs (operators, Parameter/Constant construction,
// learners, Trainer, readers), Forward/Backward/Gradients, Save, user functions, GPUs, float16
// and int8 data, sparse (CSC) output buffers. docs/cntk-cpp-api.md lists what a CNTK user would
// notice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loom/core/value.h"
#include "loom/graph/function.h"

namespace CNTK {

enum class DataType : unsigned int {
  Unknown = 0,
  Float = 1,
  Double = 2,
  UChar = 3,
  Float16 = 4,
  Int8 = 5,
  Int16 = 6,
};

template <typename ElementType>
DataType AsDataType();
template <>
inline DataType AsDataType<float>() {
  return DataType::Float;
}
template <>
inline DataType AsDataType<double>() {
  return DataType::Double;
}

enum class StorageFormat { Dense, SparseCSC, SparseBlockCol };
enum class DeviceKind : unsigned int { CPU, GPU };
enum class VariableKind : unsigned int {
  Input = 0,
  Output = 1,
  Parameter = 2,
  Constant = 3,
  Placeholder = 4
};
enum class ParameterCloningMethod { Share, Clone, Freeze, Invalid };
// Loom tells a file's format from its content; the argument is accepted and not needed.
enum class ModelFormat { CNTKv2, ONNX };

typedef int SparseIndexType;

class Function;
class Value;
class NDArrayView;
typedef std::shared_ptr<Function> FunctionPtr;
typedef std::shared_ptr<Value> ValuePtr;
typedef std::shared_ptr<NDArrayView> NDArrayViewPtr;

// A tensor's dimensions as CNTK's C++ API lists them: the fastest-changing one first.
class NDShape final {
 public:
  enum : size_t {
    InferredDimension = (size_t)-1,
    FreeDimension = (size_t)-3,
  };
  static const NDShape& Unknown();

  NDShape() {}
  explicit NDShape(size_t numAxes, size_t dimension = InferredDimension)
      : m_shapeDims(numAxes, dimension) {}
  NDShape(const std::vector<size_t>& dimensions) : m_shapeDims(dimensions) {}
  NDShape(const std::initializer_list<size_t>& dimensions) : m_shapeDims(dimensions) {}

  const std::vector<size_t>& Dimensions() const { return m_shapeDims; }
  bool IsUnknown() const { return *this == Unknown(); }
  bool IsScalar() const { return Rank() == 0 || (Rank() == 1 && m_shapeDims[0] == 1); }
  size_t Rank() const { return m_shapeDims.size(); }
  size_t& operator[](size_t axisId) { return m_shapeDims.at(axisId); }
  size_t operator[](size_t axisId) const { return m_shapeDims.at(axisId); }
  // Axes [beginAxisId, endAxisId); std::invalid_argument outside the rank.
  NDShape SubShape(size_t beginAxisId = 0, size_t endAxisId = SIZE_MAX) const;
  bool HasInferredDimension() const;
  bool HasFreeDimension() const;
  bool HasUnboundDimension() const { return HasInferredDimension() || HasFreeDimension(); }
  // std::runtime_error while a dimension is inferred or free, as in CNTK.
  size_t TotalSize() const;
  NDShape AppendShape(const NDShape& shape) const;
  // "[4 x 3]"; "?" for an inferred dimension, "*" for a free one.
  std::wstring AsString() const;

  friend bool operator==(const NDShape& a, const NDShape& b) {
    return a.m_shapeDims == b.m_shapeDims;
  }
  friend bool operator!=(const NDShape& a, const NDShape& b) { return !(a == b); }

 private:
  std::vector<size_t> m_shapeDims;
};

class DeviceDescriptor final {
 public:
  unsigned int Id() const { return m_deviceId; }
  DeviceKind Type() const { return m_deviceType; }
  bool IsLocked() const { return false; }
  static DeviceDescriptor CPUDevice() { return DeviceDescriptor(0, DeviceKind::CPU); }
  // std::invalid_argument, as CNTK's for a GPU it cannot find: Loom computes on the CPU only.
  static DeviceDescriptor GPUDevice(unsigned int deviceId);
  static DeviceDescriptor UseDefaultDevice() { return CPUDevice(); }
  static std::vector<DeviceDescriptor> AllDevices() { return {CPUDevice()}; }
  std::wstring AsString() const;

  friend bool operator==(const DeviceDescriptor& a, const DeviceDescriptor& b) {
    return a.m_deviceId == b.m_deviceId && a.m_deviceType == b.m_deviceType;
  }
  friend bool operator!=(const DeviceDescriptor& a, const DeviceDescriptor& b) { return !(a == b); }

 private:
  DeviceDescriptor(unsigned int deviceId, DeviceKind deviceType)
      : m_deviceId(deviceId), m_deviceType(deviceType) {}
  unsigned int m_deviceId;
  DeviceKind m_deviceType;
};

class Axis final {
 public:
  explicit Axis(loom::Axis axis) : m_axis(std::move(axis)) {}
  static Axis DefaultBatchAxis() { return Axis(loom::Axis::default_batch_axis()); }
  static Axis DefaultDynamicAxis() { return Axis(loom::Axis::default_dynamic_axis()); }

  bool IsStaticAxis() const { return m_axis.is_static(); }
  bool IsDynamicAxis() const { return m_axis.is_dynamic(); }
  bool IsBatchAxis() const { return m_axis.is_batch(); }
  bool IsSequenceAxis() const { return m_axis.is_sequence(); }
  bool IsOrdered() const { return m_axis.is_ordered(); }
  std::wstring Name() const;
  std::wstring AsString() const { return Name(); }

  friend bool operator==(const Axis& a, const Axis& b) { return a.m_axis == b.m_axis; }
  friend bool operator!=(const Axis& a, const Axis& b) { return !(a == b); }

 private:
  loom::Axis m_axis;
};

class Variable {
 public:
  // An empty Variable: its accessors throw std::logic_error until one is assigned.
  Variable() {}
  // The single output of function (std::runtime_error when it has several, as in CNTK).
  Variable(const FunctionPtr& function);
  explicit Variable(loom::Variable variable) : m_variable(std::move(variable)) {}

  // CNTK's order, the reverse of Loom's: a [3, 4] Loom variable is NDShape {4, 3}.
  NDShape Shape() const;
  std::vector<Axis> DynamicAxes() const;
  VariableKind Kind() const;
  bool IsSparse() const;
  bool IsInput() const { return Kind() == VariableKind::Input; }
  bool IsOutput() const { return Kind() == VariableKind::Output; }
  bool IsParameter() const { return Kind() == VariableKind::Parameter; }
  bool IsConstant() const { return Kind() == VariableKind::Constant; }
  bool IsPlaceholder() const { return Kind() == VariableKind::Placeholder; }
  bool HasBatchAxis() const;
  bool HasSequenceAxis() const;
  bool IsInitialized() const { return m_variable.valid(); }
  std::wstring Name() const;
  std::wstring Uid() const;
  DataType GetDataType() const;
  bool NeedsGradient() const;
  // An output's function (a primitive); nullptr for other variables.
  FunctionPtr Owner() const;
  // "Input('features', [784], [#, *])"-like, as CNTK prints variables.
  std::wstring AsString() const;

  // The Loom variable, for code that uses both APIs.
  const loom::Variable& LoomVariable() const { return m_variable; }

  friend bool operator==(const Variable& a, const Variable& b) {
    return a.m_variable == b.m_variable;
  }
  friend bool operator!=(const Variable& a, const Variable& b) { return !(a == b); }

 private:
  // The Loom variable; std::logic_error for an empty (default-constructed) Variable.
  const loom::Variable& Checked() const;

  loom::Variable m_variable;
};

}  // namespace CNTK

template <>
struct std::hash<CNTK::Variable> {
  size_t operator()(const CNTK::Variable& v) const {
    return std::hash<loom::Variable>()(v.LoomVariable());
  }
};

namespace CNTK {

// A Value's data, as Value::Data gives it: a handle sharing the Value's storage.
class NDArrayView final : public std::enable_shared_from_this<NDArrayView> {
 public:
  NDArrayView(loom::NDArrayView view, bool readOnly)
      : m_view(std::move(view)), m_readOnly(readOnly) {}

  DeviceDescriptor Device() const { return DeviceDescriptor::CPUDevice(); }
  DataType GetDataType() const;
  StorageFormat GetStorageFormat() const;
  bool IsSparse() const { return m_view.is_sparse(); }
  bool IsReadOnly() const { return m_readOnly; }
  NDShape Shape() const;
  // The dense elements; std::invalid_argument for another element type or sparse data.
  template <typename ElementType>
  const ElementType* DataBuffer() const;
  // std::runtime_error for a read-only view.
  template <typename ElementType>
  ElementType* WritableDataBuffer();
  NDArrayViewPtr DeepClone(bool readOnly = false) const;
  // Copies source's elements (same shape) into this view's storage.
  void CopyFrom(const NDArrayView& source);

  const loom::NDArrayView& LoomView() const { return m_view; }

 private:
  loom::NDArrayView m_view;
  bool m_readOnly;
};

// Data for one variable of one evaluation: a batch of samples, or of sequences. A Value is
// created by the Create* functions (or by Evaluate) and is not copied, as in CNTK.
class Value : public std::enable_shared_from_this<Value> {
 public:
  // CNTK's one-hot index that stands for a zero vector.
  static constexpr size_t OneHotSkip = (size_t)0xffffffff;

  // A writable Value holds its sequences padded: Data() may be written through, and a packed
  // loom::Value's padded form is derived from its rows, which such a write would not reach.
  explicit Value(loom::Value value, bool readOnly = false)
      : m_value(readOnly || !value.is_packed() ? std::move(value)
                                               : loom::Value(value.data(), true, value.mask())),
        m_readOnly(readOnly) {}
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;

  // Dense sequences; sampleShape in CNTK's order; each inner vector a whole number of samples.
  template <typename ElementType>
  static ValuePtr Create(const NDShape& sampleShape,
                         const std::vector<std::vector<ElementType>>& sequences,
                         const std::vector<bool>& sequenceStartFlags,
                         const DeviceDescriptor& device, bool readOnly = false);
  template <typename ElementType>
  static ValuePtr Create(const NDShape& sampleShape,
                         const std::vector<std::vector<ElementType>>& sequences,
                         const DeviceDescriptor& device, bool readOnly = false) {
    return Create<ElementType>(sampleShape, sequences, {}, device, readOnly);
  }
  // One-hot sequences: one index per step, below sampleShape.TotalSize(); OneHotSkip for zero.
  template <typename ElementType>
  static ValuePtr Create(const NDShape& sampleShape,
                         const std::vector<std::vector<size_t>>& oneHotSequences,
                         const std::vector<bool>& sequenceStartFlags,
                         const DeviceDescriptor& device, bool readOnly = false);
  template <typename ElementType>
  static ValuePtr Create(const NDShape& sampleShape,
                         const std::vector<std::vector<size_t>>& oneHotSequences,
                         const DeviceDescriptor& device, bool readOnly = false) {
    return Create<ElementType>(sampleShape, oneHotSequences, {}, device, readOnly);
  }
  template <typename ElementType>
  static ValuePtr Create(size_t dimension, const std::vector<std::vector<size_t>>& oneHotSequences,
                         const std::vector<bool>& sequenceStartFlags,
                         const DeviceDescriptor& device, bool readOnly = false) {
    return Create<ElementType>(NDShape({dimension}), oneHotSequences, sequenceStartFlags, device,
                               readOnly);
  }
  template <typename ElementType>
  static ValuePtr Create(size_t dimension, const std::vector<std::vector<size_t>>& oneHotSequences,
                         const DeviceDescriptor& device, bool readOnly = false) {
    return Create<ElementType>(NDShape({dimension}), oneHotSequences, {}, device, readOnly);
  }

  // A batch of samples: batchData holds a whole number of samples of sampleShape.
  template <typename ElementType>
  static ValuePtr CreateBatch(const NDShape& sampleShape, const std::vector<ElementType>& batchData,
                              const DeviceDescriptor& device, bool readOnly = false);
  template <typename ElementType>
  static ValuePtr CreateSequence(const NDShape& sampleShape,
                                 const std::vector<ElementType>& sequenceData,
                                 bool sequenceStartFlag, const DeviceDescriptor& device,
                                 bool readOnly = false) {
    return Create<ElementType>(sampleShape, {sequenceData}, {sequenceStartFlag}, device, readOnly);
  }
  template <typename ElementType>
  static ValuePtr CreateSequence(const NDShape& sampleShape,
                                 const std::vector<ElementType>& sequenceData,
                                 const DeviceDescriptor& device, bool readOnly = false) {
    return CreateSequence<ElementType>(sampleShape, sequenceData, true, device, readOnly);
  }
  template <typename ElementType>
  static ValuePtr CreateBatchOfSequences(
      const NDShape& sampleShape, const std::vector<std::vector<ElementType>>& batchOfSequences,
      const std::vector<bool>& sequenceStartFlags, const DeviceDescriptor& device,
      bool readOnly = false) {
    return Create<ElementType>(sampleShape, batchOfSequences, sequenceStartFlags, device, readOnly);
  }
  template <typename ElementType>
  static ValuePtr CreateBatchOfSequences(
      const NDShape& sampleShape, const std::vector<std::vector<ElementType>>& batchOfSequences,
      const DeviceDescriptor& device, bool readOnly = false) {
    return Create<ElementType>(sampleShape, batchOfSequences, {}, device, readOnly);
  }

  // One-hot forms: each index selects the 1 of a sample of the given dimension.
  template <typename ElementType>
  static ValuePtr CreateBatch(size_t dimension, const std::vector<size_t>& batchData,
                              const DeviceDescriptor& device, bool readOnly = false);
  template <typename ElementType>
  static ValuePtr CreateSequence(size_t dimension, const std::vector<size_t>& sequenceData,
                                 bool sequenceStartFlag, const DeviceDescriptor& device,
                                 bool readOnly = false) {
    return Create<ElementType>(dimension, {sequenceData}, {sequenceStartFlag}, device, readOnly);
  }
  template <typename ElementType>
  static ValuePtr CreateSequence(size_t dimension, const std::vector<size_t>& sequenceData,
                                 const DeviceDescriptor& device, bool readOnly = false) {
    return CreateSequence<ElementType>(dimension, sequenceData, true, device, readOnly);
  }
  template <typename ElementType>
  static ValuePtr CreateBatchOfSequences(size_t dimension,
                                         const std::vector<std::vector<size_t>>& batchOfSequences,
                                         const std::vector<bool>& sequenceStartFlags,
                                         const DeviceDescriptor& device, bool readOnly = false) {
    return Create<ElementType>(dimension, batchOfSequences, sequenceStartFlags, device, readOnly);
  }
  template <typename ElementType>
  static ValuePtr CreateBatchOfSequences(size_t dimension,
                                         const std::vector<std::vector<size_t>>& batchOfSequences,
                                         const DeviceDescriptor& device, bool readOnly = false) {
    return Create<ElementType>(dimension, batchOfSequences, {}, device, readOnly);
  }

  // A sequence of sequenceLength samples in CNTK's CSC form: column j (sample j) holds the
  // values nonZeroValues[colStarts[j] .. colStarts[j+1]) at rows rowIndices[...].
  template <typename ElementType>
  static ValuePtr CreateSequence(const NDShape& sampleShape, size_t sequenceLength,
                                 const SparseIndexType* colStarts,
                                 const SparseIndexType* rowIndices,
                                 const ElementType* nonZeroValues, size_t numNonZeroValues,
                                 bool sequenceStartFlag, const DeviceDescriptor& device,
                                 bool readOnly = false);
  template <typename ElementType>
  static ValuePtr CreateSequence(const NDShape& sampleShape, size_t sequenceLength,
                                 const SparseIndexType* colStarts,
                                 const SparseIndexType* rowIndices,
                                 const ElementType* nonZeroValues, size_t numNonZeroValues,
                                 const DeviceDescriptor& device, bool readOnly = false) {
    return CreateSequence<ElementType>(sampleShape, sequenceLength, colStarts, rowIndices,
                                       nonZeroValues, numNonZeroValues, true, device, readOnly);
  }
  template <typename ElementType>
  static ValuePtr CreateSequence(size_t dimension, size_t sequenceLength,
                                 const SparseIndexType* colStarts,
                                 const SparseIndexType* rowIndices,
                                 const ElementType* nonZeroValues, size_t numNonZeroValues,
                                 bool sequenceStartFlag, const DeviceDescriptor& device,
                                 bool readOnly = false) {
    return CreateSequence<ElementType>(NDShape({dimension}), sequenceLength, colStarts, rowIndices,
                                       nonZeroValues, numNonZeroValues, sequenceStartFlag, device,
                                       readOnly);
  }
  template <typename ElementType>
  static ValuePtr CreateSequence(size_t dimension, size_t sequenceLength,
                                 const SparseIndexType* colStarts,
                                 const SparseIndexType* rowIndices,
                                 const ElementType* nonZeroValues, size_t numNonZeroValues,
                                 const DeviceDescriptor& device, bool readOnly = false) {
    return CreateSequence<ElementType>(NDShape({dimension}), sequenceLength, colStarts, rowIndices,
                                       nonZeroValues, numNonZeroValues, true, device, readOnly);
  }

  virtual ~Value() = default;
  DeviceDescriptor Device() const { return DeviceDescriptor::CPUDevice(); }
  DataType GetDataType() const;
  StorageFormat GetStorageFormat() const;
  // The whole data's shape in CNTK's order: sample dimensions, then [sequence length,] batch.
  NDShape Shape() const;
  bool IsSparse() const { return m_value.is_sparse(); }
  bool IsReadOnly() const { return m_readOnly; }
  // Padding positions of a batch of sequences of unequal lengths.
  size_t MaskedCount() const;
  NDArrayViewPtr Data() const;
  ValuePtr DeepClone(bool readOnly) const;
  ValuePtr DeepClone() const { return DeepClone(IsReadOnly()); }
  // Copies source's data and sequence layout into this Value's storage (same shape);
  // std::runtime_error for a read-only Value, std::invalid_argument for another shape.
  void CopyFrom(const Value& source);

  // Each sequence's (a batch's: each sample's) values, padding dropped; the buffer is resized.
  // std::invalid_argument when the variable's shape or data type does not fit this Value.
  template <typename ElementType>
  void CopyVariableValueTo(const Variable& outputVariable,
                           std::vector<std::vector<ElementType>>& sequences);
  // The same as one-hot indices: std::runtime_error for a sample that is not one-hot.
  void CopyVariableValueTo(const Variable& outputVariable,
                           std::vector<std::vector<size_t>>& sequences);

  const loom::Value& LoomValue() const { return m_value; }

 private:
  loom::Value m_value;
  bool m_readOnly;
};

class Function : public std::enable_shared_from_this<Function> {
 public:
  // A model file: CNTK's v2 and v1 (cntk.exe) formats, ONNX or Loom's, told apart by content.
  // std::runtime_error when the file cannot be read or is not a model (as CNTK's).
  static FunctionPtr Load(
      const std::wstring& filepath,
      const DeviceDescriptor& computeDevice = DeviceDescriptor::UseDefaultDevice(),
      ModelFormat format = ModelFormat::CNTKv2);
  // A model file's bytes; std::invalid_argument for a null or empty buffer.
  static FunctionPtr Load(
      const char* buffer, size_t length,
      const DeviceDescriptor& computeDevice = DeviceDescriptor::UseDefaultDevice(),
      ModelFormat format = ModelFormat::CNTKv2);

  explicit Function(loom::Function function);
  virtual ~Function();

  // The inputs the function takes, in Loom's order (the model's; rowMajor is accepted).
  std::vector<Variable> Arguments(bool rowMajor = false) const;
  std::vector<Variable> Inputs(bool pythonOperandOrder = false) const;
  // std::runtime_error when the function has several outputs.
  Variable Output() const;
  std::vector<Variable> Outputs() const;

  std::wstring Name() const;
  std::wstring Uid() const;
  std::wstring OpName() const;
  std::wstring AsString(bool doNotInferOutputs = true) const;
  bool IsComposite() const;
  bool IsPrimitive() const { return !IsComposite(); }
  // The primitive computing a composite's single output; the function itself otherwise.
  FunctionPtr RootFunction() const;
  // The function of that name in the graph; nullptr when none; std::runtime_error when several.
  FunctionPtr FindByName(const std::wstring& name, bool nestedSearchInsideBlockFunction = false);
  std::vector<FunctionPtr> FindAllWithName(const std::wstring& name,
                                           bool nestedSearchInsideBlockFunction = false);

  // Share: the same graph and parameters, evaluated by the same runner (each thread may evaluate
  // its own clone); Clone and Freeze: a copy of the graph with copies of the parameters.
  FunctionPtr Clone(ParameterCloningMethod parameterCloneMethod = ParameterCloningMethod::Clone,
                    const std::unordered_map<Variable, Variable>& replacements = {}) const;

  // Computes the outputs that are keys of `outputs` from the arguments' values. A null value
  // receives a new Value; a Value given is written into (it must have the result's shape).
  // std::invalid_argument for an argument or output that is not this function's, a missing
  // argument, or a Value of the wrong shape or type. Thread safe across Share-clones.
  void Evaluate(const std::unordered_map<Variable, ValuePtr>& arguments,
                std::unordered_map<Variable, ValuePtr>& outputs,
                const DeviceDescriptor& computeDevice = DeviceDescriptor::UseDefaultDevice());

  const loom::Function& LoomFunction() const { return m_function; }

 private:
  // The ModelRunners (one per set of requested outputs), made when first needed and shared by
  // Share-clones.
  struct Runner;
  Function(loom::Function function, std::shared_ptr<Runner> runner);

  loom::Function m_function;
  std::shared_ptr<Runner> m_runner;
};

FunctionPtr Combine(const std::vector<Variable>& operands, const std::wstring& name = L"");
FunctionPtr AsComposite(const FunctionPtr& rootFunction, const std::wstring& name = L"");

}  // namespace CNTK
