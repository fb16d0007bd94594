#include "loom/graph/native_user_function.h"

#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "loom/core/error.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/user_function.h"

namespace loom {
namespace {

struct Registered {
  std::string module_name, factory_name;
  NativeUserFunctionFactory factory;
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<std::string, Registered> by_op_id;
  std::vector<std::string> search_path;  // add_native_user_function_search_path's folders
};

Registry& registry() {
  static Registry r;
  return r;
}

// The library stays loaded for the life of the process: functions it made may live as long. A
// file named without a folder is looked for where dlopen looks, then in search_path.
NativeUserFunctionFactory load_factory(const std::string& module_name,
                                       const std::string& factory_name,
                                       const std::vector<std::string>& search_path) {
  const std::string file = module_name.ends_with(".so") ? module_name : module_name + ".so";
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  const std::string error = library ? "" : dlerror();
  if (file.find('/') == std::string::npos)
    for (size_t i = 0; !library && i < search_path.size(); ++i)
      library = dlopen((search_path[i] + "/" + file).c_str(), RTLD_NOW | RTLD_LOCAL);
  LOOM_CHECK(library != nullptr, IOError, "native user function library '", file,
             "' cannot be loaded: ", error);
  dlerror();
  void* symbol = dlsym(library, factory_name.c_str());
  LOOM_CHECK(symbol != nullptr, ArgumentError, "native user function library '", file,
             "' has no factory '", factory_name, "' (declare it extern \"C\")");
  return reinterpret_cast<NativeUserFunctionFactory>(symbol);
}

// Registers op_id unless it is already (refused when `unique`). Called with the registry's lock.
void add_locked(Registry& r, const std::string& op_id, const std::string& module_name,
                const std::string& factory_name, bool unique) {
  if (r.by_op_id.contains(op_id)) {
    LOOM_CHECK(!unique, ArgumentError, "a native user function with op id '", op_id,
               "' is already registered: op ids must be unique");
    return;
  }
  r.by_op_id.emplace(op_id, Registered{module_name, factory_name,
                                       load_factory(module_name, factory_name, r.search_path)});
}

}  // namespace

void register_native_user_function(const std::string& op_id, const std::string& module_name,
                                   const std::string& factory_method_name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  add_locked(r, op_id, module_name, factory_method_name, /*unique=*/true);
}

void add_native_user_function_search_path(const std::string& folder) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (std::ranges::find(r.search_path, folder) == r.search_path.end())
    r.search_path.push_back(folder);
}

bool is_native_user_function_registered(const std::string& op_id) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.by_op_id.contains(op_id);
}

Function native_user_function(const std::string& op_id, const std::vector<Variable>& operands,
                              const Dictionary& attributes, const std::string& name) {
  Registered entry;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.by_op_id.find(op_id);
    LOOM_CHECK(it != r.by_op_id.end(), ArgumentError, "no native user function with op id '", op_id,
               "' is registered (register_native_user_function)");
    entry = it->second;
  }
  std::shared_ptr<UserFunction> user(
      entry.factory(operands.data(), operands.size(), &attributes, name.c_str()));
  LOOM_CHECK(user != nullptr, ArgumentError, "the factory '", entry.factory_name, "' of '",
             entry.module_name, "' made no function for op id '", op_id, "'");
  LOOM_CHECK(!attributes.contains(kNativeUserFunctionKey), ArgumentError,
             "a native user function's attribute may not be named '", kNativeUserFunctionKey,
             "' (Loom keeps how to make the function again there)");
  Function f = user_function(std::move(user), operands, name);
  // Its attributes are the function's (CNTK's Function.attributes), with the record beside them.
  f.impl()->attributes = attributes.map();
  Dictionary record;
  record["op_id"] = op_id;
  record["module"] = entry.module_name;
  record["factory"] = entry.factory_name;
  record["attributes"] = attributes.map();
  f.impl()->attributes[kNativeUserFunctionKey] = record.map();
  return f;
}

Function native_user_function_from_record(const std::vector<Variable>& inputs,
                                          const Dictionary& record, const std::string& name) {
  for (const char* key : {"op_id", "module", "factory"})
    LOOM_CHECK(record.contains(key) && record.at(key).is<std::string>(), ArgumentError,
               "a native user function's record has no string '", key, "'");
  LOOM_CHECK(record.contains("attributes") && record.at("attributes").is<DictionaryMap>(),
             ArgumentError, "a native user function's record has no attributes");
  const std::string& op_id = record.get<std::string>("op_id");
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    add_locked(r, op_id, record.get<std::string>("module"), record.get<std::string>("factory"),
               /*unique=*/false);
  }
  return native_user_function(op_id, inputs, Dictionary(record.get<DictionaryMap>("attributes")),
                              name);
}

}  // namespace loom
