// All op families: include this to build graphs from primitive ops.
#pragma once

#include "loom/ops/assign.h"
#include "loom/ops/convolution.h"
#include "loom/ops/crop.h"
#include "loom/ops/ctc.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/linear.h"
#include "loom/ops/losses.h"
#include "loom/ops/normalization.h"
#include "loom/ops/pooling.h"
#include "loom/ops/random.h"
#include "loom/ops/recurrence_ops.h"
#include "loom/ops/reduction.h"
#include "loom/ops/sequence_ops.h"
#include "loom/ops/shape_ops.h"
#include "loom/ops/softmax.h"
