// Recurrent layers, as CNTK's layers library has them (RECURRENCE.md §4): Recurrence runs a
// step function over a sequence, a loop closed through past_value (future_value when
// go_backwards); Fold keeps only its final state; LSTM, GRU and RNNStep are step functions;
// Embedding maps (one-hot) vectors to dense ones; Stabilizer is the self-stabilizer.
//
//   Function model = Sequential({Embedding(50), Recurrence(LSTM(25)), last, Dense(5)});
//
// A step function takes N states and the input x, in that order, and gives the N new states.
// Its state arguments need known types (placeholder(shape, dtype, default_sequence_axes())),
// which LSTM, GRU and RNNStep declare: that is where a recurrence learns its states' shapes.
#pragma once

#include <optional>
#include <vector>

#include "loom/layers/default_options.h"
#include "loom/ops/recurrence_ops.h"

namespace loom {

struct RecurrenceOptions {
  bool go_backwards = false;
  // Empty: the scalar constant 0 for every state; one: the same for every state; else one per
  // state. A constant or parameter, broadcast to the state's shape at each sequence's start.
  std::vector<Variable> initial_state = {};
  bool return_full_state = false;  // every state as an output, not only the first
  std::string name = {};
  // Recurrence of an LSTM, GRU or RNNStep (one output, initial states without dynamic axes,
  // activation tanh, sigmoid, relu or none) as one fused op (loom/ops/fused_rnn.h), with the
  // same parameters; false: the generic step loop.
  bool fused = true;
};

// The recurrence of step over its argument x: a sequence of step's first output (of all
// outputs with return_full_state).
Function Recurrence(const Function& step, const RecurrenceOptions& options = {});
// The same with the initial states as arguments (init_1, ..., init_N, x): per-sequence data with
// a batch axis (an encoder's final state), or constants. options.initial_state must be empty.
Function RecurrenceFrom(const Function& step, const RecurrenceOptions& options = {});
// Recurrence's final state: sequence::last of each output (sequence::first if go_backwards).
Function Fold(const Function& step, const RecurrenceOptions& options = {});

struct UnfoldOptions {
  // A function of one argument, the generated output, giving one number per step: a sequence
  // ends at the first step where it is 1 (that step included). Unset: no early end.
  Function until_predicate = {};
  // The most steps per step of dynamic_axes_like (CNTK's where(broadcast_as(length_increase,
  // like)): 1.5 gives ceil(1.5 * length)), on a new sequence axis unless 1.
  double length_increase = 1;
  std::string name = {};
};

// Unfolds generator from an initial state (CNTK's UnfoldFrom): the result takes
// (initial_state, dynamic_axes_like) and gives a sequence as long as dynamic_axes_like (on its
// sequence axis; times length_increase on a new one), each step generator(previous state),
// starting from initial_state (a constant, or per-sequence data with a batch axis). generator
// takes the state (a placeholder with a known type) and gives the new state, which is also the
// output, or (output, new state): a decoder emitting a softmax and feeding back an embedding of
// it, an LSTM emitting h of its (h, c). With until_predicate each sequence keeps its steps up to
// the first where the predicate is 1, on a new sequence axis (sequence::gather's), as CNTK's:
// the generation itself still runs all the steps. Each call of the block has axes of its own.
Function UnfoldFrom(const Function& generator, const UnfoldOptions& options = {});

// sequence::delay as a layer: x delayed by T steps (T < 0: from the future; 0: x itself),
// initial_state where that reaches outside the sequence (invalid: 0).
Function Delay(int64_t T = sequence::kDelayTimeStep, const Variable& initial_state = {},
               const std::string& name = "");

struct PastValueWindowOptions {
  bool go_backwards = false;
  std::string name = {};
};

// CNTK's PastValueWindow: a layer of a sequence x giving two outputs without a sequence axis,
// "value": the last window_size steps of each sequence, newest first (the first steps when
// go_backwards), zeros past the sequence's start, stacked on a new static axis at `axis`
// (Python-style; -2 for vectors gives [window_size, dim]); "valid": 1 for the steps that exist,
// else 0, [window_size, 1] for axis -2 (splice of scalars, as CNTK's). CNTK splices along an
// existing axis when the step has it; here the value axis is always new (np.stack). ArgumentError
// for window_size 0.
Function PastValueWindow(size_t window_size, int axis, const PastValueWindowOptions& options = {});

struct RecurrentCellOptions {
  std::optional<size_t> cell_shape = {};      // LSTM's cell size (a projection to shape follows)
  std::optional<Activation> activation = {};  // unset: tanh for LSTM and GRU, sigmoid for RNNStep
  bool use_peepholes = false;                 // LSTM only
  std::optional<Initializer> init = {};       // unset: default_options, else glorot_uniform
  std::optional<Initializer> init_bias = {};  // unset: default_options, else 0
  bool enable_self_stabilization = false;
  DataType dtype = DataType::Float32;
  std::string name = {};
};

// Step functions (dh, dc, x) -> (h, c) and (dh, x) -> h, with CNTK's parameters b, W, H (H1 for
// GRU; Ci, Cf, Co with peepholes; P with a cell_shape) and gate order (LSTM: i, c~, f, o; GRU:
// z, r, c~).
Function LSTM(size_t shape, const RecurrentCellOptions& options = {});
Function GRU(size_t shape, const RecurrentCellOptions& options = {});
Function RNNStep(size_t shape, const RecurrentCellOptions& options = {});

struct EmbeddingOptions {
  std::optional<Initializer> init = {};  // unset: default_options, else glorot_uniform
  DataType dtype = DataType::Float32;
  std::string name = {};
};
// x · E with a learnable E of shape [input dim (inferred), shape]; for a sparse one-hot x a row
// lookup.
Function Embedding(size_t shape, const EmbeddingOptions& options = {});
// x · E with E the constant weights [input dim, shape].
Function Embedding(const NDArrayView& weights, const std::string& name = "");

// beta · x with beta = softplus(steepness · alpha) / steepness and alpha a scalar parameter
// starting where beta = 1; the identity when not enabled.
inline constexpr int kStabilizerSteepness = 4;  // CNTK's default (an int in its signature)
Function Stabilizer(double steepness = kStabilizerSteepness, bool enable_self_stabilization = true,
                    DataType dtype = DataType::Float32, const std::string& name = "");

}  // namespace loom
