// Convenience header: every differentiable op.
#pragma once

#include "ops/attention.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/index.h"
#include "ops/layer_norm.h"
#include "ops/masked_softmax.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/select.h"
#include "ops/shape_ops.h"
#include "ops/softmax.h"
