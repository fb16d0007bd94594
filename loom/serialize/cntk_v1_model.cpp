// CNTK's v1 legacy model format (cntk_model.h): the "BCN" computation-network stream cntk.exe
// writes. It is read node by node (each node type stores its own fields, which changed with the
// model version) and translated into a CompositeFunction dictionary of CNTK's v2 schema the way
// CNTK 2.x's own legacy loader maps v1 nodes to v2 primitive functions (BackCompat.cpp), so one
// builder serves both of CNTK's formats.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/serialize/cntk_model.h"

namespace loom {
namespace {

// --- The byte stream --------------------------------------------------------------------------

// A matrix as cntk.exe wrote it: rows x cols elements in column-major order (the first index
// runs fastest), which is also the order of CNTK's C++ NDShape [rows, cols, ...].
struct Matrix {
  size_t rows = 0, cols = 0;
  DataType dtype = DataType::Float32;
  size_t element_size = 4;        // as stored: 2 (half, read as float), 4 or 8
  const uint8_t* data = nullptr;  // into the file's bytes, or into decoded
  size_t at = 0;                  // where its "BMAT" marker starts
  // The elements of a half-precision or sparse matrix, converted to dense float or double.
  std::shared_ptr<std::vector<uint8_t>> decoded = nullptr;
};

// An IEEE half-precision number as a float (exact: every half is a float).
float half_to_float(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  float f;
  if (exponent == 0)  // zero or subnormal: mantissa x 2^-24
    f = std::ldexp(float(mantissa), -24);
  else if (exponent == 31)
    f = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else  // (1024 + mantissa) x 2^(exponent - 25)
    f = std::ldexp(float(mantissa | 0x400), exponent - 25);
  return (h & 0x8000) ? -f : f;
}

// The most elements a sparse matrix may have once dense (Loom's parameters are dense): its size
// is not bounded by the bytes of the file, so a damaged one could ask for any amount of memory.
constexpr uint64_t kMaxDensified = uint64_t(1) << 30;

// cntk.exe's File class in binary mode: numbers little-endian in their C++ sizes (size_t 8, int
// 4, bool 1, float 4, double 8), strings as UTF-16 code units ending in a 0 unit, and section
// markers as such strings ("BCN" ... "ECN"). Every read checks the bytes left first, so damaged
// lengths end in a DataError and never in a huge allocation.
class Stream {
 public:
  Stream(std::span<const uint8_t> bytes, const std::string& name) : b_(bytes), name_(name) {}

  size_t offset() const { return pos_; }
  size_t left() const { return b_.size() - pos_; }
  const std::string& name() const { return name_; }

  [[noreturn]] void fail(const std::string& what, size_t at) const {
    throw DataError("'" + name_ + "': " + what + " at byte " + std::to_string(at) +
                    " of the CNTK v1 model");
  }
  [[noreturn]] void fail(const std::string& what) const { fail(what, pos_); }

  const uint8_t* take(size_t n, const std::string& what) {
    if (n > left())
      fail("truncated file: expected " + what + " (" + std::to_string(n) + " bytes, " +
           std::to_string(left()) + " left)");
    const uint8_t* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T pod(const std::string& what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
  uint64_t u64(const std::string& what) { return pod<uint64_t>(what); }
  int64_t i64(const std::string& what) { return pod<int64_t>(what); }
  uint32_t u32(const std::string& what) { return pod<uint32_t>(what); }
  int32_t i32(const std::string& what) { return pod<int32_t>(what); }
  float f32(const std::string& what) { return pod<float>(what); }
  double f64(const std::string& what) { return pod<double>(what); }
  bool boolean(const std::string& what) {
    size_t at = pos_;
    uint8_t v = pod<uint8_t>(what);
    if (v > 1) fail("expected " + what + " (a bool, 0 or 1), found " + std::to_string(v), at);
    return v == 1;
  }
  // A count of things that take at least min_bytes each: checked against the bytes left.
  uint64_t count(const std::string& what, size_t min_bytes) {
    size_t at = pos_;
    uint64_t n = u64(what);
    if (min_bytes && n > left() / min_bytes)
      fail("implausible count " + std::to_string(n) + " for " + what + " (only " +
               std::to_string(left()) + " bytes left)",
           at);
    return n;
  }

  // A 0-terminated UTF-16 string as UTF-8 (nullopt where the bytes end before its 0 unit).
  std::optional<std::string> try_wstring() {
    std::string s;
    size_t p = pos_;
    while (true) {
      if (b_.size() - p < 2) return std::nullopt;
      uint32_t c = b_[p] | (b_[p + 1] << 8);
      p += 2;
      if (c == 0) break;
      if (c >= 0xD800 && c < 0xDC00 && b_.size() - p >= 2) {  // a surrogate pair
        uint32_t lo = b_[p] | (b_[p + 1] << 8);
        if (lo >= 0xDC00 && lo < 0xE000) {
          c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
          p += 2;
        }
      }
      append_utf8(s, c);
    }
    pos_ = p;
    return s;
  }
  std::string wstring(const std::string& what) {
    auto s = try_wstring();
    if (!s) fail("truncated file: expected " + what + " (a 0-terminated UTF-16 string)");
    return *s;
  }
  void marker(const std::string& m) {
    size_t at = pos_;
    auto s = try_wstring();
    if (!s || *s != m)
      fail("expected the marker \"" + m + "\"" + (s ? ", found \"" + printable(*s) + "\"" : ""),
           at);
  }
  bool try_marker(const std::string& m) {
    size_t at = pos_;
    auto s = try_wstring();
    if (s && *s == m) return true;
    pos_ = at;
    return false;
  }

  // CNTK's TensorShape: a uint32 rank, then uint32 dimensions. With legacy, also the format
  // older files wrote for images (three size_t W, C, H), which CNTK tells apart by a 0 second
  // word.
  std::vector<size_t> tensor_shape(const std::string& what, bool legacy = false) {
    size_t at = pos_;
    uint32_t rank = u32(what + "'s rank");
    uint32_t dim0 = rank > 0 ? u32(what + "'s dimension") : 0;
    if (!legacy || dim0 != 0) {
      if (rank > left() / 4 + 1)
        fail("implausible rank " + std::to_string(rank) + " of " + what, at);
      std::vector<size_t> dims(rank);
      if (rank > 0) dims[0] = dim0;
      for (size_t i = 1; i < rank; i++) dims[i] = u32(what + "'s dimension");
      return dims;
    }
    std::vector<size_t> dims(3);
    dims[1] = rank;
    dims[2] = u64(what + "'s dimension");
    dims[0] = u64(what + "'s dimension");
    return dims;
  }

  // A std::vector<bool> as File writes it: a size_t count, then one byte each.
  std::vector<bool> bool_vector(const std::string& what) {
    uint64_t n = count(what + "'s length", 1);
    std::vector<bool> v;
    for (uint64_t i = 0; i < n; i++) v.push_back(boolean(what + "'s element"));
    return v;
  }

  // A number of a node's precision (element_size 2: half, read as float).
  double element(size_t element_size, const std::string& what) {
    if (element_size == 2) return half_to_float(pod<uint16_t>(what));
    return element_size == 8 ? f64(what) : f32(what);
  }

  // A matrix: its type character ('d' dense, 's' sparse), "BMAT", the element size, a name, a
  // format word, then a dense matrix's rows, cols and elements, or a sparse one's (sparse()),
  // and "EMAT". Half-precision and sparse matrices are converted to dense float (double).
  Matrix matrix(const std::string& what) {
    size_t at = pos_;
    uint8_t type = pod<uint8_t>(what + "'s matrix type");
    if (type != 'd' && type != 's')
      fail("expected the matrix type 'd' (dense) or 's' (sparse) of " + what + ", found " +
               std::to_string(type),
           at);
    Matrix m;
    m.at = pos_;
    marker("BMAT");
    size_t size_at = pos_;
    m.element_size = u64(what + "'s element size");
    if (m.element_size != 2 && m.element_size != 4 && m.element_size != 8)
      fail("expected the element size 2, 4 or 8 of " + what + ", found " +
               std::to_string(m.element_size),
           size_at);
    m.dtype = m.element_size == 8 ? DataType::Float64 : DataType::Float32;
    wstring(what + "'s matrix name");
    size_t format_at = pos_;
    int32_t format = i32(what + "'s matrix format");
    if (type == 's') {
      sparse(m, format, format_at, what);
    } else {
      size_t dims_at = pos_;
      m.rows = u64(what + "'s rows");
      m.cols = u64(what + "'s columns");
      size_t max_elements = left() / m.element_size;
      if ((m.cols != 0 && m.rows > max_elements / m.cols) || m.rows * m.cols > max_elements)
        fail("implausible matrix size " + std::to_string(m.rows) + " x " + std::to_string(m.cols) +
                 " of " + what + " (only " + std::to_string(left()) + " bytes left)",
             dims_at);
      m.data = take(m.rows * m.cols * m.element_size, what + "'s elements");
      if (m.element_size == 2) {
        m.decoded = std::make_shared<std::vector<uint8_t>>(m.rows * m.cols * sizeof(float));
        float* out = reinterpret_cast<float*>(m.decoded->data());
        for (size_t i = 0; i < m.rows * m.cols; i++) {
          uint16_t h;
          std::memcpy(&h, m.data + 2 * i, 2);
          out[i] = half_to_float(h);
        }
        m.data = m.decoded->data();
      }
    }
    marker("EMAT");
    return m;
  }

  // A sparse matrix as CNTK's GPUSparseMatrix wrote it: after the format word (6: compressed
  // columns, CSC; 7: compressed rows, CSR) the number of non-zero elements, the columns, the
  // rows, and where there are non-zero elements, their values, their row (CSC) or column (CSR)
  // indices as size_t, and the cols + 1 (rows + 1) size_t offsets where each column's (row's)
  // elements start. The matrix becomes dense, column-major as a dense one is stored.
  void sparse(Matrix& m, int32_t format, size_t format_at, const std::string& what) {
    if (format != 6 && format != 7)
      fail("expected the sparse format 6 (CSC) or 7 (CSR) of " + what + ", found " +
               std::to_string(format),
           format_at);
    const bool csc = format == 6;
    size_t count_at = pos_;
    uint64_t nonzeros = u64(what + "'s number of non-zero elements");
    size_t dims_at = pos_;
    m.cols = u64(what + "'s columns");
    m.rows = u64(what + "'s rows");
    if ((m.cols != 0 && m.rows > kMaxDensified / m.cols) || m.rows * m.cols > kMaxDensified)
      fail("the sparse matrix " + what + " of " + std::to_string(m.rows) + " x " +
               std::to_string(m.cols) + " elements is larger than Loom makes dense (2^30)",
           dims_at);
    if (nonzeros > m.rows * m.cols || nonzeros > left() / (m.element_size + 8))
      fail("implausible count " + std::to_string(nonzeros) + " of non-zero elements of " + what +
               " (only " + std::to_string(left()) + " bytes left)",
           count_at);
    std::vector<double> values(nonzeros);
    for (double& v : values) v = element(m.element_size, what + "'s non-zero elements");
    std::vector<uint64_t> index(nonzeros);
    for (uint64_t& i : index) i = u64(what + "'s indices");
    const uint64_t lines = csc ? m.cols : m.rows, extent = csc ? m.rows : m.cols;
    std::vector<uint64_t> starts;
    if (nonzeros > 0) {
      if (lines >= left() / 8) fail("truncated file: expected the offsets of " + what);
      for (uint64_t i = 0; i <= lines; i++) starts.push_back(u64(what + "'s offsets"));
      if (starts[0] != 0 || starts[lines] != nonzeros ||
          !std::is_sorted(starts.begin(), starts.end()))
        fail("the offsets of the sparse matrix " + what + " are not ascending from 0 to " +
             std::to_string(nonzeros));
      for (uint64_t i : index)
        if (i >= extent)
          fail("the sparse matrix " + what + " has the index " + std::to_string(i) +
               " outside its " + std::to_string(extent) + (csc ? " rows" : " columns"));
    }
    const size_t n = m.rows * m.cols;
    m.decoded = std::make_shared<std::vector<uint8_t>>(n * size_of(m.dtype), 0);
    dispatch(m.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* out = reinterpret_cast<T*>(m.decoded->data());
      for (uint64_t line = 0; line + 1 < starts.size(); line++)
        for (uint64_t k = starts[line]; k < starts[line + 1]; k++)
          out[csc ? index[k] + m.rows * line : line + m.rows * index[k]] = T(values[k]);
    });
    m.data = m.decoded->data();
  }

  // The element type of the first matrix after the current position (float where there is
  // none): its "BMAT" marker and the size_t element size after it.
  DataType first_matrix_type() const {
    static const uint8_t bmat[] = {'B', 0, 'M', 0, 'A', 0, 'T', 0, 0, 0};
    auto at = std::search(b_.begin() + long(pos_), b_.end(), std::begin(bmat), std::end(bmat));
    if (b_.end() - at < long(sizeof bmat + 8)) return DataType::Float32;
    return at[sizeof bmat] == 8 ? DataType::Float64 : DataType::Float32;
  }

  static std::string printable(const std::string& s) {
    std::string out;
    for (char c : s.substr(0, 40)) out += (c >= 32 && c < 127) ? c : '?';
    return s.size() > 40 ? out + "..." : out;
  }

 private:
  static void append_utf8(std::string& s, uint32_t c) {
    if (c < 0x80) {
      s += char(c);
    } else if (c < 0x800) {
      s += char(0xC0 | (c >> 6));
      s += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      s += char(0xE0 | (c >> 12));
      s += char(0x80 | ((c >> 6) & 0x3F));
      s += char(0x80 | (c & 0x3F));
    } else {
      s += char(0xF0 | (c >> 18));
      s += char(0x80 | ((c >> 12) & 0x3F));
      s += char(0x80 | ((c >> 6) & 0x3F));
      s += char(0x80 | (c & 0x3F));
    }
  }

  std::span<const uint8_t> b_;
  std::string name_;
  size_t pos_ = 0;
};

// The newest model version cntk.exe wrote (CURRENT_CNTK_MODEL_VERSION); the node readers below
// follow each type's fields through the versions 1 to this one.
constexpr uint64_t kNewestVersion = 31;

// --- The nodes --------------------------------------------------------------------------------

// One node of the network with the fields its type stores (the others keep their defaults).
struct Node {
  std::string precision, op, name;
  size_t at = 0;  // where its record starts
  std::vector<Node*> inputs;
  DataType dtype = DataType::Float32;
  size_t element_size = 4;  // of its numbers: 2 (half, computed in float32), 4 or 8

