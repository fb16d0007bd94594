#include "loom/serialize/model_file.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "loom/graph/graph_impl.h"
#include "loom/graph/user_function.h"
#include "loom/ops/registry.h"
#include "loom/serialize/cntk_model.h"
#include "loom/serialize/container.h"
#include "loom/serialize/dictionary_codec.h"

namespace loom {

namespace {

// Shapes from a file: each known dimension and the element count stay below this, so nothing
// downstream multiplies its way to an overflow.
constexpr uint64_t kMaxElements = uint64_t(1) << 40;

const char* kind_name(VariableKind k) {
  switch (k) {
    case VariableKind::Input:
      return "Input";
    case VariableKind::Output:
      return "Output";
    case VariableKind::Parameter:
      return "Parameter";
    case VariableKind::Constant:
      return "Constant";
    case VariableKind::Placeholder:
      return "Placeholder";
  }
  return "?";
}

// ---- writing ----

// A graph as its file lists it: the leaves, then the primitive functions in topological order,
// and the blocks their outputs belong to, numbered in the order they are met. Listing it checks
// that no two of its variables, functions and blocks share a uid: a file could not tell them
// apart.
struct GraphListing {
  Function f;
  std::vector<Variable> roots, leaves;
  std::vector<std::shared_ptr<FunctionImpl>> order;
  std::vector<const BlockInfo*> blocks;
  // Each block's outputs that are in the graph (one nothing keeps is gone).
  std::vector<std::vector<Variable>> block_outputs;
  std::unordered_map<const BlockInfo*, int64_t> block_numbers;
};

GraphListing list_graph(const Function& f) {
  GraphListing g;
  g.f = f;
  g.roots = f.outputs();
  g.order = topological_order(g.roots);
  std::unordered_set<const VariableImpl*> seen;
  auto visit = [&](const Variable& v) {
    if (!v.is_output() && seen.insert(v.impl().get()).second) g.leaves.push_back(v);
  };
  for (const auto& fn : g.order)
    for (const Variable& in : fn->inputs) visit(in);
  for (const Variable& r : g.roots) visit(r);

  // A loaded model keeps its uids, so two graphs can share one; a file must not.
  std::unordered_map<std::string, const void*> uids;
  uids.reserve(g.leaves.size() + 2 * g.order.size());
  auto claim = [&](const std::string& uid, const void* owner, const char* what) {
    auto [it, fresh] = uids.emplace(uid, owner);
    LOOM_CHECK(fresh || it->second == owner, StateError, "cannot save ", f.to_string(), ": two ",
               what, "s share the uid '", uid,
               "' (a graph combining two loaded copies of one model?); clone one of them first");
  };
  for (const Variable& v : g.leaves) claim(v.uid(), v.impl().get(), "variable");
  for (const auto& fn : g.order) {
    claim(fn->uid, fn.get(), "function");
    for (const auto& o : fn->outputs) {
      claim(o->uid, o.get(), "variable");
      for (const auto& b : o->blocks)
        if (g.block_numbers.emplace(b.get(), int64_t(g.blocks.size())).second)
          g.blocks.push_back(b.get());
    }
  }
  for (const BlockInfo* b : g.blocks) {
    claim(b->uid, b, "function");
    for (const Variable& a : b->arguments)
      LOOM_CHECK(uids.contains(a.uid()), StateError, "cannot save ", f.to_string(), ": block ",
                 b->uid, " reads ", a.describe(), ", which is not in the graph");
    std::vector<Variable>& outputs = g.block_outputs.emplace_back();
    for (const auto& o : b->outputs)
      if (auto v = o.lock(); v) {
        auto it = uids.find(v->uid);
        if (it != uids.end() && it->second == v.get()) outputs.emplace_back(v);
      }
  }
  return g;
}

// The graph's dictionary (model_to_dictionary's) is written field by field, without building
// it: each map's keys in increasing order, as a std::map holds them (the decoder checks).

void write_uids(Encoder& e, const std::vector<Variable>& vars) {
  e.begin_vector(vars.size());
  for (const Variable& x : vars) e.put_string(x.uid());
}

// A variable: the fields every variable has; a leaf's value, layer (layers: the layer tags met
// so far, numbered in order: a layer's parameters share one), and a parameter's initializer
// and generator; an output's blocks, by number, innermost first.
void write_variable(Encoder& e, const VariableImpl& v, const GraphListing& g,
                    std::vector<const LayerTag*>& layers) {
  const bool leaf = v.kind != VariableKind::Output;
  const bool parameter = v.kind == VariableKind::Parameter;
  const bool has_blocks = !leaf && !v.blocks.empty();
  const bool has_layer = leaf && v.layer;
  const bool has_value = leaf && v.value;
  e.begin_map(9 + has_blocks + 2 * parameter + has_layer + has_value);
  if (has_blocks) {
    e.key("blocks");
    e.begin_vector(v.blocks.size());
    for (const auto& b : v.blocks) e.put_int64(g.block_numbers.at(b.get()));
  }
  e.key("dtype");
  e.put_int64(int64_t(v.dtype));
  e.key("dynamic_axes");
  e.begin_vector(v.dynamic_axes.size());
  for (const Axis& a : v.dynamic_axes) e.put_string(a.name());
  if (parameter) {
    e.key("generator");
    e.put(v.init_generator.checkpoint().map());
    e.key("init");
    e.begin_map(4 + v.init.seed.has_value());
    e.key("filter_rank");
    e.put_int64(v.init.filter_rank);
    e.key("kind");
    e.put_int64(int64_t(v.init.kind));
    e.key("output_rank");
    e.put_int64(v.init.output_rank);
    e.key("scale");
    e.put_double(v.init.scale);
    if (v.init.seed) {
      e.key("seed");
      e.put_uint64(*v.init.seed);
    }
  }
  e.key("kind");
  e.put_string(kind_name(v.kind));
  if (has_layer) {
    auto it = std::find(layers.begin(), layers.end(), v.layer.get());
    if (it == layers.end()) it = layers.insert(it, v.layer.get());
    e.key("layer");
    e.begin_map(3);
    e.key("block_name");
    e.put_string(v.layer->block_name);
    e.key("index");
    e.put_int64(it - layers.begin());
    e.key("name");
    e.put_string(v.layer->name);
  }
  e.key("name");
  e.put_string(v.name);
  e.key("needs_gradient");
  e.put_bool(v.needs_gradient);
  e.key("shape");
  e.put_shape(v.shape);
  e.key("shape_known");
  e.put_bool(v.shape_known);
  e.key("sparse");
  e.put_bool(v.is_sparse);
  e.key("uid");
  e.put_string(v.uid);
  if (has_value) {
    e.key("value");
    e.put_tensor(*v.value);
  }
}

void write_function(Encoder& e, const FunctionImpl& fn, const GraphListing& g,
                    std::vector<const LayerTag*>& layers) {
  const bool custom = fn.custom_attributes.size() != 0;
  e.begin_map(6 + custom + fn.random.has_value());
  e.key("attributes");
  e.put(user_function_of(fn) ? user_function_attributes(fn).map() : fn.attributes.map());
  if (custom) {
    e.key("custom_attributes");
    e.put(fn.custom_attributes.map());
  }
  e.key("inputs");
  write_uids(e, fn.inputs);
  e.key("name");
  e.put_string(fn.name);
  e.key("op");
  e.put_string(fn.op->name());
  e.key("outputs");
  e.begin_vector(fn.outputs.size());
  for (const auto& o : fn.outputs) write_variable(e, *o, g, layers);
  if (fn.random) {
    e.key("random");
    e.put(fn.random->checkpoint().map());
  }
  e.key("uid");
  e.put_string(fn.uid);
}

// The graph's dictionary: its version, leaves, functions, blocks and root.
void write_graph(const GraphListing& g, ByteSink& out) {
  Encoder e(out);
  const bool has_blocks = !g.blocks.empty();
  e.begin_map(4 + has_blocks);
  if (has_blocks) {
    e.key("blocks");
    e.begin_vector(g.blocks.size());
    for (size_t i = 0; i < g.blocks.size(); ++i) {
      const BlockInfo& b = *g.blocks[i];
      e.begin_map(5);
      e.key("arguments");
      write_uids(e, b.arguments);
      e.key("name");
      e.put_string(b.name);
      e.key("op_name");
      e.put_string(b.op_name);
      e.key("outputs");
      write_uids(e, g.block_outputs[i]);
      e.key("uid");
      e.put_string(b.uid);
    }
  }
  std::vector<const LayerTag*> layers;
  e.key("functions");
  e.begin_vector(g.order.size());
  for (const auto& fn : g.order) write_function(e, *fn, g, layers);
  e.key("graph_version");
  e.put_int64(has_blocks ? kGraphVersion : 1);
  const FunctionImpl& f = *g.f.impl();
  const bool block = g.f.is_block();
  const bool custom = g.f.is_composite() && f.custom_attributes.size() != 0;
  e.key("root");
  e.begin_map(5 + block + custom);
  if (block) {
    e.key("block");
    e.put_bool(true);
  }
  e.key("block_name");
  e.put_string(f.block_name);
  e.key("composite");
  e.put_bool(g.f.is_composite());
  if (custom) {
    e.key("custom_attributes");
    e.put(f.custom_attributes.map());
  }
  e.key("name");
  e.put_string(g.f.name());
  e.key("outputs");
  write_uids(e, g.roots);
  e.key("uid");
  e.put_string(g.f.uid());
  e.key("variables");
  e.begin_vector(g.leaves.size());
  for (const Variable& v : g.leaves) write_variable(e, *v.impl(), g, layers);
  e.flush();
}

// ---- reading ----

// A view of one dictionary of the file with its path ("functions[3].outputs[0]"), so every
// complaint says where it is. The path is spelled out only for a complaint: an entry keeps its
// parent, which must outlive it (detached() keeps just the path, for a later complaint).
class Fields {
 public:
  Fields(const DictionaryMap& m, std::string path, const std::string& where)
      : m_(m), path_(std::move(path)), where_(where) {}
  // Entry key of parent, or item index of its vector at key ("key[index]").
  Fields(const DictionaryMap& m, const Fields& parent, const char* key,
         std::optional<size_t> index = std::nullopt)
      : m_(m), parent_(&parent), key_(key), index_(index), where_(parent.where_) {}

  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw DataError(detail::concat(where_, ": ", path(), ": ", parts...));
  }

