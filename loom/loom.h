// Loom: the umbrella header a user includes.
#pragma once

#include "loom/core/axis.h"
#include "loom/core/dictionary.h"
#include "loom/core/random.h"
#include "loom/core/threads.h"
#include "loom/core/value.h"
#include "loom/graph/function.h"
#include "loom/graph/variable.h"
#include "loom/layers/dense.h"
#include "loom/layers/sequential.h"
#include "loom/learners/sgd.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linear.h"
#include "loom/ops/losses.h"
#include "loom/train/progress_printer.h"
#include "loom/train/trainer.h"
