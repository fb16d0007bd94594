#include "loom/core/dictionary.h"

namespace loom {

const char* DictionaryValue::type_name() const {
  static const char* names[] = {"none",   "bool",    "int64",  "uint64",     "double",
                                "string", "NDShape", "vector", "dictionary", "NDArrayView"};
  return names[v_.index()];
}

template <typename T>
const T& DictionaryValue::get() const {
  const T* p = std::get_if<T>(&v_);
  if (!p) {
    DictionaryValue probe{T{}};
    throw StateError(
        detail::concat("dictionary value holds ", type_name(), ", not ", probe.type_name()));
  }
  return *p;
}

template const bool& DictionaryValue::get<bool>() const;
template const int64_t& DictionaryValue::get<int64_t>() const;
template const uint64_t& DictionaryValue::get<uint64_t>() const;
template const double& DictionaryValue::get<double>() const;
template const std::string& DictionaryValue::get<std::string>() const;
template const NDShape& DictionaryValue::get<NDShape>() const;
template const DictionaryVector& DictionaryValue::get<DictionaryVector>() const;
template const DictionaryMap& DictionaryValue::get<DictionaryMap>() const;

template <>
const NDArrayView& DictionaryValue::get<NDArrayView>() const {
  const NDArrayView* p = std::get_if<NDArrayView>(&v_);
  LOOM_CHECK(p, StateError, "dictionary value holds ", type_name(), ", not NDArrayView");
  return *p;
}

const DictionaryValue& Dictionary::at(const std::string& key) const {
  auto it = m_.find(key);
  LOOM_CHECK(it != m_.end(), StateError, "dictionary has no key '", key, "'");
  return it->second;
}

}  // namespace loom