  bool has(const std::string& key) const { return m_.count(key) != 0; }

  template <typename T>
  const T& get(const std::string& key) const {
    auto it = m_.find(key);
    if (it == m_.end()) fail("missing '", key, "'");
    if (!it->second.is<T>()) {
      DictionaryValue probe{T{}};
      fail("'", key, "' holds ", it->second.type_name(), " where ", probe.type_name(),
           " is expected");
    }
    return it->second.get<T>();
  }

  Fields child(const char* key) const { return Fields(get<DictionaryMap>(key), *this, key); }
  std::string path() const {
    if (!parent_) return path_;
    std::string p = detail::concat(parent_->path(), ".", key_);
    return index_ ? detail::concat(p, "[", *index_, "]") : p;
  }
  // For complaints only, after the dictionary is gone: the path without the entries.
  Fields detached() const {
    static const DictionaryMap kNoEntries;
    return Fields(kNoEntries, path(), where_);
  }
  const std::string& where() const { return where_; }

 private:
  const DictionaryMap& m_;
  std::string path_;  // when parent_ is null
  const Fields* parent_ = nullptr;
  const char* key_ = nullptr;
  std::optional<size_t> index_;
  const std::string& where_;
};

template <>
const NDArrayView& Fields::get<NDArrayView>(const std::string& key) const {
  auto it = m_.find(key);
  if (it == m_.end()) fail("missing '", key, "'");
  if (!it->second.is<NDArrayView>())
    fail("'", key, "' holds ", it->second.type_name(), " where NDArrayView is expected");
  return it->second.get<NDArrayView>();
}

// Item i of a vector at key name of parent holds a value of another type than a dictionary.
[[noreturn]] void not_a_dictionary(const Fields& parent, const char* name, size_t i,
                                   const DictionaryValue& value) {
  throw DataError(detail::concat(parent.where(), ": ", parent.path(), ".", name, "[", i,
                                 "]: holds ", value.type_name(),
                                 " where a dictionary is expected"));
}

// Item i of the vector v at key name of parent.
Fields item(const Fields& parent, const DictionaryVector& v, size_t i, const char* name) {
  if (!v[i].is<DictionaryMap>()) not_a_dictionary(parent, name, i, v[i]);
  return Fields(v[i].get<DictionaryMap>(), parent, name, i);
}

// Item i of a vector the file holds undecoded (the graph's variables and functions), decoded:
// one entry's Dictionary in memory at a time. With an owner, tensors are views of the bytes.
Dictionary decode_item(const Fields& parent, const EncodedValue& v, size_t i, const char* name,
                       const std::shared_ptr<const void>& owner) {
  if (v.bytes[0] != uint8_t(ValueTag::Map))
    not_a_dictionary(parent, name, i, decode_value(v.bytes, parent.where(), v.offset));
  return owner ? decode_dictionary_views(v.bytes, parent.where(), v.offset, owner)
               : decode_dictionary(v.bytes, parent.where(), v.offset);
}

std::string printable(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 80)) out += (c >= 32 && c < 127) ? c : '?';
  if (s.size() > 80) out += "...";
  return out;
}