  // LearnableParameter, InputValue, PastValue, Mean/InvStdDev: the sample layout (CNTK's order).
  std::vector<size_t> layout;
  float lr_multiplier = 1;
  std::optional<Matrix> value;
  bool sparse = false;
  std::string dynamic_axis;  // also Where's new axis
  bool has_computed = true;

  int32_t time_step = 1;  // PastValue, FutureValue
  double initial_value = 0;
  uint64_t output_rank = 1;  // Times, TransposeTimes
  int32_t infer_input_rank = -1;
  std::vector<int32_t> begin, end, axes, strides;  // Slice; axes also ReduceElements
  int32_t splice_dim = 1;                          // RowStack
  std::string reduction_op;                        // ReduceElements
  bool keep_dimensions = true;
  int32_t reshape_begin = 0, reshape_end = 0;  // Reshape
  int32_t axis1 = 1, axis2 = 2;                // TransposeDimensions
  std::vector<uint64_t> permutation;
  uint64_t target_rows = 0;           // LegacyReshape (with layout)
  uint64_t repeats = 1;               // RowRepeat
  double spatial_scale = 1.0 / 16;    // ROIPooling (layout: the output shape; pool_kind)
  double offset_x = 0, offset_y = 0;  // Crop
  // EditDistanceError
  double substitution_penalty = 1, deletion_penalty = 1, insertion_penalty = 1;
  bool squash_inputs = false;
  std::vector<uint64_t> tokens_to_ignore;
  int32_t delay_constraint = -1;  // ForwardBackward
  uint64_t blank_token = 0;
  bool allow_duplicates = false;  // RandomSample, RandomSampleInclusionFrequency
  uint64_t num_samples = 0;
  // Convolution and Pooling (ConvolutionNodeBase) and the legacy pooling nodes
  std::vector<size_t> kernel, map_count, stride, lower_pad, upper_pad, output_shape, dilation;
  std::vector<bool> sharing, auto_pad;
  int32_t pool_kind = 0, image_layout = 1;
  uint64_t max_temp_mem = 0;
  bool transpose = false, ceil_out_dim = false, include_pad = false, convolution_2d = false;
  // BatchNormalization
  bool spatial = false, use_cntk_engine = true, inv_std_dev = false;
  double norm_time_constant = 0, blend_time_constant = 0, epsilon = 0;
  uint64_t run_count = 0;
  // Dropout (the rate is not saved: cntk.exe set it from the SGD configuration), RandomSample
  uint64_t rng_seed = 0, rng_offset = 0;

