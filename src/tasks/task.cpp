// The task factory: cfg.task names the task.
#include "tasks/task.h"

#include "tasks/charlm.h"
#include "tasks/classify.h"

namespace sru::tasks {

std::unique_ptr<Task> make_task(const config::Config& cfg, Generator& gen, bool load_data,
                                const safetensors::File* checkpoint) {
  if (cfg.task == "charlm") {
    SRU_CHECK(!cfg.model.bidirectional, "model.bidirectional: a language model reads left to right (set it to false)");
    return std::make_unique<CharLMTask>(cfg, gen, load_data);
  }
  if (cfg.task == "classify") return std::make_unique<ClassifyTask>(cfg, gen, load_data, checkpoint);
  SRU_FAIL("unknown task '", cfg.task, "'");
}

}  // namespace sru::tasks