DataType read_dtype(const Fields& f) {
  int64_t t = f.get<int64_t>("dtype");
  if (t != int64_t(DataType::Float32) && t != int64_t(DataType::Float64))
    f.fail("data type ", t, " is not 1 (float32) or 2 (float64)");
  return DataType(t);
}

void check_shape(const Fields& f, const NDShape& s) {
  if (s.rank() > 64) f.fail("shape of rank ", s.rank(), " exceeds the limit of 64 axes");
  uint64_t n = 1;
  for (size_t d : s.dims()) {
    if (d == NDShape::kInferred || d == NDShape::kFree) continue;
    if (d > kMaxElements || (n *= std::max<uint64_t>(d, 1)) > kMaxElements)
      f.fail("shape ", s.to_string(), " has more than 2^40 elements");
  }
}

std::vector<Axis> read_axes(const Fields& f) {
  const auto& v = f.get<DictionaryVector>("dynamic_axes");
  if (v.size() > 2) f.fail(v.size(), " dynamic axes; Loom has at most 2 (batch, sequence)");
  std::vector<Axis> axes;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is<std::string>())
      f.fail("dynamic_axes[", i, "] holds ", v[i].type_name(), " where a string is expected");
    const std::string& name = v[i].get<std::string>();
    if (name.empty()) f.fail("dynamic_axes[", i, "] has an empty name");
    axes.push_back(Axis::dynamic_axis_named(name));
  }
  if (!axes.empty() && !axes[0].is_batch())
    f.fail("the first dynamic axis is '", printable(axes[0].name()), "', not the batch axis");
  return axes;
}

// The fields every variable has (a leaf, or a primitive's output).
struct VariableFields {
  std::string uid, name;
  NDShape shape;
  bool shape_known;
  DataType dtype;
  std::vector<Axis> axes;
  bool sparse, needs_gradient;
};

