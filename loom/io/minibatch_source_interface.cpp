#include "loom/io/minibatch_source_interface.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

namespace loom {

namespace {

// How a minibatch's error messages name its keys.
std::string key_name(const StreamInformation& s) {
  return detail::concat("stream '", s.name, "' (id ", s.id, ", shape ", s.sample_shape.to_string(),
                        ")");
}
std::string key_name(const Variable& v) {
  return v.describe();
}

std::string stream_names(const std::vector<StreamInformation>& streams) {
  std::string known;
  for (const StreamInformation& s : streams) known += (known.empty() ? "'" : ", '") + s.name + "'";
  return known;
}

// A minibatch as a source returned it, checked against what the source declared.
void check_minibatch(const Minibatch<StreamInformation>& minibatch,
                     const std::vector<StreamInformation>& declared) {
  const StreamInformation* first = nullptr;
  for (const auto& [stream, data] : minibatch) {
    LOOM_CHECK(std::find(declared.begin(), declared.end(), stream) != declared.end(), ArgumentError,
               "minibatch source: next_minibatch returned ", key_name(stream),
               ", which is not one of its stream_infos() (", stream_names(declared), ")");
    const Value& v = data.data;
    LOOM_CHECK(data.number_of_sequences == v.num_sequences(), DataError,
               "minibatch source: ", key_name(stream),
               " says number_of_sequences = ", data.number_of_sequences, ", but its Value holds ",
               v.num_sequences(), " sequences");
    LOOM_CHECK(data.number_of_samples == v.number_of_samples(), DataError,
               "minibatch source: ", key_name(stream),
               " says number_of_samples = ", data.number_of_samples, ", but its Value holds ",
               v.number_of_samples(), " samples");
    LOOM_CHECK(v.dtype() == stream.dtype && v.sample_shape() == stream.sample_shape, DataError,
               "minibatch source: ", key_name(stream), " of ", to_string(stream.dtype),
               " got a Value of ", to_string(v.dtype()), " samples of shape ",
               v.sample_shape().to_string());
    if (!first) first = &stream;
    const MinibatchData& f = minibatch.at(*first);
    LOOM_CHECK(data.number_of_sequences == f.number_of_sequences, DataError,
               "minibatch source: ", key_name(stream), " holds ", data.number_of_sequences,
               " sequences, ", key_name(*first), " holds ", f.number_of_sequences,
               "; sequence i of every stream belongs to one example");
  }
}

}  // namespace

template <class Key>
void Minibatch<Key>::throw_missing(const Key& key) const {
  const std::string missing = key_name(key);
  LOOM_CHECK(!this->empty(), ArgumentError, "Minibatch: no data for ", missing,
             ": the minibatch is empty (its source has ended)");
  std::vector<std::string> held;
  for (const auto& entry : *this) held.push_back(key_name(entry.first));
  std::sort(held.begin(), held.end());
  std::string list;
  for (const std::string& h : held) list += (list.empty() ? "" : ", ") + h;
  throw ArgumentError(detail::concat(
      "Minibatch: no data for ", missing, "; it holds ", list,
      std::is_same_v<Key, Variable> ? " (next_minibatch's input_map binds variables to streams)"
                                    : ""));
}
template void Minibatch<StreamInformation>::throw_missing(const StreamInformation&) const;
template void Minibatch<Variable>::throw_missing(const Variable&) const;

StreamInformation MinibatchSourceInterface::operator[](const std::string& name) const {
  const std::vector<StreamInformation> streams = stream_infos();
  for (const StreamInformation& s : streams)
    if (s.name == name) return s;
  throw ArgumentError(detail::concat("minibatch source: unknown stream '", name,
                                     "'; known streams: ", stream_names(streams)));
}

Minibatch<Variable> MinibatchSourceInterface::next_minibatch(
    size_t num_samples, const std::unordered_map<Variable, StreamInformation>& input_map,
    size_t number_of_workers, size_t worker_rank) {
  const std::vector<StreamInformation> declared = stream_infos();
  for (auto& [var, stream] : input_map)
    LOOM_CHECK(std::find(declared.begin(), declared.end(), stream) != declared.end(), ArgumentError,
               "input map: stream '", stream.name, "' for variable '", var.name(),
               "' does not belong to this minibatch source (its streams: ", stream_names(declared),
               ")");
  Minibatch<StreamInformation> by_stream =
      next_minibatch(num_samples, number_of_workers, worker_rank);
  Minibatch<Variable> out;
  if (by_stream.empty()) return out;
  check_minibatch(by_stream, declared);
  for (auto& [var, stream] : input_map) {
    const MinibatchData& data = by_stream[stream];
    // The data as the source gives them (CNTK's): sequences of one step for an input without a
    // sequence axis, which it takes as they are; longer ones are an error now, not at training.
    if (!var.has_sequence_axis()) check_value_form(var, data.data);
    out.emplace(var, data);
  }
  return out;
}

}  // namespace loom
