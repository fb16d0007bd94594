// Dictionary: typed, nested key/value state. Every checkpointable object (learners,
// minibatch sources, trainers, random generators) describes its state as one, so a
// checkpoint is a Dictionary of Dictionaries.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "loom/core/ndarray_view.h"
#include "loom/core/shape.h"

namespace loom {

class DictionaryValue;
using DictionaryMap = std::map<std::string, DictionaryValue>;
using DictionaryVector = std::vector<DictionaryValue>;

class DictionaryValue {
 public:
  using Storage = std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string,
                               NDShape, DictionaryVector, DictionaryMap, NDArrayView>;

  DictionaryValue() = default;
  DictionaryValue(bool v) : v_(v) {}
  DictionaryValue(int v) : v_(int64_t{v}) {}
  DictionaryValue(int64_t v) : v_(v) {}
  DictionaryValue(uint64_t v) : v_(v) {}
  DictionaryValue(double v) : v_(v) {}
  DictionaryValue(const char* v) : v_(std::string(v)) {}
  DictionaryValue(std::string v) : v_(std::move(v)) {}
  DictionaryValue(NDShape v) : v_(std::move(v)) {}
  DictionaryValue(DictionaryVector v) : v_(std::move(v)) {}
  DictionaryValue(DictionaryMap v) : v_(std::move(v)) {}
  DictionaryValue(NDArrayView v) : v_(std::move(v)) {}

  bool has_value() const { return !std::holds_alternative<std::monostate>(v_); }
  template <typename T>
  bool is() const {
    return std::holds_alternative<T>(v_);
  }
  // The stored value; a StateError naming both types when it holds another type.
  template <typename T>
  const T& get() const;
  const Storage& storage() const { return v_; }
  const char* type_name() const;

 private:
  Storage v_;
};

class Dictionary {
 public:
  Dictionary() = default;
  Dictionary(DictionaryMap m) : m_(std::move(m)) {}

  bool contains(const std::string& key) const { return m_.count(key) != 0; }
  DictionaryValue& operator[](const std::string& key) { return m_[key]; }
  // The value at key; a StateError naming the key when absent.
  const DictionaryValue& at(const std::string& key) const;
  template <typename T>
  const T& get(const std::string& key) const {
    return at(key).get<T>();
  }
  // The nested dictionary at key.
  Dictionary get_dictionary(const std::string& key) const {
    return Dictionary(get<DictionaryMap>(key));
  }
  size_t size() const { return m_.size(); }
  const DictionaryMap& map() const { return m_; }
  operator DictionaryValue() const { return DictionaryValue(m_); }

 private:
  DictionaryMap m_;
};

}  // namespace loom