VariableFields read_variable(const Fields& f) {
  VariableFields v;
  v.uid = f.get<std::string>("uid");
  if (v.uid.empty()) f.fail("empty uid");
  v.name = f.get<std::string>("name");
  v.shape = f.get<NDShape>("shape");
  v.shape_known = f.get<bool>("shape_known");
  if (v.shape_known) check_shape(f, v.shape);
  v.dtype = read_dtype(f);
  v.axes = read_axes(f);
  v.sparse = f.get<bool>("sparse");
  v.needs_gradient = f.get<bool>("needs_gradient");
  return v;
}

Initializer read_initializer(const Fields& f) {
  Initializer init;
  int64_t kind = f.get<int64_t>("kind");
  if (kind < 0 || kind > int64_t(kLastInitKind)) f.fail("unknown initializer kind ", kind);
  init.kind = InitKind(kind);
  init.scale = f.get<double>("scale");
  int64_t out_rank = f.get<int64_t>("output_rank"), filt_rank = f.get<int64_t>("filter_rank");
  if (out_rank < -64 || out_rank > 64 || filt_rank < 0 || filt_rank > 64)
    f.fail("initializer ranks ", out_rank, " and ", filt_rank, " are outside -64..64 and 0..64");
  init.output_rank = int(out_rank);
  init.filter_rank = int(filt_rank);
  if (f.has("seed")) init.seed = f.get<uint64_t>("seed");
  return init;
}

// A RandomGenerator::checkpoint() dictionary.
RandomGenerator read_generator(const Fields& g) {
  Dictionary state;
  for (const char* key : {"seed", "stream", "offset"}) state[key] = g.get<uint64_t>(key);
  RandomGenerator r;
  r.restore(state);
  return r;
}

std::shared_ptr<VariableImpl> read_leaf(const Fields& f) {
  const std::string& kind = f.get<std::string>("kind");
  auto v = std::make_shared<VariableImpl>();
  if (kind == "Input")
    v->kind = VariableKind::Input;
  else if (kind == "Parameter")
    v->kind = VariableKind::Parameter;
  else if (kind == "Constant")
    v->kind = VariableKind::Constant;
  else if (kind == "Placeholder")
    v->kind = VariableKind::Placeholder;
  else
    f.fail("variable kind '", printable(kind),
           "' is not Input, Parameter, Constant or Placeholder");
  VariableFields c = read_variable(f);
  v->shape = c.shape;
  v->shape_known = c.shape_known;
  v->dtype = c.dtype;
  v->dynamic_axes = c.axes;
  v->is_sparse = c.sparse;
  v->needs_gradient = c.needs_gradient;
  v->name = c.name;
  v->uid = c.uid;
  const bool stateful = v->kind == VariableKind::Parameter || v->kind == VariableKind::Constant;
  if (v->kind == VariableKind::Input) {
    if (!c.shape_known || c.shape.has_inferred())
      f.fail("input shape ", c.shape.to_string(), " is not fully known");
    if (c.sparse && c.shape.rank() == 0) f.fail("a sparse input needs at least one axis");
  } else if (!c.axes.empty() || c.sparse) {
    f.fail("a ", kind, " has no dynamic axes and is dense");
  }
  if (stateful && !c.shape_known)
    f.fail("a ", kind, " must have a known shape (inferred dimensions aside)");
  if (f.has("value")) {
    if (!stateful) f.fail("a ", kind, " has no value");
    const NDArrayView& value = f.get<NDArrayView>("value");
    if (value.is_sparse()) f.fail("value is sparse; parameters and constants are dense");
    if (value.dtype() != c.dtype)
      f.fail("value of type ", to_string(value.dtype()), " for a variable of type ",
             to_string(c.dtype));
    if (value.shape() != c.shape)
      f.fail("value of shape ", value.shape().to_string(), " for a variable of shape ",
             c.shape.to_string());
    v->value = value;
  } else if (v->kind == VariableKind::Constant) {
    f.fail("a Constant without a value");
  } else if (v->kind == VariableKind::Parameter && !c.shape.has_inferred()) {
    f.fail("a Parameter of known shape ", c.shape.to_string(), " without a value");
  }
  if (v->kind == VariableKind::Parameter) {
    v->init = read_initializer(f.child("init"));
    v->init_generator = read_generator(f.child("generator"));
  }
  return v;
}

template <typename T>
std::string show(const T& v) {
  return detail::concat(v);
}
std::string show(const NDShape& s) {
  return s.to_string();
}
std::string show(const std::vector<Axis>& axes) {
  std::string s = "{";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + printable(axes[i].name());
  return s + "}";
}
std::string show(bool b) {
  return b ? "true" : "false";
}
std::string show(DataType t) {
  return to_string(t);
}

}  // namespace

Dictionary model_to_dictionary(const Function& f) {
  std::vector<uint8_t> bytes;
  VectorSink sink(bytes);
  write_graph(list_graph(f), sink);
  return decode_dictionary(bytes, "model_to_dictionary");
}

