// CNTK's AttentionModel (cntk.layers.models.attention, Bahdanau et al.): a function of
// (encoder_hidden_state, decoder_hidden_state), both sequences on different axes, giving for
// each decoder step the attention-weighted sum of the encoder states of the same sample.
//
//   Function attention = AttentionModel(64);
//   Variable context = attention(encoder_states, decoder_states);  // decoder's axes, [h]
//
// Its parameters, as CNTK makes them: three projections Stabilizer >> Dense(bias false,
// input_rank 1) (encoder and decoder to attention_dim, tanh output to 1) and a final Stabilizer
// (stabilizers only with enable_self_stabilization). The weights are the output of an alias
// named "attention_weights" (Label).
#pragma once

#include <optional>
#include <string>

#include "loom/layers/default_options.h"

namespace loom {

struct AttentionModelOptions {
  // Both set: CNTK's deprecated (2.2) mode, a PastValueWindow of attention_span encoder steps
  // stacked on static axis attention_axis; the output keeps that axis (extent 1). Both unset:
  // attention over the whole encoder sequence (sequence::unpack). One alone is an
  // ArgumentError, as is a span of 0.
  std::optional<size_t> attention_span = {};
  std::optional<int> attention_axis = {};
  std::optional<Initializer> init = {};  // unset: default_options, else glorot_uniform
  bool go_backwards = false;             // the deprecated mode's window
  bool enable_self_stabilization = true;
  DataType dtype = DataType::Float32;
  std::string name = {};
};

Function AttentionModel(size_t attention_dim, const AttentionModelOptions& options = {});

}  // namespace loom