  // Nodes that become variables rather than functions.
  bool is_leaf() const {
    return op == "LearnableParameter" || op == "InputValue" || op == "SparseInputValue" ||
           op == "Mean" || op == "InvStdDev";
  }
  bool is_delay() const { return op == "PastValue" || op == "FutureValue"; }
};

// Old names cntk.exe still accepted for node types (ComputationNetworkBuilder.cpp).
std::string canonical_op(const std::string& op) {
  static const std::map<std::string, std::string> aliases = {
      {"ColumnElementTimes", "ElementTimes"},
      {"RowElementTimes", "ElementTimes"},
      {"Scale", "ElementTimes"},
      {"ErrorPrediction", "ClassificationError"},
      {"Delay", "PastValue"},
      {"ReconcileMBLayout", "ReconcileDynamicAxis"},
      {"RowSlice", "Slice"},
      {"Transpose", "TransposeDimensions"},
      {"PerDimMeanVarNormalizationNode", "PerDimMeanVarNormalization"}};
  auto it = aliases.find(op);
  return it == aliases.end() ? op : it->second;
}

// Node types that store nothing beyond their type and name, and the v2 op each maps to
// (PrimitiveOpType.h), as BackCompat.cpp maps them.
const std::map<std::string, int>& plain_ops() {
  static const std::map<std::string, int> ops = {
      {"Negate", 0},
      {"Sigmoid", 1},
      {"Tanh", 2},
      {"RectifiedLinear", 3},
      {"Exp", 4},
      {"Log", 5},
      {"Sqrt", 6},
      {"Floor", 7},
      {"Abs", 8},
      {"Reciprocal", 9},
      {"Softmax", 10},
      {"Hardmax", 11},
      {"SumElements", 18},
      {"Plus", 19},
      {"Minus", 20},
      {"ElementTimes", 21},
      {"DiagTimes", 21},  // CNTK's legacy support: a vector times a vector, elementwise
      {"Equal", 22},
      {"NotEqual", 23},
      {"Less", 24},
      {"LessEqual", 25},
      {"Greater", 26},
      {"GreaterEqual", 27},
      {"PackedIndex", 28},
      {"GatherPacked", 29},
      {"ScatterPacked", 30},
      {"SquareError", 34},
      {"CrossEntropyWithSoftmax", 35},
      {"ClassificationError", 36},
      {"Clip", 41},
      {"If", 42},
      {"Logistic", 48},
      {"ReconcileDynamicAxis", 50},
      {"LogSoftmax", 51},
      {"LogPlus", 52},
      {"CosDistance", 53},
      {"Sin", 54},
      {"Cosine", 55},
      {"Pass", 56},
      {"LambdaRank", 59},
      {"NDCG1Eval", 60},
      {"LabelsToGraph", 63},
      {"StopGradient", 64},
      {"CosDistanceWithNegativeSamples", 67},
      {"StableSigmoid", 75},
      {"Sinh", 77},
      {"Cosh", 78},
      {"Asin", 81},
      {"Acos", 82},
      {"Atanh", 85},
      {"Asinh", 86},
      {"StraightThrough", 94},
      {"Cast", 91}};
  return ops;
}

// Node types with their own fields, read in read_fields.
const std::set<std::string>& field_ops() {
  static const std::set<std::string> ops = {"LearnableParameter",
                                            "InputValue",
                                            "SparseInputValue",
                                            "Mean",
                                            "InvStdDev",
                                            "PastValue",
                                            "FutureValue",
                                            "Times",
                                            "TransposeTimes",
                                            "Slice",
                                            "RowStack",
                                            "ReduceElements",
                                            "SumColumnElements",
                                            "Reshape",
                                            "TransposeDimensions",
                                            "Dropout",
                                            "Convolution",
                                            "Pooling",
                                            "MaxPooling",
                                            "AveragePooling",
                                            "BatchNormalization",
                                            "PerDimMeanVarNormalization",
                                            "Where",
                                            "ROIPooling",
                                            "MaxUnpooling",
                                            "Crop",
                                            "RowRepeat",
                                            "LegacyReshape",
                                            "EditDistanceError",
                                            "ForwardBackward",
                                            "RandomSample",
                                            "RandomSampleInclusionFrequency"};
  return ops;
}

// Node types cntk.exe wrote that Loom does not read, and why.
const std::map<std::string, std::string>& refused_ops() {
  static const std::map<std::string, std::string> ops = {
      {"Padding",
       "cntk.exe saved none of its fields (each axis's padding, the mode, the fill value), so "
       "the file does not say how it pads"},
      {"OneHot",
       "cntk.exe saved none of its fields (the number of classes, the axis, sparse output), so "
       "the file does not say what it computes"},
      {"CustomProxyOpNode",
       "cntk.exe saved neither the custom operation's name nor its output shape (and could not "
       "evaluate it either)"},
      {"OptimizedRNNStack", "it is cuDNN's recurrent network, which CNTK ran on GPUs only"},
      {"GMMLogLikelihood", "Gaussian mixture likelihoods are outside Loom's scope"},
      {"SequenceWithSoftmax", "sequence training on lattices is outside Loom's scope"},
      {"LatticeSequenceWithSoftmax", "sequence training on lattices is outside Loom's scope"},
      {"CRF", "the linear-chain CRF criterion is outside Loom's scope"},
      {"ClassBasedCrossEntropyWithSoftmax",
       "the class-based softmax criterion is outside Loom's scope (CNTK 2 did not load it either)"},
      {"NoiseContrastiveEstimation",
       "this legacy NCE node (sampling inside the node, with its own evaluation modes) matches "
       "none of Loom's operations, cntk.losses.nce_loss among them (CNTK 2 did not load it "
       "either)"},
      {"EnvironmentInput",
       "it reads cntk.exe's run-time state, which a loaded model has no counterpart of (CNTK 2 "
       "did not load it either)"}};
  return ops;
}

// The random seed and offset of the nodes that draw random numbers (CNTK's RngUser).
void read_rng_state(Stream& s, Node& n, uint64_t version) {
  if (version < 16) return;
  // Version 16 wrote the seed as an unsigned long, 4 bytes where cntk.exe was built (Windows).
  const std::string seed = "the random seed of node '" + n.name + "'";
  n.rng_seed = version == 16 ? s.u32(seed) : s.u64(seed);
  n.rng_offset = s.u64("the random offset of node '" + n.name + "'");
}

// The fields of n's type as its Load method reads them for the given model version.
void read_fields(Stream& s, Node& n, uint64_t version) {
  const std::string& op = n.op;
  auto what = [&](const char* field) { return std::string(field) + " of node '" + n.name + "'"; };
  if (op == "LearnableParameter") {
    if (version >= 3) {
      n.lr_multiplier = s.f32(what("the learning-rate multiplier"));
      n.layout = s.tensor_shape(what("the shape"));
    } else {
      n.lr_multiplier = s.boolean(what("the needs-update flag")) ? 1 : 0;
      uint64_t rows = s.u64(what("the rows")), cols = s.u64(what("the columns"));
      if (rows != 0) {
        n.layout = {rows, cols};
      } else {
        n.layout = s.tensor_shape(what("the shape"), true);
        if (cols > 1) n.layout.push_back(cols);
      }
    }
    n.value = s.matrix(what("the value"));
  } else if (op == "InputValue" || op == "SparseInputValue") {
    n.sparse = op == "SparseInputValue";
    uint64_t rows = s.u64(what("the rows"));
    s.u64(what("the columns"));
    n.layout = s.tensor_shape(what("the shape"), true);
    size_t elements = 1;
    for (size_t d : n.layout) elements *= d;
    if (rows != 0 && rows != elements) n.layout = {rows};  // as cntk.exe: an even older file
    if (version >= 8) {
      size_t at = s.offset();
      uint32_t axes = s.u32(what("the number of dynamic axes"));
      if (axes == 1)
        n.dynamic_axis = s.wstring(what("the dynamic axis"));
      else if (axes > 1)
        s.fail("node '" + n.name + "' has " + std::to_string(axes) +
                   " dynamic axes; cntk.exe read one at most",
               at);
    }
    n.lr_multiplier = version >= 10 ? s.f32(what("the learning-rate multiplier")) : 0;
  } else if (op == "Mean" || op == "InvStdDev") {
    n.has_computed = s.boolean(what("the computed flag"));
    n.value = s.matrix(what("the value"));
    n.layout = {n.value->rows, n.value->cols};
  } else if (op == "PastValue" || op == "FutureValue") {
    n.time_step = s.i32(what("the time step"));
    if (version > 3) {
      n.layout = s.tensor_shape(what("the shape"));
    } else {
      n.layout = {s.u64(what("the rows"))};
      s.u64(what("the columns"));
    }
    if (version >= 2) n.initial_value = s.element(n.element_size, what("the initial value"));
  } else if (op == "Times" || op == "TransposeTimes") {
    if (version >= 3) n.output_rank = s.u64(what("the output rank"));
    if (version >= 12) n.infer_input_rank = s.i32(what("the inferred input rank"));
  } else if (op == "Slice") {
    int32_t num = 1;
    size_t at = s.offset();
    if (version >= 22) num = s.i32(what("the number of axes"));
    if (num < 1 || size_t(num) > s.left() / 16 + 1)
      s.fail("implausible number of axes " + std::to_string(num) + " of node '" + n.name + "'", at);
    for (int32_t i = 0; i < num; i++) {
      int64_t begin = s.i64(what("the begin index"));
      int64_t height = s.i64(what("the slice length"));  // end - begin, as the oldest files
      n.begin.push_back(int32_t(begin));
      n.end.push_back(int32_t(begin + height));
      n.axes.push_back(version >= 3 ? s.i32(what("the axis")) : 1);
      n.strides.push_back(version >= 27 ? s.i32(what("the stride")) : 1);
    }
  } else if (op == "RowStack") {
    if (version >= 3) n.splice_dim = s.i32(what("the splice axis"));
  } else if (op == "ReduceElements") {
    int32_t num = 1;
    size_t at = s.offset();
    if (version >= 27) num = s.i32(what("the number of axes"));
    if (num < 0 || size_t(num) > s.left() / 4)
      s.fail("implausible number of axes " + std::to_string(num) + " of node '" + n.name + "'", at);
    for (int32_t i = 0; i < num; i++) n.axes.push_back(s.i32(what("the axis")));
    n.reduction_op = s.wstring(what("the reduction"));
    // Before version 24 the default: reducing all static axes drops them, one axis keeps it.
    if (version >= 24)
      n.keep_dimensions = s.boolean(what("the keep-dimensions flag"));
    else
      n.keep_dimensions = !(n.axes.size() == 1 && n.axes[0] == 0);
  } else if (op == "Reshape") {
    n.reshape_begin = s.i32(what("the begin axis"));
    n.reshape_end = s.i32(what("the end axis"));
    n.layout = s.tensor_shape(what("the new shape"));
  } else if (op == "TransposeDimensions") {
    if (version >= 3) {
      n.axis1 = s.i32(what("the first axis"));
      n.axis2 = s.i32(what("the second axis"));
      if (version >= 25 && n.axis1 == 0 && n.axis2 == 0) {
        uint64_t rank = s.count(what("the permutation's length"), 8);
        for (uint64_t i = 0; i < rank; i++) n.permutation.push_back(s.u64(what("the permutation")));
      }
    }
  } else if (op == "Dropout") {
    read_rng_state(s, n, version);
  } else if (op == "Convolution" || op == "Pooling" || op == "MaxUnpooling") {
    if (version >= 5) {
      n.kernel = s.tensor_shape(what("the kernel shape"));
      n.map_count = s.tensor_shape(what("the map count"));
      n.stride = s.tensor_shape(what("the strides"));
      n.sharing = s.bool_vector(what("the sharing"));
      n.auto_pad = s.bool_vector(what("the padding"));
      n.lower_pad = s.tensor_shape(what("the lower padding"));
      n.upper_pad = s.tensor_shape(what("the upper padding"));
      n.pool_kind = s.i32(what("the pooling kind"));
      n.image_layout = s.i32(what("the image layout"));
      n.max_temp_mem = s.u64(what("the temporary memory size"));
    }
    if (version >= 9) n.transpose = s.boolean(what("the transpose flag"));
    if (version >= 20) n.output_shape = s.tensor_shape(what("the output shape"));
    if (version >= 21) n.ceil_out_dim = s.boolean(what("the ceiling flag"));
    if (version >= 23) n.include_pad = s.boolean(what("the include-padding flag"));
    if (op == "Convolution") {
      if (version < 5) {  // a 2D convolution of the oldest files
        uint64_t kw = s.u64(what("the kernel width")), kh = s.u64(what("the kernel height"));
        uint64_t sw = s.u64(what("the horizontal stride")), sh = s.u64(what("the vertical stride"));
        uint32_t maps = s.u32(what("the map count"));
        n.image_layout = int32_t(s.u32(what("the image layout")));
        bool pad = s.boolean(what("the padding"));
        n.max_temp_mem = s.u64(what("the temporary memory size"));
        n.convolution_2d = true;
        n.kernel = {kw, kh, 1};
        n.map_count = {maps};
        n.stride = {sw, sh, 1};
        n.sharing = {true};
        n.auto_pad = {pad};
        n.lower_pad = {0};
        n.upper_pad = {0};
      } else {
        n.convolution_2d = s.boolean(what("the 2D flag"));
        if (version >= 18) n.dilation = s.tensor_shape(what("the dilation"));
      }
    }
  } else if (op == "MaxPooling" || op == "AveragePooling") {
    uint32_t width = s.u32(what("the window width"));
    n.image_layout = int32_t(s.u32(what("the image layout")));
    uint64_t height = s.u64(what("the window height"));
    uint64_t hs = s.u64(what("the horizontal stride")), vs = s.u64(what("the vertical stride"));
    n.pool_kind = op == "MaxPooling" ? 1 : 2;
    // Only the CHW layout maps to v2's pooling (BackCompat.cpp), where this is [W, H, C].
    n.kernel = {width, height, 1};
    n.stride = {hs, vs, 1};
    n.auto_pad = {false};
    n.lower_pad = {0};
    n.upper_pad = {0};
  } else if (op == "BatchNormalization") {
    if (version >= 6) {
      n.spatial = s.boolean(what("the spatial flag"));
      n.norm_time_constant = s.f64(what("the normalization time constant"));
      n.blend_time_constant = s.f64(what("the blend time constant"));
      n.image_layout = s.i32(what("the image layout"));
      if (version >= 13) {
        if (version != 19)
          n.run_count = s.u64(what("the sample count"));
        else  // version 19 saved only whether the count was 0
          n.run_count = s.boolean(what("the zero-count flag")) ? 0 : 1;
      } else {
        n.run_count = 16 * s.u64(what("the minibatch count"));  // cntk.exe's estimate
      }
      n.epsilon = s.f64(what("the epsilon"));
      n.use_cntk_engine = s.boolean(what("the engine flag"));
    } else {
      size_t at = s.offset();
      int32_t written = s.i32(what("the written version"));
      int32_t readable = s.i32(what("the readable version"));
      if (readable > written) s.fail("corrupt batch-normalization version of '" + n.name + "'", at);
      s.boolean(what("the eval flag"));
      n.spatial = s.boolean(what("the spatial flag"));
      double time_constant = s.f64(what("the normalization time constant"));
      if (written >= 0x00010004) n.norm_time_constant = time_constant;
      if (written >= 0x00010002) {
        n.image_layout = s.i32(what("the image layout"));
        n.run_count = 16 * s.u64(what("the minibatch count"));
      }
      if (written >= 0x00010003) {
        n.epsilon = s.f64(what("the epsilon"));
        n.use_cntk_engine = s.boolean(what("the engine flag"));
      }
    }
    n.inv_std_dev = version < 13;  // these stored 1/stddev where newer ones store the variance
  } else if (op == "Where") {
    n.dynamic_axis = version >= 11 ? s.wstring(what("the new dynamic axis")) : "WhereNodeAxis";
  } else if (op == "ROIPooling") {
    n.layout = s.tensor_shape(what("the output shape"));
    n.pool_kind = 1;  // before version 26: max pooling of 1/16 scale, as cntk.exe assumed
    if (version >= 26) {
      n.pool_kind = s.i32(what("the pooling kind"));
      n.spatial_scale = s.f64(what("the spatial scale"));
    }
  } else if (op == "Crop") {
    n.offset_x = s.f64(what("the x offset"));
    n.offset_y = s.f64(what("the y offset"));
  } else if (op == "RowRepeat") {
    n.repeats = s.u64(what("the number of repeats"));
  } else if (op == "LegacyReshape") {
    n.target_rows = s.u64(what("the number of rows"));
    n.layout = s.tensor_shape(what("the image layout"), true);
  } else if (op == "EditDistanceError") {
    n.substitution_penalty = s.f32(what("the substitution penalty"));
    n.deletion_penalty = s.f32(what("the deletion penalty"));
    n.insertion_penalty = s.f32(what("the insertion penalty"));
    n.squash_inputs = s.boolean(what("the squash flag"));
    uint64_t count = s.count(what("the number of tokens to ignore"), 8);
    for (uint64_t i = 0; i < count; i++)
      n.tokens_to_ignore.push_back(s.u64(what("a token to ignore")));
  } else if (op == "ForwardBackward") {
    n.delay_constraint = s.i32(what("the delay constraint"));
    n.blank_token = s.u64(what("the blank token"));
  } else if (op == "RandomSample" || op == "RandomSampleInclusionFrequency") {
    n.allow_duplicates = s.boolean(what("the allow-duplicates flag"));
    n.num_samples = s.u64(what("the number of samples"));
    read_rng_state(s, n, version);
  } else if (op == "SumColumnElements" || op == "PerDimMeanVarNormalization") {
    // no fields of their own
  }
}

// The whole stream: the version, the nodes, their inputs and the root groups.
struct Network {
  uint64_t version = 1;
  std::vector<std::unique_ptr<Node>> nodes;
  std::map<std::string, Node*> by_name;
  std::vector<Node*> features, labels, criteria, evaluation, outputs;
};

Network read_network(Stream& s) {
  Network net;
  s.marker("BCN");
  if (s.try_marker("BVersion")) {
    size_t at = s.offset();
    net.version = s.u64("the model version");
    if (net.version < 1 || net.version > kNewestVersion)
      s.fail("unsupported model version " + std::to_string(net.version) + " (Loom reads 1 to " +
                 std::to_string(kNewestVersion) + ")",
             at);
    s.marker("EVersion");
  }
  // Before version 7 nodes do not say their precision: cntk.exe took the element size of the
  // first matrix in the file (DetectLegacyModelDataType), which decides how wide the numbers
  // of the nodes before it are.
  DataType legacy_dtype = DataType::Float32;
  if (net.version < 7) legacy_dtype = s.first_matrix_type();
  // Each node takes at least its type and name strings.
  uint64_t count = s.count("the number of nodes", 4);
  s.marker("BNodeList");
  for (uint64_t i = 0; i < count; i++) {
    auto node = std::make_unique<Node>();
    Node& n = *node;
    n.at = s.offset();
    if (net.version >= 7) n.precision = s.wstring("the precision of node " + std::to_string(i));
    size_t op_at = s.offset();
    n.op = canonical_op(s.wstring("the type of node " + std::to_string(i)));
    n.name = s.wstring("the name of node " + std::to_string(i));
    // A Cast node (version 31) says "<output>,<input>": the node computes in its output's.
    std::string precision = n.precision;
    if (n.op == "Cast") precision = precision.substr(0, precision.find(','));
    if (precision == "double" || (precision.empty() && legacy_dtype == DataType::Float64)) {
      n.dtype = DataType::Float64;
      n.element_size = 8;
    } else if (precision == "half") {  // computed in float32, as the v2 reader reads float16
      n.element_size = 2;
    } else if (precision != "float" && !precision.empty()) {
      s.fail("node '" + n.name + "' has the precision \"" + Stream::printable(n.precision) +
                 "\"; Loom reads float, double and half",
             n.at);
    }
    if (auto refused = refused_ops().find(n.op); refused != refused_ops().end())
      s.fail("node '" + Stream::printable(n.name) + "' has the type '" + n.op +
                 "', which Loom does not read: " + refused->second,
             op_at);
    if (!plain_ops().count(n.op) && !field_ops().count(n.op))
      s.fail("node '" + Stream::printable(n.name) + "' has the type '" + Stream::printable(n.op) +
                 "', which Loom cannot read",
             op_at);
    read_fields(s, n, net.version);
    if (n.value && n.value->element_size != n.element_size)
      s.fail("the value of node '" + n.name + "' does not have the node's precision", n.value->at);
    if (!net.by_name.emplace(n.name, &n).second)
      s.fail("two nodes are named '" + Stream::printable(n.name) + "'", n.at);
    net.nodes.push_back(std::move(node));
  }
  s.marker("ENodeList");

  auto node_named = [&](const std::string& name, size_t at) {
    auto it = net.by_name.find(name);
    if (it == net.by_name.end())
      s.fail("the network has no node named '" + Stream::printable(name) + "'", at);
    return it->second;
  };
  s.marker("BRelation");
  for (uint64_t i = 0; i < net.nodes.size(); i++) {
    size_t at = s.offset();
    Node* n = node_named(s.wstring("a node name of the links"), at);
    uint64_t children = s.count("the number of inputs of '" + n->name + "'", 2);
    if (!n->inputs.empty()) s.fail("the inputs of '" + n->name + "' are given twice", at);
    for (uint64_t j = 0; j < children; j++) {
      size_t input_at = s.offset();
      n->inputs.push_back(node_named(s.wstring("an input name of '" + n->name + "'"), input_at));
    }
  }
  s.marker("ERelation");

  s.marker("BRootNodes");
  auto group = [&](std::vector<Node*>& into, const std::string& what) {
    uint64_t num = s.count("the number of " + what + " nodes", 2);
    for (uint64_t i = 0; i < num; i++) {
      size_t at = s.offset();
      into.push_back(node_named(s.wstring("a " + what + " node's name"), at));
    }
  };
  if (s.try_marker("BFeatureNodes")) {
    group(net.features, "feature");
    s.marker("EFeatureNodes");
  }
  if (s.try_marker("BLabelNodes")) group(net.labels, "label");
  s.marker("ELabelNodes");
  if (s.try_marker("BCriterionNodes") || s.try_marker("BCriteriaNodes")) {
    group(net.criteria, "criterion");
    if (!s.try_marker("ECriteriaNodes")) s.marker("ECriterionNodes");
  }
  if (s.try_marker("BNodesReqMultiSeqHandling")) {  // defunct: names only
    std::vector<Node*> ignored;
    group(ignored, "multi-sequence");
    s.marker("ENodesReqMultiSeqHandling");
  }
  if (s.try_marker("BEvalNodes")) {
    group(net.evaluation, "evaluation");
    s.marker("EEvalNodes");
  }
  if (s.try_marker("BOutputNodes")) {
    group(net.outputs, "output");
    s.marker("EOutputNodes");
  }
  if (s.try_marker("BPairNodes")) {
    size_t at = s.offset();
    if (s.u64("the number of pair nodes") != 0) s.fail("pair nodes are not supported", at);
    s.marker("EPairNodes");
  }
  s.marker("ERootNodes");
  s.marker("ECN");
  return net;
}

// --- Translation to the v2 schema -------------------------------------------------------------

DictionaryMap axis_value(int64_t static_index, const std::string& name, bool ordered) {
  return DictionaryMap{
      {"static_axis_idx", static_index}, {"name", name}, {"is_ordered_dynamic_axis", ordered}};
}
constexpr int64_t kDynamicAxisIndex = 2147483647;  // CNTK's sentinels for the special axes
constexpr int64_t kAllStaticAxesIndex = 2147483646;
constexpr int64_t kAllAxesIndex = 2147483643;
DictionaryMap static_axis(int64_t i) {
  return axis_value(i, "staticAxisIdx=" + std::to_string(i), false);
}
DictionaryMap default_dynamic_axis() {
  return axis_value(kDynamicAxisIndex, "defaultDynamicAxis", true);
}
DictionaryMap default_batch_axis() {
  return axis_value(kDynamicAxisIndex, "defaultBatchAxis", false);
}

// CNTK's AsAxis: an axis index of the v1 nodes (1-based, 0 and below special) as a v2 Axis.
DictionaryMap axis_of(int32_t internal) {
  switch (internal) {
    case 0:
      return axis_value(kAllStaticAxesIndex, "AllStaticAxes", false);
    case -1:
      return axis_value(kAllAxesIndex, "AllAxes", false);
    case -2:
      return axis_value(kDynamicAxisIndex, "__operandSequenceAxis", true);
    case -3:
      return default_batch_axis();
    default:
      return static_axis(internal - 1);
  }
}

// CNTK's DynamicAxesFromInternalDynamicAxisName; an empty name is the network's default layout,
// which is what "*" names.
DictionaryVector dynamic_axes(const std::string& name) {
  if (name.empty() || name[0] == '*') return {default_dynamic_axis(), default_batch_axis()};
  if (name.rfind("__noSequenceAxis", 0) == 0) return {default_batch_axis()};
  return {axis_value(kDynamicAxisIndex, name, true), default_batch_axis()};
}

DictionaryVector bools(const std::vector<bool>& v) {
  DictionaryVector out(v.size());
  for (size_t i = 0; i < v.size(); i++) out[i] = DictionaryValue(bool(v[i]));
  return out;
}

size_t elements(const std::vector<size_t>& dims) {
  size_t n = 1;
  for (size_t d : dims) n *= d;
  return n;
}

class Translator {
 public:
  Translator(const Network& net, const std::string& file) : net_(net), file_(file) {}