namespace {
// The blocks a graph of version 2 lists, with their arguments and outputs (defined: every
// variable by uid).
std::vector<std::shared_ptr<BlockInfo>> read_blocks(
    const Fields& top, const std::unordered_map<std::string, Variable>& defined, int64_t version) {
  std::vector<std::shared_ptr<BlockInfo>> blocks;
  if (!top.has("blocks")) return blocks;
  if (version < 2) top.fail("blocks in a graph of version ", version);
  const auto& entries = top.get<DictionaryVector>("blocks");
  auto variable = [&](const Fields& f, const DictionaryVector& uids, size_t k, const char* what) {
    if (!uids[k].is<std::string>())
      f.fail(what, "[", k, "] holds ", uids[k].type_name(), " where a uid is expected");
    auto it = defined.find(uids[k].get<std::string>());
    if (it == defined.end())
      f.fail(what, "[", k, "] '", printable(uids[k].get<std::string>()), "' is not defined");
    return it->second;
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    Fields f = item(top, entries, i, "blocks");
    auto b = std::make_shared<BlockInfo>();
    b->op_name = f.get<std::string>("op_name");
    if (b->op_name.empty()) f.fail("a block without an op name");
    b->name = f.get<std::string>("name");
    b->uid = f.get<std::string>("uid");
    const auto& arguments = f.get<DictionaryVector>("arguments");
    for (size_t k = 0; k < arguments.size(); ++k)
      b->arguments.emplace_back(variable(f, arguments, k, "arguments").impl());
    const auto& outputs = f.get<DictionaryVector>("outputs");
    for (size_t k = 0; k < outputs.size(); ++k) {
      const Variable o = variable(f, outputs, k, "outputs");
      if (!o.is_output()) f.fail("outputs[", k, "] '", printable(o.uid()), "' is not computed");
      b->outputs.push_back(o.impl());
    }
    blocks.push_back(std::move(b));
  }
  return blocks;
}
}  // namespace

