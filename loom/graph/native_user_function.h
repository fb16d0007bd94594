// CNTK's native user functions: a user function (loom/graph/user_function.h) made by a factory in
// a shared library the program loads at run time, by an op id registered once (CNTK's
// Function::RegisterNativeUserFunction and Function::NativeUserFunction).
//
// The library exports a factory with C linkage:
//
//   extern "C" loom::UserFunction* create_my_op(const loom::Variable* operands,
//                                               size_t num_operands,
//                                               const loom::Dictionary* attributes,
//                                               const char* name);
//
// returning a UserFunction made with `new` (Loom owns it from then on; of one output or several,
// as its infer_outputs says), or null to refuse. It is built against the same Loom release as
// the program (it may link Loom itself: the two share Loom's types, which must be identical). A
// model holding a native user function saves the op id, library, factory and attributes, so
// load_model makes it again through the factory, registering the op id if this process has not.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "loom/core/dictionary.h"
#include "loom/graph/function.h"

namespace loom {

class UserFunction;

// The factory's signature.
using NativeUserFunctionFactory = UserFunction* (*)(const Variable* operands, size_t num_operands,
                                                    const Dictionary* attributes, const char* name);

// Loads module_name (a shared library path or name; ".so" is appended where it does not end so,
// as CNTK did) and finds factory_method_name in it. An IOError naming the library when it cannot
// be loaded, an ArgumentError when the factory is not in it or op_id is registered already.
void register_native_user_function(const std::string& op_id, const std::string& module_name,
                                   const std::string& factory_method_name);

// Adds a folder where a library named without one (module_name above, or in a model file) is
// looked for when dlopen's own search does not find it. Loom's Python package adds its own,
// where CNTK's example library (examples/extensibility/user_times_function.cpp) lies.
void add_native_user_function_search_path(const std::string& folder);

// Whether op_id is registered in this process (by register_native_user_function, or by loading
// a model that holds a native user function), as CNTK's IsNativeUserFunctionRegistered.
bool is_native_user_function_registered(const std::string& op_id);

// The function the factory registered for op_id makes of operands and attributes, which are its
// attributes (Function::attributes, with the record under kNativeUserFunctionKey beside them).
// An ArgumentError when op_id is not registered, the factory returns null or an attribute is
// named kNativeUserFunctionKey.
Function native_user_function(const std::string& op_id, const std::vector<Variable>& operands,
                              const Dictionary& attributes = {}, const std::string& name = "");

// For the model loader: the native user function a saved "native" record (what
// native_user_function keeps in its primitive's attributes) describes, applied to inputs;
// registers its op id from the record's library and factory if needed.
Function native_user_function_from_record(const std::vector<Variable>& inputs,
                                          const Dictionary& record, const std::string& name);

// The key of that record in a native user function's attributes.
inline constexpr const char* kNativeUserFunctionKey = "native";

}  // namespace loom
