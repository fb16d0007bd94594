// A helper of the tests (GoogleTest's): the message of the error a call throws.
#pragma once

#include <string>

#include "loom/core/error.h"

namespace loom {

// The message of the E that f throws, or "" when it throws none (an exception of another type
// leaves it, failing the test).
template <typename E = Error, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace loom