namespace {
// Ops that files of earlier versions hold as primitives of one output and that are now one
// output of an op of several: top_k was TopK (its values) and TopKIndices (its positions), two
// primitives, until the executor ran ops of several outputs. Each loads as its own TopK.
struct FormerOutput {
  const char* file_op;
  const char* op;
  size_t output;
};
constexpr FormerOutput kFormerOutputs[] = {{"TopK", "TopK", 0}, {"TopKIndices", "TopK", 1}};

// The graph from its encoding (a graph section's payload). The variables and functions, nearly
// all of it, are decoded one entry at a time as the graph is built (a whole graph's Dictionary
// took several times the memory of the graph it described, and most of the time of a load was
// allocating and freeing it).
Function model_from_encoding(const EncodedValue& graph, const std::string& where,
                             const std::shared_ptr<const void>& owner) {
  // The small entries decoded; the two vectors as their items' encodings.
  DictionaryMap small;
  std::unordered_map<std::string, std::vector<EncodedValue>> pieces;
  for (auto& [key, value] : encoded_entries(graph, where)) {
    if ((key == "variables" || key == "functions") && value.bytes[0] == uint8_t(ValueTag::Vector))
      pieces[key] = encoded_items(value, where);
    else
      small.emplace_hint(small.end(), key, decode_value(value.bytes, where, value.offset));
  }
  Fields top(small, "graph", where);
  int64_t version = top.get<int64_t>("graph_version");
  if (version < 1 || version > kGraphVersion)
    top.fail("graph version ", version, " is not one this Loom reads (1 to ", kGraphVersion, ")");
  auto vector_of = [&](const char* key) -> const std::vector<EncodedValue>& {
    auto it = pieces.find(key);
    if (it == pieces.end()) {
      top.get<DictionaryVector>(key);  // missing or of another type: says which
      top.fail("'", key, "' is not a vector");
    }
    return it->second;
  };
  const std::vector<EncodedValue>& variables = vector_of("variables");
  const std::vector<EncodedValue>& functions = vector_of("functions");
  // Every variable by uid, as handles that keep their functions alive, and every function. (The
  // keys are strings, not views of the uids: a look-up then compares within the table's nodes.)
  std::unordered_map<std::string, Variable> defined;
  std::unordered_map<std::string, std::shared_ptr<FunctionImpl>> functions_by_uid;
  defined.reserve(variables.size() + functions.size());  // most functions have one output
  functions_by_uid.reserve(functions.size());
  auto define = [&](const Fields& f, const Variable& v) {
    if (!defined.emplace(v.uid(), v).second)
      f.fail("uid '", printable(v.uid()), "' is defined twice");
  };

  std::unordered_map<int64_t, std::shared_ptr<const LayerTag>> layers;  // by stored index
  for (size_t i = 0; i < variables.size(); ++i) {
    const Dictionary entry = decode_item(top, variables[i], i, "variables", owner);
    Fields f(entry.map(), top, "variables", i);
    auto v = read_leaf(f);
    if (f.has("layer")) {
      if (v->kind != VariableKind::Parameter) f.fail("only a Parameter belongs to a layer");
      Fields l = f.child("layer");
      auto& tag = layers[l.get<int64_t>("index")];
      if (!tag)
        tag = std::make_shared<const LayerTag>(
            LayerTag{l.get<std::string>("block_name"), l.get<std::string>("name")});
      v->layer = tag;
    }
    define(f, Variable(std::move(v)));
  }

  // A delay op may read an output defined after it (a recurrent loop closes there): it reads a
  // placeholder of that output's stored type until the output exists.
  auto later_output = [&](size_t i, const std::string& uid) -> std::optional<Variable> {
    for (size_t j = i + 1; j < functions.size(); ++j) {
      const Dictionary entry = decode_item(top, functions[j], j, "functions", owner);
      Fields g(entry.map(), top, "functions", j);
      const auto& outs = g.get<DictionaryVector>("outputs");
      for (size_t k = 0; k < outs.size(); ++k) {
        Fields of = item(g, outs, k, "outputs");
        if (of.get<std::string>("uid") != uid) continue;
        VariableFields s = read_variable(of);
        auto v = std::make_shared<VariableImpl>();
        v->kind = VariableKind::Output;
        v->shape = s.shape;
        v->shape_known = s.shape_known;
        v->dtype = s.dtype;
        v->dynamic_axes = s.axes;
        v->needs_gradient = s.needs_gradient;
        return forward_declaration(Variable(v), Variable());
      }
    }
    return std::nullopt;
  };
  auto is_delay_op = [](const std::string& op, const DictionaryMap& attributes) {
    try {
      return find_op(op).traits(Dictionary(attributes)).time_shift != 0;
    } catch (const Error&) {
      return false;  // reported when the function is re-created
    }
  };
  std::vector<std::tuple<Function, std::string, Fields>> loop_edges;  // delay, operand uid
  // Outputs of blocks: the variable, its blocks' numbers, where it is in the file.
  std::vector<std::tuple<std::shared_ptr<VariableImpl>, DictionaryVector, Fields>> block_outputs;
  for (size_t i = 0; i < functions.size(); ++i) {
    const Dictionary entry = decode_item(top, functions[i], i, "functions", owner);
    Fields f(entry.map(), top, "functions", i);
    const std::string& op_name = f.get<std::string>("op");
    const std::string& uid = f.get<std::string>("uid");
    const std::string& name = f.get<std::string>("name");
    const DictionaryMap& attributes = f.get<DictionaryMap>("attributes");
    const auto& input_uids = f.get<DictionaryVector>("inputs");
    const auto& outputs = f.get<DictionaryVector>("outputs");
    const FormerOutput* former = nullptr;
    for (const FormerOutput& m : kFormerOutputs)
      if (op_name == m.file_op && outputs.size() == 1) former = &m;
    std::vector<Variable> inputs;
    for (size_t k = 0; k < input_uids.size(); ++k) {
      if (!input_uids[k].is<std::string>())
        f.fail("inputs[", k, "] holds ", input_uids[k].type_name(), " where a uid is expected");
      const std::string& in = input_uids[k].get<std::string>();
      auto it = defined.find(in);
      if (it != defined.end()) {
        inputs.push_back(it->second);
        continue;
      }
      // Otherwise only a delay op's operand may be defined later, so every cycle has a delay.
      std::optional<Variable> later;
      if (k == 0 && is_delay_op(op_name, attributes)) later = later_output(i, in);
      if (!later) f.fail("input ", k, " '", printable(in), "' is not defined before its use");
      inputs.push_back(*later);
    }
    const bool closes_loop = !inputs.empty() && inputs[0].is_placeholder();
    // Shape inference fixes a parameter's inferred dimensions and allocates its value; a graph
    // saved after inference has none left where all inputs are known, so a file that has one
    // there would make the loader allocate what the file does not hold.
    bool all_known = true;
    for (const Variable& in : inputs) all_known = all_known && in.has_known_shape();
    for (size_t k = 0; all_known && k < inputs.size(); ++k)
      if (inputs[k].is_parameter() && inputs[k].shape().has_inferred())
        f.fail("input ", k, " '", printable(inputs[k].uid()), "' is a parameter of shape ",
               inputs[k].shape().to_string(),
               " with inferred dimensions, which a saved graph has inferred already");
    Function fn;
    try {
      if (op_name == kUserFunctionOp) {
        fn = user_function_from_attributes(inputs, Dictionary(attributes), name);
      } else {
        const OpDef& op = find_op(former ? former->op : op_name);
        check_op_input_count(op, inputs.size());
        fn = make_primitive(op, std::move(inputs), Dictionary(attributes), name);
      }
    } catch (const DataError&) {
      throw;
    } catch (const Error& e) {
      f.fail("cannot re-create ", printable(op_name), " '", printable(uid), "': ", e.what());
    }
    auto& impl = *fn.impl();
    impl.uid = uid;
    // A random op continues its draws where the saved one stopped.
    if (impl.random) {
      impl.random = read_generator(f.child("random"));
    } else if (f.has("random")) {
      f.fail(printable(op_name), " draws no random numbers but the file gives it a generator");
    }
    if (f.has("custom_attributes"))
      impl.custom_attributes = Dictionary(f.get<DictionaryMap>("custom_attributes"));
    if (!functions_by_uid.emplace(impl.uid, fn.impl()).second)
      f.fail("function uid '", printable(uid), "' is defined twice");
    if (!former && outputs.size() != impl.outputs.size())
      f.fail(printable(op_name), " '", printable(uid), "' has ", impl.outputs.size(),
             " outputs, the file lists ", outputs.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      Fields of = item(f, outputs, k, "outputs");
      VariableFields s = read_variable(of);
      const std::shared_ptr<VariableImpl>& output = impl.outputs[former ? former->output : k];
      VariableImpl& o = *output;
      auto check = [&](const char* what, const auto& stored, const auto& inferred) {
        if (!(stored == inferred))
          of.fail("stored ", what, " ", show(stored), " differs from the ", show(inferred),
                  " that ", printable(op_name), " infers from its inputs");
      };
      check("shape_known", s.shape_known, o.shape_known);
      if (s.shape_known) check("shape", s.shape, o.shape);
      check("data type", s.dtype, o.dtype);
      check("dynamic axes", s.axes, o.dynamic_axes);
      check("sparse flag", s.sparse, o.is_sparse);
      check("needs_gradient", s.needs_gradient, o.needs_gradient);
      o.uid = std::move(s.uid);
      o.name = std::move(s.name);
      if (of.has("blocks")) {
        if (version < 2) of.fail("blocks in a graph of version ", version);
        block_outputs.emplace_back(output, of.get<DictionaryVector>("blocks"), of.detached());
      }
      define(of, Variable(output, fn.impl()));
    }
    if (closes_loop) loop_edges.emplace_back(fn, input_uids[0].get<std::string>(), f.detached());
  }
  for (auto& [delay, operand, f] : loop_edges) {
    try {  // defined: later_output found it among a later function's outputs
      delay.replace_placeholders({{delay.inputs()[0], defined.at(operand)}});
    } catch (const Error& e) {
      f.fail("cannot close the recurrent loop through '", printable(operand), "': ", e.what());
    }
  }

  const std::vector<std::shared_ptr<BlockInfo>> blocks = read_blocks(top, defined, version);
  for (auto& [output, numbers, f] : block_outputs)
    for (size_t k = 0; k < numbers.size(); ++k) {
      if (!numbers[k].is<int64_t>() || numbers[k].get<int64_t>() < 0 ||
          numbers[k].get<int64_t>() >= int64_t(blocks.size()))
        f.fail("blocks[", k, "] is not the number of one of the ", blocks.size(), " blocks");
      output->blocks.push_back(blocks[numbers[k].get<int64_t>()]);
    }

  Fields r = top.child("root");
  const auto& root_uids = r.get<DictionaryVector>("outputs");
  if (root_uids.empty()) r.fail("the root has no outputs");
  std::vector<Variable> roots;
  for (size_t k = 0; k < root_uids.size(); ++k) {
    if (!root_uids[k].is<std::string>())
      r.fail("outputs[", k, "] holds ", root_uids[k].type_name(), " where a uid is expected");
    auto it = defined.find(root_uids[k].get<std::string>());
    if (it == defined.end())
      r.fail("output ", k, " '", printable(root_uids[k].get<std::string>()), "' is not defined");
    roots.push_back(it->second);
  }
  const std::string& uid = r.get<std::string>("uid");
  if (r.has("block") && r.get<bool>("block")) {
    for (const auto& b : blocks)
      if (b->uid == uid) return block_view(b);
    r.fail("root block '", printable(uid), "' is not defined");
  }
  if (r.get<bool>("composite")) {
    Function c = combine(roots, r.get<std::string>("name"));  // the layers are as stored
    c.impl()->block_name = r.get<std::string>("block_name");
    c.impl()->uid = uid;
    if (r.has("custom_attributes"))
      c.impl()->custom_attributes = Dictionary(r.get<DictionaryMap>("custom_attributes"));
    return c;
  }
  auto it = functions_by_uid.find(uid);
  if (it == functions_by_uid.end()) r.fail("root function '", printable(uid), "' is not defined");
  Function root(it->second);
  const auto outs = root.outputs();
  if (outs.size() != roots.size()) r.fail("the root outputs do not match its function's");
  for (size_t k = 0; k < outs.size(); ++k)
    if (!(outs[k] == roots[k])) r.fail("root output ", k, " is not its function's output ", k);
  return root;
}

// As model_from_encoding, with a DataError for every failure (naming where).
Function checked_model_from_encoding(const EncodedValue& graph, const std::string& where,
                                     const std::shared_ptr<const void>& owner) {
  try {
    return model_from_encoding(graph, where, owner);
  } catch (const DataError&) {
    throw;
  } catch (const Error& e) {
    throw DataError(where + ": " + e.what());
  }
}
}  // namespace