  Dictionary translate() {
    // CNTK's roots (DetermineSetOfAllRoots): the nodes no other node uses, with the criterion,
    // evaluation and output nodes, in the order of their names; a CompositeFunction of them all
    // is a Combine of their outputs (ConvertFromLegacyModel).
    std::set<const Node*> used;
    for (auto& n : net_.nodes)
      for (const Node* in : n->inputs) used.insert(in);
    std::map<std::string, const Node*> roots;
    for (auto& n : net_.nodes)
      if (!used.count(n.get())) roots.emplace(n->name, n.get());
    for (auto* group : {&net_.criteria, &net_.evaluation, &net_.outputs})
      for (const Node* n : *group) roots.emplace(n->name, n);
    DictionaryVector root_outputs;
    for (auto& [name, n] : roots) {
      if (n->is_leaf()) continue;
      root_outputs.push_back(resolve(n));
    }
    // The inputs of delay nodes left for later (see resolve) are resolved now, which may leave
    // more of them.
    while (!pending_.empty()) {
      const Node* n = pending_.back();
      pending_.pop_back();
      resolve(n);
    }
    if (root_outputs.empty())
      throw DataError("'" + file_ + "': the CNTK v1 model has no operation to evaluate");

    std::string combine = next_uid("Combine");
    functions_.push_back(primitive(44, combine, "", std::move(root_outputs), DictionaryMap{}));
    Dictionary d;
    d["version"] = uint64_t{3};
    d["type"] = "CompositeFunction";
    d["uid"] = next_uid("CompositeFunction");
    d["root"] = combine;
    d["inputs"] = DictionaryVector(inputs_.begin(), inputs_.end());
    d["primitive_functions"] = std::move(functions_);
    return d;
  }

