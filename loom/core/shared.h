// Shared<T>: how a configuration holds an object it uses, such as training_session's trainer
// and minibatch source. It is a std::shared_ptr<T> made from a shared_ptr (the object is
// shared) or from a reference to an object the caller owns and keeps alive while it is used
// (borrowed), so a program written with values (`Trainer trainer(...)`, as in a manual loop)
// and one written with shared_ptrs pass their objects the same way.
#pragma once

#include <memory>

namespace loom {

template <typename T>
class Shared : public std::shared_ptr<T> {
 public:
  using std::shared_ptr<T>::shared_ptr;
  Shared() = default;
  Shared(std::shared_ptr<T> object) : std::shared_ptr<T>(std::move(object)) {}
  // Borrowed: nothing is owned; `object` must outlive every use.
  Shared(T& object) : std::shared_ptr<T>(std::shared_ptr<T>(), &object) {}
};

}  // namespace loom