Function model_from_dictionary(const Dictionary& graph, const std::string& where) {
  const std::vector<uint8_t> bytes = encode_dictionary(graph);
  return checked_model_from_encoding({bytes, 0}, where, nullptr);
}

ContainerWriter model_container(const Function& f, ContentKind kind, size_t model_outputs) {
  Dictionary meta;
  meta["producer"] = "Loom";
  meta["content"] = kind == ContentKind::Checkpoint ? "checkpoint" : "model";
  if (model_outputs > 0) meta["model_outputs"] = uint64_t{model_outputs};
  ContainerWriter w(kind);
  w.add_dictionary_section(SectionKind::Metadata, meta, /*flags=*/0);
  // Listed (and checked) now, written as the file is.
  w.add_streamed_section(SectionKind::Graph,
                         [g = std::make_shared<const GraphListing>(list_graph(f))](ByteSink& out) {
                           write_graph(*g, out);
                         });
  return w;
}

std::vector<uint8_t> save_model_to_bytes(const Function& f) {
  return model_container(f, ContentKind::Model).bytes();
}

void save_model(const Function& f, const std::string& path) {
  model_container(f, ContentKind::Model).write_file(path);
}

Function load_model_from_bytes(std::span<const uint8_t> bytes, const std::string& name) {
  // CNTK's own files are recognised by their first bytes (cntk_model.h).
  if (cntk_format_of(bytes) != CntkFormat::None) return load_cntk_model_from_bytes(bytes, name);
  ContainerReader file(bytes, name);
  // A checkpoint holds the model too, as CNTK's did: load_model reads its graph.
  if (file.content_kind() != uint32_t(ContentKind::Checkpoint))
    file.expect_content(ContentKind::Model);
  const SectionKind known[] = {SectionKind::Metadata, SectionKind::Graph,
                               SectionKind::TrainingState};
  file.reject_unknown_required(known);
  const Function graph = graph_of(file);
  const Section* meta = file.find(SectionKind::Metadata);
  if (!meta) return graph;
  const Dictionary d = decode_dictionary(meta->payload, file.where(*meta), meta->offset);
  if (!d.contains("model_outputs") || !d.at("model_outputs").is<uint64_t>()) return graph;
  // A checkpoint: its model is the training graph's first outputs (loss and metric follow).
  const std::vector<Variable> outputs = graph.outputs();
  const uint64_t n = d.get<uint64_t>("model_outputs");
  if (n == 0 || n >= outputs.size()) return graph;
  return combine({outputs.begin(), outputs.begin() + long(n)});
}