 private:
  [[noreturn]] void fail(const Node* n, const std::string& what) const {
    throw DataError("'" + file_ + "': node '" + n->name + "' (" + n->op +
                    ") of the CNTK v1 model " + what);
  }

  // CNTK's generated uids: the prefix and a number, here one no uid of the file has taken.
  std::string next_uid(const std::string& prefix) {
    while (true) {
      std::string uid = prefix + std::to_string(++uid_counter_);
      if (taken_uids_.insert(uid).second) return uid;
    }
  }

  // The uid a node's output or variable has in the dictionary, given at its first mention.
  std::string uid_of(const Node* n, const std::string& prefix) {
    auto it = uids_.find(n);
    if (it != uids_.end()) return it->second;
    // A node that cntk.exe wrote for a v2 model (SaveAsLegacyModel) carries its v2 uid and name.
    std::string uid;
    size_t u = n->name.find("__v2libuid__"), m = n->name.find("__v2libname__");
    if (u != std::string::npos && m != std::string::npos && m > u)
      uid = n->name.substr(u + 12, m - u - 12);
    if (uid.empty() || !taken_uids_.insert(uid).second) uid = next_uid(prefix);
    return uids_[n] = uid;
  }
  static std::string name_of(const Node* n) {
    size_t u = n->name.find("__v2libuid__"), m = n->name.find("__v2libname__");
    if (u != std::string::npos && m != std::string::npos && m > u) return n->name.substr(m + 13);
    return n->name;
  }

