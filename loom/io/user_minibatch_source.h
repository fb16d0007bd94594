// UserMinibatchSource (CNTK's cntk.io.UserMinibatchSource): the base of a minibatch source a
// program writes itself, usable wherever Loom's reader is (a Trainer loop, training_session,
// Function::train/test, distributed training):
//
//   class MyDataSource : public UserMinibatchSource {
//    public:
//     std::vector<StreamInformation> stream_infos() const override { return {fsi_, lsi_}; }
//     Minibatch<StreamInformation> next_minibatch(size_t num_samples, size_t number_of_workers,
//                                                 size_t worker_rank) override {
//       ...  // the sequences of this worker, as Values
//       return {{fsi_, {features, num_sequences, feature_samples, sweep_end}},
//               {lsi_, {labels, num_sequences, num_sequences, sweep_end}}};
//     }
//     Dictionary get_checkpoint_state() const override;       // e.g. {"next": position}
//     void restore_from_checkpoint(const Dictionary& state) override;
//   };
//
// next_minibatch returns one MinibatchData per stream (a Value of sequences [N, T, ...] with
// its mask, or of samples [N, ...], and its counts), or an empty Minibatch once the data are
// exhausted; sweep_end marks the minibatch that wraps around to the start of the data.
// The loops check what it returns: a stream that stream_infos() does not list, counts that
// differ from the Value's, or streams with different numbers of sequences are errors naming
// the stream and both counts. training_session stores get_checkpoint_state() in its
// checkpoints and gives it back to restore_from_checkpoint on restore (and around each
// cross-validation pass); a source without state need not override them.
#pragma once

#include <cstddef>
#include <vector>

#include "loom/io/minibatch_source_interface.h"

namespace loom {

class UserMinibatchSource : public MinibatchSourceInterface {
 public:
  // The streams: names, storage (dense or sparse), type and sample shape.
  std::vector<StreamInformation> stream_infos() const override = 0;
  // number_of_workers and worker_rank say which share of the data to return in distributed
  // training (1 and 0 otherwise).
  Minibatch<StreamInformation> next_minibatch(size_t num_samples, size_t number_of_workers,
                                              size_t worker_rank) override = 0;
  // Default: no state ({}).
  Dictionary get_checkpoint_state() const override { return {}; }
  // Default: accepts only an empty state, and an ArgumentError otherwise (the source would
  // not resume where the checkpoint was taken).
  void restore_from_checkpoint(const Dictionary& state) override;

  using MinibatchSourceInterface::next_minibatch;
};

}  // namespace loom
