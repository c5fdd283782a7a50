// k-fold cross-validation for any task that declares a plan (TaskSpec::cross_validation): one
// ordinary training run per fold in DIR/fold-<i>/ (each a complete run directory, with its own
// checkpoints and resume), then DIR/cv_summary.json with every fold's numbers on the best-on-validation
// checkpoint, and their mean and sample standard deviation for the metric the runs chose the best
// checkpoint by (the task's, read back from each fold's summary.json). Resuming skips finished folds
// and resumes a started one.
#pragma once

#include "tasks/registry.h"
#include "train/run_dir.h"

namespace sru::train {

int cross_validate(const RunOptions& options, const config::Config& cfg, const tasks::CrossValidationPlan& plan);

}  // namespace sru::train