  static uint64_t data_type(DataType t) { return t == DataType::Float64 ? 2 : 1; }

  // A Variable dictionary (Variable::Serialize): kind 0 input, 2 parameter, 3 constant,
  // 4 placeholder.
  DictionaryMap variable(uint64_t kind, const std::string& uid, const std::string& name,
                         const std::vector<size_t>& shape, DataType dtype, bool sparse,
                         bool needs_gradient, DictionaryVector dynamic_axes) {
    DictionaryMap v{{"version", uint64_t{1}},
                    {"type", "Variable"},
                    {"uid", uid},
                    {"kind", kind},
                    {"data_type", data_type(dtype)},
                    {"dynamic_axis", std::move(dynamic_axes)},
                    {"is_sparse", sparse},
                    {"needs_gradient", needs_gradient},
                    {"shape", NDShape(shape)}};
    if (!name.empty()) v["name"] = name;
    return v;
  }

  // A value as the v2 reader gives it (cntk_model.h): Loom's row-major order, whose shape is
  // CNTK's C++ shape reversed, so CNTK's column-major elements are copied as they are.
  static NDArrayView value_of(const Matrix& m, const std::vector<size_t>& shape) {
    NDArrayView v(m.dtype, loom_shape(shape));
    std::memcpy(v.raw_data(), m.data, m.rows * m.cols * size_of(m.dtype));
    return v;
  }
  static NDShape loom_shape(const std::vector<size_t>& cntk_shape) {
    return NDShape(std::vector<size_t>(cntk_shape.rbegin(), cntk_shape.rend()));
  }

  std::string leaf(const Node* n) {
    if (n->op == "InputValue" || n->op == "SparseInputValue") {
      std::string uid = uid_of(n, "Input");
      add_input(variable(0, uid, name_of(n), n->layout, n->dtype, n->sparse, n->lr_multiplier != 0,
                         dynamic_axes(n->dynamic_axis)));
      return uid;
    }
    std::vector<size_t> shape = n->layout;
    if (n->op == "Mean" || n->op == "InvStdDev") {
      if (!n->has_computed) fail(n, "was never computed (cntk.exe's precompute step did not run)");
      // cntk.exe took the layout from the input again; a column takes the input's shape.
      if (n->value->cols == 1) {
        shape = {n->value->rows};
        if (n->inputs.size() == 1 && n->inputs[0]->is_leaf() &&
            elements(n->inputs[0]->layout) == n->value->rows)
          shape = n->inputs[0]->layout;
      }
    }
    if (elements(shape) != n->value->rows * n->value->cols)
      fail(n, "has a value of " + std::to_string(n->value->rows) + " x " +
                  std::to_string(n->value->cols) + " elements for its shape " +
                  NDShape(shape).to_string());
    // cntk.exe's tensor shapes treat trailing 1 dimensions as absent (a bias column [N, 1] is
    // a vector [N] to every elementwise operation and criterion); v2 ops, Loom's among them,
    // do not, so they are dropped, except for the operands of products and convolutions,
    // where the rank tells the axes apart.
    if (!keeps_rank(n))
      while (shape.size() > 1 && shape.back() == 1) shape.pop_back();
    bool constant = n->op != "LearnableParameter" || n->lr_multiplier == 0;
    std::string uid = uid_of(n, constant ? "Constant" : "Parameter");
    DictionaryMap v = variable(constant ? 3 : 2, uid, name_of(n), shape, n->dtype, false, !constant,
                               DictionaryVector{});
    v["value"] = value_of(*n->value, shape);
    add_input(std::move(v));
    return uid;
  }

  bool keeps_rank(const Node* leaf) {
    if (!rank_keepers_) {
      rank_keepers_.emplace();
      for (auto& n : net_.nodes)
        if (n->op == "Times" || n->op == "TransposeTimes" || n->op == "Convolution")
          rank_keepers_->insert(n->inputs.begin(), n->inputs.end());
    }
    return rank_keepers_->count(leaf) != 0;
  }

  // A scalar constant (PastValue's initial state; the run count of old batch normalizations).
  std::string scalar_constant(double x, DataType dtype, const std::vector<size_t>& shape) {
    std::string uid = next_uid("Constant");
    NDArrayView v(dtype, loom_shape(shape));
    v.fill(x);
    DictionaryMap c = variable(3, uid, "", shape, dtype, false, false, DictionaryVector{});
    c["value"] = v;
    add_input(std::move(c));
    return uid;
  }

  DictionaryMap primitive(uint64_t op, const std::string& uid, const std::string& name,
                          DictionaryVector inputs, DictionaryMap attributes) {
    DictionaryMap f{{"version", uint64_t{24}},
                    {"type", "PrimitiveFunction"},
                    {"op", op},
                    {"uid", uid},
                    {"inputs", std::move(inputs)},
                    {"attributes", std::move(attributes)}};
    if (!name.empty()) f["name"] = name;
    return f;
  }

  // The uid that stands for n's value: a variable's, or the output of n's function. Functions
  // are listed after their inputs. A recurrent loop passes through a delay node, whose input is
  // therefore not followed at once: where it is not known yet, the delay node reads a
  // placeholder of its shape with the uid that input's output will have (CNTK's v2 files break
  // cycles the same way; Loom closes a loop at a delay node's input), and the input is
  // resolved later.
  //
  // Depth first with a stack of its own: a file may hold a chain of many thousand nodes.
  std::string resolve(const Node* root) {
    struct Frame {
      const Node* n;
      size_t next = 0;
      std::vector<std::string> in = {};
    };
    std::vector<Frame> stack;
    // The uid of n's value when it is known without resolving n's inputs; else n is entered.
    auto enter = [&](const Node* n) -> std::optional<std::string> {
      auto done = resolved_.find(n);
      if (done != resolved_.end()) return done->second;
      if (n->is_leaf()) return resolved_[n] = leaf(n);
      if (!in_progress_.insert(n).second)
        fail(n, "is part of a loop without a PastValue or FutureValue node");
      stack.push_back({n});
      return std::nullopt;
    };
    if (auto known = enter(root)) return *known;
    while (true) {
      Frame& f = stack.back();
      if (f.next < f.n->inputs.size()) {
        const Node* input = f.n->inputs[f.next++];
        if (f.n->is_delay() && !resolved_.count(input) && !input->is_leaf())
          f.in.push_back(loop_placeholder(input, f.n));
        else if (auto known = enter(input))  // f is still the top: nothing was entered
          f.in.push_back(*known);
        continue;
      }
      const Node* n = f.n;
      std::vector<std::string> in = std::move(f.in);
      stack.pop_back();
      in_progress_.erase(n);
      std::string out = resolved_[n] = function(n, std::move(in));
      if (stack.empty()) return out;
      stack.back().in.push_back(out);
    }
  }

  // The placeholder a delay node reads for its input where that is not resolved yet.
  std::string loop_placeholder(const Node* input, const Node* delay) {
    std::string uid = uid_of(input, op_prefix(input)) + "_Output_0";
    if (placeholders_.insert(uid).second) {
      add_input(variable(4, uid, "", delay->layout, delay->dtype, false, false,
                         {default_dynamic_axis(), default_batch_axis()}));
      pending_.push_back(input);
    }
    return uid;
  }

  void add_input(DictionaryMap v) {
    input_index_[v.at("uid").get<std::string>()] = inputs_.size();
    inputs_.push_back(std::move(v));
  }

  // The prefix of the uid CNTK generates for the function of n (its v2 op's name).
  static std::string op_prefix(const Node* n) {
    static const std::map<std::string, std::string> renamed = {
        {"RectifiedLinear", "ReLU"},
        {"DiagTimes", "ElementTimes"},
        {"SquareError", "SquaredError"},
        {"If", "Select"},
        {"Cosine", "Cos"},
        {"RowStack", "Splice"},
        {"NDCG1Eval", "NDCG"},
        {"SumElements", "SumAll"},
        {"TransposeDimensions", "TransposeAxes"},
        {"SumColumnElements", "ReduceElements"},
        {"MaxPooling", "Pooling"},
        {"AveragePooling", "Pooling"},
        {"PerDimMeanVarNormalization", "ElementTimes"},
        {"MaxUnpooling", "Unpooling"},
        {"RowRepeat", "Splice"},
        {"LegacyReshape", "Reshape"}};
    auto it = renamed.find(n->op);
    return it == renamed.end() ? n->op : it->second;
  }

  void check_inputs(const Node* n, size_t low, size_t high) {
    if (n->inputs.size() < low || n->inputs.size() > high)
      fail(n, "has " + std::to_string(n->inputs.size()) + " inputs; its type takes " +
                  (low == high ? std::to_string(low)
                               : std::to_string(low) + " to " + std::to_string(high)));
  }

