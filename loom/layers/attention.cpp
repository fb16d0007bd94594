#include "loom/layers/attention.h"

#include "loom/layers/dense.h"
#include "loom/layers/recurrent.h"
#include "loom/layers/sequential.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduction.h"
#include "loom/ops/sequence_ops.h"
#include "loom/ops/shape_ops.h"
#include "loom/ops/softmax.h"

namespace loom {

Function AttentionModel(size_t attention_dim, const AttentionModelOptions& o) {
  LOOM_CHECK(attention_dim >= 1, ArgumentError, "AttentionModel: attention_dim must be positive");
  LOOM_CHECK(o.attention_span.has_value() == o.attention_axis.has_value(), ArgumentError,
             "AttentionModel: give both attention_span and attention_axis (the deprecated "
             "windowed mode) or neither");
  LOOM_CHECK(!o.attention_span || *o.attention_span > 0, ArgumentError,
             "AttentionModel: attention_span must be a positive value");
  const Initializer init = o.init.value_or(current_defaults().init);
  const bool stabilize = o.enable_self_stabilization;
  // Stabilizer >> Dense(dim) without bias; the activation is default_options', as in CNTK.
  auto projection = [&](size_t dim) {
    return Sequential(
        {Stabilizer(4, stabilize, o.dtype),
         Dense(dim, {.init = init, .input_rank = 1, .bias = false, .dtype = o.dtype})});
  };
  const Function proj_enc = projection(attention_dim), proj_dec = projection(attention_dim),
                 proj_tanh = projection(1);
  const Function final_stab = Stabilizer(4, stabilize, o.dtype);
  Variable enc = placeholder("encoder_hidden_state");
  Variable dec = placeholder("decoder_hidden_state");
  Variable out;
  if (o.attention_span) {
    const int axis = *o.attention_axis;
    const Function window =
        PastValueWindow(*o.attention_span, axis, {.go_backwards = o.go_backwards})(enc);
    const Variable values = window.outputs()[0], valid = window.outputs()[1];
    const Variable enc_proj = sequence::broadcast_as(proj_enc(values), dec);
    const Variable enc_valid = sequence::broadcast_as(valid, dec);
    const Variable u = proj_tanh(tanh(plus(proj_dec(dec), enc_proj)));
    // log-zero the steps outside the sequence: u + (valid - 1) * 50, as CNTK does
    const Variable masked =
        plus(u, element_times(minus(enc_valid, constant(1.0, o.dtype)), constant(50.0, o.dtype)));
    const Variable weights = Label("attention_weights")(softmax(masked, Axis(axis)));
    out = final_stab(
        reduce_sum(element_times(sequence::broadcast_as(values, dec), weights), Axis(axis)));
  } else {
    const Function unpacked = sequence::unpack(enc, 0.0);
    const Variable states = unpacked.outputs()[0], mask = unpacked.outputs()[1];  // [T, h], [T]
    const Variable enc_proj = sequence::broadcast_as(proj_enc(states), dec);      // [T, dim]
    const Variable valid =
        sequence::broadcast_as(reshape(mask, NDShape{1}, ReshapeOptions{.begin_axis = 1}), dec);
    const Variable logits = proj_tanh(tanh(plus(proj_dec(dec), enc_proj)));  // [T, 1]
    const Variable masked = element_select(valid, logits, constant(-1e+30, o.dtype));
    const Variable weights = Label("attention_weights")(softmax(masked, Axis(0)));
    const Variable attended =
        reduce_sum(element_times(weights, sequence::broadcast_as(states, weights)), Axis(0));
    out = final_stab(reshape(attended, NDShape{}, ReshapeOptions{.begin_axis = 0, .end_axis = 1}));
  }
  return inject_name(out, o.name);
}

}  // namespace loom
