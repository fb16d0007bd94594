#include "loom/layers/dropout.h"

#include "loom/ops/random.h"

namespace loom {

Function Dropout(const DropoutOptions& o) {
  LOOM_CHECK(o.dropout_rate.has_value() != o.keep_prob.has_value(), ArgumentError,
             "Dropout: give exactly one of dropout_rate and keep_prob");
  LOOM_CHECK(!o.keep_prob || (*o.keep_prob > 0 && *o.keep_prob <= 1), ArgumentError,
             "Dropout: keep_prob ", o.keep_prob.value_or(0), " is outside (0, 1]");
  const double rate = o.dropout_rate ? *o.dropout_rate : 1 - *o.keep_prob;
  Variable x = placeholder("x");
  return as_layer({dropout(x, rate, o.seed)}, "Dropout", o.name);
}

}  // namespace loom