  // n's primitive function (BackCompat.cpp's ResolveFunction); the uid of its output.
  std::string function(const Node* n, std::vector<std::string> in) {
    const std::string& op = n->op;
    DictionaryMap attributes;
    int v2_op = -1;
    auto plain = plain_ops().find(op);
    if (plain != plain_ops().end()) {
      v2_op = plain->second;
      static const std::map<int, std::pair<size_t, size_t>> arity = {
          {18, {1, 1}}, {19, {2, 2}}, {20, {2, 2}}, {21, {2, 2}}, {34, {2, 2}},
          {35, {2, 2}}, {36, {2, 3}}, {41, {3, 3}}, {42, {3, 3}}, {48, {2, 3}},
          {50, {2, 2}}, {52, {2, 2}}, {53, {2, 2}}, {59, {3, 3}}, {60, {3, 3}},
          {29, {2, 2}}, {30, {3, 3}}, {28, {2, 2}}, {67, {4, 4}}};
      auto a = arity.find(v2_op);
      if (a != arity.end())
        check_inputs(n, a->second.first, a->second.second);
      else if (v2_op >= 22 && v2_op <= 27)
        check_inputs(n, 2, 2);
      else
        check_inputs(n, 1, 1);
    } else if (op == "Times" || op == "TransposeTimes") {
      check_inputs(n, 2, 2);
      // CNTK's legacy configs used * for a scalar times a tensor: elementwise.
      bool scalar = false;
      for (const Node* input : n->inputs) scalar |= input->is_leaf() && input->layout.empty();
      if (op == "Times" && scalar) {
        v2_op = 21;
      } else {
        v2_op = op == "Times" ? 31 : 32;
        attributes["outputRank"] = n->output_rank;
        if (op == "Times") attributes["inferInputRankToMap"] = int64_t{n->infer_input_rank};
      }
    } else if (n->is_delay()) {
      check_inputs(n, 1, 2);
      if (n->time_step < 1) fail(n, "has the time step " + std::to_string(n->time_step));
      if (in.size() == 1) in.push_back(scalar_constant(n->initial_value, n->dtype, {}));
      v2_op = op == "PastValue" ? 37 : 38;
      attributes["offset"] = uint64_t(n->time_step);
    } else if (op == "Slice") {
      check_inputs(n, 1, 1);
      v2_op = 14;
      // CNTK 2's loader dropped the strides (version 27 on); they are kept, with CNTK 2's keys.
      bool strided = false;
      for (int32_t s : n->strides) strided |= s != 1;
      if (n->axes.size() == 1) {
        attributes["axis"] = axis_of(n->axes[0]);
        attributes["beginIndex"] = int64_t{n->begin[0]};
        attributes["endIndex"] = int64_t{n->end[0]};
        if (strided) attributes["sliceStrides"] = int64_t{n->strides[0]};
      } else {
        DictionaryVector axes, begins, ends, strides;
        for (size_t i = 0; i < n->axes.size(); i++) {
          axes.push_back(axis_of(n->axes[i]));
          begins.push_back(int64_t{n->begin[i]});
          ends.push_back(int64_t{n->end[i]});
          strides.push_back(int64_t{n->strides[i]});
        }
        attributes["axisVec"] = std::move(axes);
        attributes["beginIndexVec"] = std::move(begins);
        attributes["endIndexVec"] = std::move(ends);
        if (strided) attributes["sliceStridesVec"] = std::move(strides);
      }
    } else if (op == "RowStack") {
      if (n->inputs.empty()) fail(n, "has no inputs");
      v2_op = 43;
      attributes["axis"] = axis_of(n->splice_dim);
    } else if (op == "ReduceElements") {
      check_inputs(n, 1, 1);
      v2_op = 39;
      DictionaryVector axes;
      for (int32_t a : n->axes) axes.push_back(axis_of(a));
      attributes["axisVec"] = std::move(axes);
      attributes["reductionOpName"] = n->reduction_op;
      attributes["reductionKeepDimensions"] = n->keep_dimensions;
    } else if (op == "SumColumnElements") {
      check_inputs(n, 1, 1);
      v2_op = 39;
      attributes["axis"] = static_axis(0);
      attributes["reductionOpName"] = "Sum";
    } else if (op == "Reshape") {
      check_inputs(n, 1, 1);
      v2_op = 16;
      // A 0 in the new shape is inferred; the replaced axes [begin, end) are 1-based, 0 meaning
      // from the first or to past the last.
      std::vector<size_t> shape = n->layout;
      for (size_t& d : shape)
        if (d == 0) d = NDShape::kInferred;
      attributes["newShape"] = NDShape(shape);
      if (n->reshape_begin > 0) attributes["beginAxis"] = static_axis(n->reshape_begin - 1);
      if (n->reshape_end > 0) attributes["endAxis"] = static_axis(n->reshape_end - 1);
    } else if (op == "TransposeDimensions") {
      check_inputs(n, 1, 1);
      v2_op = 12;
      if (n->axis1 == 0 && n->axis2 == 0) {
        // A permutation (version 25 on): output axis i is input axis permutation[i], as CNTK 2
        // saves TransposeAxes' axisVec (CNTK 2's loader kept only axis1 and axis2).
        DictionaryVector axes;
        for (uint64_t p : n->permutation) {
          if (p >= n->permutation.size())
            fail(n, "has the permutation entry " + std::to_string(p) + " of " +
                        std::to_string(n->permutation.size()) + " axes");
          axes.push_back(static_axis(int64_t(p)));
        }
        attributes["axisVec"] = std::move(axes);
      } else {
        attributes["axis1"] = axis_of(n->axis1);
        attributes["axis2"] = axis_of(n->axis2);
      }
    } else if (op == "Dropout") {
      check_inputs(n, 1, 1);
      v2_op = 15;
      attributes["dropoutRate"] = 0.0;
      attributes["rngSeed"] = n->rng_seed;
      attributes["rngOffset"] = n->rng_offset;
    } else if (op == "Convolution") {
      check_inputs(n, 2, 2);
      v2_op = 33;
      convolution_kernel(n, in[0]);
      attributes["strides"] = NDShape(n->stride);
      attributes["sharing"] = bools(n->sharing);
      attributes["autoPadding"] = bools(n->auto_pad);
      attributes["lowerPad"] = NDShape(n->lower_pad);
      attributes["upperPad"] = NDShape(n->upper_pad);
      attributes["transpose"] = n->transpose;
      attributes["outputShape"] =
          NDShape(n->output_shape.empty() ? std::vector<size_t>{0} : n->output_shape);
      attributes["maxTempMemSizeInSamples"] = n->max_temp_mem;
      if (!n->dilation.empty()) attributes["dilation"] = NDShape(n->dilation);
    } else if (op == "Pooling" || op == "MaxPooling" || op == "AveragePooling") {
      check_inputs(n, 1, 1);
      if (n->pool_kind != 1 && n->pool_kind != 2)
        fail(n, "has the pooling kind " + std::to_string(n->pool_kind));
      if (op != "Pooling" && n->image_layout != 1)
        fail(n,
             "pools images in the HWC layout, which v2's pooling (channels first) does not have; "
             "CNTK 2 did not load it either");
      v2_op = 17;
      attributes["poolingType"] = uint64_t(n->pool_kind == 1 ? 0 : 1);  // v2: Max 0, Average 1
      attributes["poolingWindowShape"] = NDShape(n->kernel);
      attributes["strides"] = NDShape(n->stride);
      attributes["autoPadding"] = bools(n->auto_pad);
      attributes["lowerPad"] = NDShape(n->lower_pad);
      attributes["upperPad"] = NDShape(n->upper_pad);
      if (op == "Pooling") {
        attributes["ceilOutDim"] = n->ceil_out_dim;
        attributes["includePad"] = n->include_pad;
      }
    } else if (op == "BatchNormalization") {
      check_inputs(n, 5, 6);
      v2_op = 40;
      if (n->inv_std_dev) convert_inverse_std_dev(n, in[4]);
      // Files before version 19 share no sample count as an input: CNTK 2 added a constant
      // count of 0. Loom's batch normalization takes a count of 0 for statistics never
      // trained, so the count is the one the node saved (what cntk.exe itself went by).
      if (in.size() == 5) in.push_back(scalar_constant(double(n->run_count), n->dtype, {1}));
      attributes["spatial"] = n->spatial;
      attributes["normalizationTimeConstant"] = n->norm_time_constant;
      attributes["blendTimeConstant"] = n->blend_time_constant;
      attributes["epsilon"] = n->epsilon;
      attributes["useCuDNNEngine"] = !n->use_cntk_engine;
      attributes["disableRegularization"] = false;
    } else if (op == "PerDimMeanVarNormalization") {
      // CNTK 2 built a block (x - mean) * invStdDev; Loom lists its two functions.
      check_inputs(n, 3, 3);
      std::string minus = next_uid("Minus");
      functions_.push_back(primitive(20, minus, "", DictionaryVector{in[0], in[1]}, {}));
      std::string uid = uid_of(n, "ElementTimes");
      functions_.push_back(
          primitive(21, uid, name_of(n), DictionaryVector{minus + "_Output_0", in[2]}, {}));
      return uid + "_Output_0";
    } else if (op == "Where") {
      check_inputs(n, 1, 1);
      v2_op = 13;
      attributes["newDynamicAxes"] = dynamic_axes(n->dynamic_axis);
    } else if (op == "ROIPooling") {
      check_inputs(n, 2, 2);
      if (n->pool_kind != 1 && n->pool_kind != 2)
        fail(n, "has the pooling kind " + std::to_string(n->pool_kind));
      v2_op = 47;
      attributes["poolingType"] = uint64_t(n->pool_kind == 1 ? 0 : 1);
      attributes["roiOutputShape"] = NDShape(n->layout);
      attributes["spatialScale"] = n->spatial_scale;
    } else if (op == "MaxUnpooling") {
      check_inputs(n, 2, 2);
      v2_op = 58;
      attributes["poolingType"] = uint64_t{0};
      attributes["unpoolingWindowShape"] = NDShape(n->kernel);
      attributes["strides"] = NDShape(n->stride);
      attributes["autoPadding"] = bools(n->auto_pad);
      attributes["lowerPad"] = NDShape(n->lower_pad);
      attributes["upperPad"] = NDShape(n->upper_pad);
    } else if (op == "Crop") {
      check_inputs(n, 2, 4);
      if (in.size() == 3) fail(n, "has 3 inputs; its type takes 2 or 4");
      v2_op = 84;
      // cntk.exe saved the offsets once it had computed them (an automatic crop's too) and
      // crops at the saved ones; never computed, they are the largest double and the crop is
      // automatic (CNTK 2's loader dropped them: every crop was automatic).
      constexpr double unset = std::numeric_limits<double>::max();
      if (n->offset_x != unset || n->offset_y != unset) {
        for (double o : {n->offset_x, n->offset_y})
          if (!(o >= 0 && o < 1e15)) fail(n, "has the crop offset " + std::to_string(o));
        // cntk.exe narrows at the offsets' whole parts.
        attributes["offset"] = DictionaryVector{uint64_t(n->offset_x), uint64_t(n->offset_y)};
        in.resize(2);
      }
    } else if (op == "RowRepeat") {
      // The sample repeated: numRepeats copies spliced along its last (C++) axis.
      check_inputs(n, 1, 1);
      if (n->repeats < 1 || n->repeats > (uint64_t(1) << 16))
        fail(n, "has the implausible number of repeats " + std::to_string(n->repeats));
      v2_op = 43;
      attributes["axis"] = static_axis(-1);
      in.assign(n->repeats, in[0]);
    } else if (op == "LegacyReshape") {
      check_inputs(n, 1, 1);
      v2_op = 16;
      attributes["newShape"] = NDShape(legacy_reshape_layout(n));
    } else if (op == "EditDistanceError") {
      check_inputs(n, 2, 2);
      v2_op = 61;
      attributes["SubstitutionPenalty"] = n->substitution_penalty;
      attributes["DeletionPenalty"] = n->deletion_penalty;
      attributes["InsertionPenalty"] = n->insertion_penalty;
      attributes["SquashInputs"] = n->squash_inputs;
      attributes["TokensToIgnore"] =
          DictionaryVector(n->tokens_to_ignore.begin(), n->tokens_to_ignore.end());
    } else if (op == "ForwardBackward") {
      check_inputs(n, 2, 2);
      v2_op = 66;
      attributes["DelayConstraint"] = int64_t{n->delay_constraint};
      attributes["BlankTokenId"] = n->blank_token;
    } else if (op == "RandomSample" || op == "RandomSampleInclusionFrequency") {
      check_inputs(n, 1, 1);
      v2_op = op == "RandomSample" ? 45 : 46;
      attributes["numSamples"] = n->num_samples;
      attributes["allowDuplicates"] = n->allow_duplicates;
      attributes["rngSeed"] = n->rng_seed;
      attributes["rngOffset"] = n->rng_offset;
    }
    if (op == "Cast") attributes["newDataType"] = int64_t(data_type(n->dtype));  // its output's
    if (v2_op < 0) fail(n, "has a type Loom does not translate");

    // v2's order of inputs where it differs from the node's (ReorderAsPrimitiveFunctionInputs).
    switch (v2_op) {
      case 29:  // GatherPacked
      case 35:  // CrossEntropyWithSoftmax: (prediction, labels) for the node's (labels, ...)
      case 36:  // ClassificationError
      case 48:  // Logistic
      case 59:  // LambdaRank
      case 60:  // NDCG
        std::swap(in[0], in[1]);
        break;
      case 30:  // ScatterPacked
        std::swap(in[0], in[2]);
        break;
      case 41:  // Clip: (x, min, max) for the node's (min, max, x)
        in = {in[2], in[0], in[1]};
        break;
    }
    std::string uid = uid_of(n, op_prefix(n));
    DictionaryVector inputs(in.begin(), in.end());
    functions_.push_back(
        primitive(uint64_t(v2_op), uid, name_of(n), std::move(inputs), std::move(attributes)));
    return uid + "_Output_0";
  }

