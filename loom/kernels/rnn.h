// A whole recurrent layer (CNTK's LSTM, GRU or RNNStep run over sequences) as one kernel, forward
// and backward, on packed rows (loom/graph/tensor.h): time-major, sequences sorted by decreasing
// length, so the sequences running at step t are the ranks 0 .. active(t) - 1 and their rows
// the block [step_offsets[t], step_offsets[t + 1]). The input projection of all steps is one
// matrix product; each step multiplies only the running prefix by the recurrent weights, and
// one pass over the step's rows applies the gate non-linearities. Nothing is allocated: the
// caller passes a workspace of rnn_workspace_size elements, which backward reads as forward
// left it. Equations, gate order and parameter shapes are CNTK's (RECURRENCE.md §4.2):
//
//   LSTM    a = b + x·W + (s_dh·h)·H  gates i, c~, f, o; with peepholes i and f add
//           Ci⊙(s_dc·c), Cf⊙(s_dc·c) and o adds Co⊙(s_c·c_t); c_t = f⊙c + i⊙act(a_c~);
//           h~ = o⊙act(c_t)
//   GRU     a = b + x·W; z, r = σ(a_z,r + (s_dh·h)·H); h~ = (1 - z)⊙act(a_c~ + ((s_dh·h)⊙r)·H1)
//           + z⊙(s_dh·h)   (output size = cell size)
//   RNNStep h~ = act(b + x·W + (s_dh·h)·H)
//   output  h_t = (s_h·h~)·P with a projection, else h~
//
// where h and c are the previous step's output and cell (the initial state at a sequence's
// first step) and the s_* are the self-stabilizers' factors (1 without). float runs the gate
// non-linearities through a vectorized exp (relative error about 1e-7); double through libm.
#pragma once

#include <cstddef>

namespace loom::kernels {

enum class RnnCell { LSTM, GRU, RNNStep };
// The cell's activation (act above); the gates are always the logistic sigmoid.
enum class RnnActivation { Tanh, Sigmoid, Relu, Identity };

struct RnnShape {
  RnnCell cell = RnnCell::LSTM;
  RnnActivation activation = RnnActivation::Tanh;
  size_t input = 0;      // x's size I
  size_t output = 0;     // h's size n
  size_t cell_size = 0;  // c: the gates' size (n unless a projection maps c to n)
  bool peepholes = false;
  bool projection = false;
  bool backwards = false;                // steps from each sequence's last to its first
  const size_t* step_offsets = nullptr;  // steps + 1 entries (SequenceLayout::step_offsets)
  size_t steps = 0;

  size_t rows() const { return step_offsets[steps]; }
  size_t sequences() const { return steps ? active(0) : 0; }
  size_t active(size_t t) const { return step_offsets[t + 1] - step_offsets[t]; }
  // Gate blocks of W and b (4, 3, 1) and of H (4, 2, 1).
  size_t gates() const { return cell == RnnCell::LSTM ? 4 : cell == RnnCell::GRU ? 3 : 1; }
  size_t recurrent_gates() const { return cell == RnnCell::GRU ? 2 : gates(); }
};

// Row-major parameters in CNTK's shapes: b [G·c], W [I, G·c], H [n, G'·c], H1 [n, c] (GRU),
// Ci, Cf, Co [c] (peepholes), P [c, n] (projection); null where absent.
template <typename T>
struct RnnWeights {
  const T* b = nullptr;
  const T* W = nullptr;
  const T* H = nullptr;
  const T* H1 = nullptr;
  const T* Ci = nullptr;
  const T* Cf = nullptr;
  const T* Co = nullptr;
  const T* P = nullptr;
  T s_dh = 1, s_dc = 1, s_c = 1, s_h = 1;
};

// Gradients backward writes (not adds): those of x [rows, I] and of the weights where not null
// (b ... P as in RnnWeights), of the stabilizer factors, and per rank of the initial states.
template <typename T>
struct RnnGradients {
  T* x = nullptr;
  T* b = nullptr;
  T* W = nullptr;
  T* H = nullptr;
  T* H1 = nullptr;
  T* Ci = nullptr;
  T* Cf = nullptr;
  T* Co = nullptr;
  T* P = nullptr;
  T s_dh = 0, s_dc = 0, s_c = 0, s_h = 0;
  bool want_s_dh = true;  // false: s_dh's gradient (a pass over all rows) is not computed
  T* h0 = nullptr;        // [sequences, n]; a rank whose first step read h0[rank]
  T* c0 = nullptr;        // [sequences, c] (LSTM)
};

// Elements of T the workspace needs (forward and backward).
size_t rnn_workspace_size(const RnnShape& s);

// y [rows, n] of x [rows, I]; h0 [sequences, n] and c0 [sequences, c] (LSTM) are the initial
// states by rank.
template <typename T>
void rnn_forward(const RnnShape& s, const RnnWeights<T>& w, const T* x, const T* h0, const T* c0,
                 T* y, T* workspace);

// The LSTM's cell state of every row [rows, c] after rnn_forward, in its workspace.
template <typename T>
const T* rnn_cell_states(const RnnShape& s, const T* workspace);

// Gradients of everything from dy [rows, n], the gradient of y; workspace as rnn_forward left it
// (backward overwrites it).
template <typename T>
void rnn_backward(const RnnShape& s, const RnnWeights<T>& w, const T* x, const T* dy, T* workspace,
                  RnnGradients<T>& g);

}  // namespace loom::kernels