Function graph_of(const ContainerReader& file, std::shared_ptr<const void> view_owner) {
  const Section& s = file.require(SectionKind::Graph);
  return checked_model_from_encoding({s.payload, s.offset}, file.where(s), view_owner);
}

Function load_model(const std::string& path) {
  // The values are copied out of the mapping: a loaded model owns its tensors.
  const MappedFile file(path);
  return load_model_from_bytes(file.bytes(), path);
}

namespace {

// Leaves whose values a file carries, in the graph's deterministic order.
std::vector<Variable> stateful_leaves(const Function& graph) {
  std::vector<Variable> leaves;
  for (const Parameter& p : graph.parameters()) leaves.push_back(p);
  for (const Constant& c : graph.constants()) leaves.push_back(c);
  return leaves;
}

}  // namespace

void check_same_graph(const Function& saved, const Function& current, const std::string& file) {
  auto saved_fns = topological_order(saved.outputs());
  auto current_fns = topological_order(current.outputs());
  LOOM_CHECK(saved_fns.size() == current_fns.size(), StateError, "'", file,
             "' was saved from a graph of ", saved_fns.size(),
             " primitive functions; this one has ", current_fns.size());
  for (size_t i = 0; i < saved_fns.size(); ++i)
    LOOM_CHECK(op_name_of(*saved_fns[i]) == op_name_of(*current_fns[i]), StateError, "'", file,
               "': primitive function ", i, " is ", op_name_of(*saved_fns[i]), " '",
               saved_fns[i]->name, "' in the file but ", op_name_of(*current_fns[i]), " '",
               current_fns[i]->name, "' in this graph");
  auto saved_leaves = stateful_leaves(saved);
  auto current_leaves = stateful_leaves(current);
  LOOM_CHECK(saved_leaves.size() == current_leaves.size(), StateError, "'", file, "' holds ",
             saved_leaves.size(), " parameters and constants; this graph has ",
             current_leaves.size());
  for (size_t i = 0; i < saved_leaves.size(); ++i) {
    const Variable &s = saved_leaves[i], &c = current_leaves[i];
    LOOM_CHECK(
        s.is_parameter() == c.is_parameter() && s.dtype() == c.dtype() && s.shape() == c.shape(),
        StateError, "'", file, "': ", s.is_parameter() ? "parameter" : "constant", " ",
        s.describe(), " ", to_string(s.dtype()), " does not match this graph's ", c.describe(), " ",
        to_string(c.dtype()));
  }
}

void copy_leaf_values(const Function& saved, const Function& current) {
  const auto saved_leaves = stateful_leaves(saved);
  const auto current_leaves = stateful_leaves(current);
  for (size_t i = 0; i < saved_leaves.size(); ++i)
    current_leaves[i].value().copy_from(saved_leaves[i].value());
}

void restore_model(const Function& f, const std::string& path) {
  const Function saved = load_model(path);
  check_same_graph(saved, f, path);
  copy_leaf_values(saved, f);
}

}  // namespace loom