  // LegacyReshape's sample layout, as its InferTargetSampleLayout completes it: a legacy image
  // layout [C, W, H] may leave one of W and H, or C, 0, inferred from the number of rows (none
  // given: [1, rows, 1]); any other layout must hold the rows.
  std::vector<size_t> legacy_reshape_layout(const Node* n) const {
    std::vector<size_t> d = n->layout;
    const uint64_t rows = n->target_rows;
    if (d.size() == 3) {
      const int known = (d[0] > 0) + (d[1] > 0) + (d[2] > 0);
      if (known == 0) {
        d = {1, size_t(rows), 1};
      } else if (known == 1) {
        fail(n, "gives one image dimension; cntk.exe needed two");
      } else if (known == 2) {
        size_t& missing = d[0] == 0 ? d[0] : d[1] == 0 ? d[1] : d[2];
        missing = 1;
        if (rows % elements(d) != 0)
          fail(n, "has " + std::to_string(rows) + " rows, not a multiple of its image dimensions");
        missing = size_t(rows / elements(d));
      }
    }
    if (elements(d) != rows)
      fail(n,
           "has the layout " + NDShape(d).to_string() + " for " + std::to_string(rows) + " rows");
    return d;
  }

  DictionaryMap* input_variable(const std::string& uid) {
    auto it = input_index_.find(uid);
    return it == input_index_.end() ? nullptr : &inputs_[it->second];
  }

  // Some v1 files store a convolution's kernel as a matrix [maps, rest]; CNTK 2 gives the same
  // elements the shape kernel shape + [maps] (BackCompat.cpp).
  void convolution_kernel(const Node* n, const std::string& kernel_uid) {
    const Node* k = n->inputs[0];
    if (!n->convolution_2d && !(k->is_leaf() && k->layout.size() == 2)) return;
    DictionaryMap* v = k->is_leaf() && k->value ? input_variable(kernel_uid) : nullptr;
    if (!v) fail(n, "is a 2D convolution whose kernel is not a parameter");
    size_t maps = k->layout[0], total = elements(k->layout);
    std::vector<size_t> shape = n->kernel;
    // cntk.exe completed a 2D kernel's channel axis from the input when it validated the
    // network: it is what the elements leave over.
    size_t per_map = elements(shape);
    if (maps == 0 || per_map == 0) fail(n, "has an empty kernel");
    if (per_map * maps != total && total % (per_map * maps) == 0) {
      size_t channels = total / (per_map * maps);
      if (!shape.empty() && shape.back() == 1)
        shape.back() = channels;
      else
        shape.push_back(channels);
    }
    shape.push_back(maps);
    if (elements(shape) != total)
      fail(n, "has a kernel of " + std::to_string(total) + " elements for the kernel shape " +
                  NDShape(n->kernel).to_string());
    (*v)["shape"] = NDShape(shape);
    (*v)["value"] = (*v)["value"].get<NDArrayView>().reshaped(loom_shape(shape));
  }

  // Before version 13 a batch normalization's fifth input held 1/stddev: CNTK converted it to
  // the variance 1/isd^2 + epsilon when it validated the network.
  void convert_inverse_std_dev(const Node* n, const std::string& uid) {
    DictionaryMap* v = input_variable(uid);
    if (!v || !v->count("value")) fail(n, "takes its running statistics from another operation");
    if (!converted_.insert(uid).second) return;
    NDArrayView value = v->at("value").get<NDArrayView>().deep_clone();
    dispatch(value.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* x = value.template data<T>();
      for (size_t i = 0; i < value.size(); i++) x[i] = T(1) / (x[i] * x[i]) + T(n->epsilon);
    });
    (*v)["value"] = value;
  }

  const Network& net_;
  std::string file_;
  std::vector<DictionaryMap> inputs_;
  DictionaryVector functions_;
  std::map<const Node*, std::string> uids_, resolved_;
  std::set<const Node*> in_progress_;
  std::set<std::string> placeholders_, converted_;
  std::vector<const Node*> pending_;
  std::set<std::string> taken_uids_;
  std::map<std::string, size_t> input_index_;          // into inputs_, by uid
  std::optional<std::set<const Node*>> rank_keepers_;  // operands of products, convolutions
  uint64_t uid_counter_ = 0;
};

}  // namespace

Dictionary cntk_v1_dictionary(std::span<const uint8_t> bytes, const std::string& name) {
  Stream s(bytes, name);
  Network net = read_network(s);
  if (s.left() != 0) s.fail(std::to_string(s.left()) + " bytes after the end marker \"ECN\"");
  return Translator(net, name).translate();
}

}  // namespace loom
