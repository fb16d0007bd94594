#include "loom/io/user_minibatch_source.h"

namespace loom {

void UserMinibatchSource::restore_from_checkpoint(const Dictionary& state) {
  LOOM_CHECK(state.size() == 0, ArgumentError,
             "UserMinibatchSource: the checkpoint holds a state of this source (", state.size(),
             " entries), but the source does not override "
             "restore_from_checkpoint; override it to resume where the checkpoint was taken");
}

}  // namespace loom
