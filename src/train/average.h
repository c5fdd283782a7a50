// srueval --average: the element-wise mean of several checkpoints' model weights (fairseq's
// average_checkpoints, OpenNMT-py's average_models), written as a checkpoint srueval reads like any
// other. The checkpoints must hold the same model: the same task and model config, the same
// vocabulary and the same tensor names, shapes and dtypes; the first difference is named and nothing
// is written. The mean is taken in double and stored in each tensor's dtype. Non-floating model tensors
// must be equal. The result keeps the last checkpoint's metadata (config, step, vocabulary) and its task
// state ("task.*"), drops the optimiser state ("optim.*": no optimiser state matches an average) and
// records the inputs in the metadata key "averaged_from".
#pragma once

#include <string>
#include <vector>

namespace sru::train {

// Averages `inputs` (two or more checkpoint files) into `out`, which must not be one of them. Returns
// a one-line summary (how many checkpoints, their steps, the tensor count).
std::string average_checkpoints(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace sru::train
