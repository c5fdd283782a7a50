// srueval --convert: a checkpoint's model rewritten into an equivalent form (the task's ConvertsModel
// capability), checked by loading it into the model its new config builds, and saved as a checkpoint
// that srueval reads like any other (model, vocabulary, config; no optimiser state).
#pragma once

#include <string>

namespace sru::train {

// Reads checkpoint `in`, converts its model to `form` (e.g. "super-embed") and writes `out`. Throws,
// naming the reason, when the task or its model cannot be converted that way.
void convert_checkpoint(const std::string& in, const std::string& form, const std::string& out);

}  // namespace sru::train
