// The task registry: the one list of tasks (add a line here for a new task), lookup by name, and the
// config catalogue built from it and the encoder registry.
#include "tasks/registry.h"

#include <map>

#include "core/error.h"
#include "tasks/classify.h"
#include "tasks/lm.h"
#include "tasks/squad.h"
#include "tasks/translate.h"

namespace sru::tasks {

const std::vector<TaskSpec>& task_specs() {
  static const std::vector<TaskSpec> list = {
      charlm_task(),
      wordlm_task(),
      classify_task(),
      squad_task(),
      translate_task(),
  };
  return list;
}

const TaskSpec& find_task(const std::string& name) { return config::find_named(task_specs(), name, "task"); }

std::vector<const Scorer*> scorers() {
  std::vector<const Scorer*> out;
  std::map<std::string, std::string> owner;  // scorer name -> the task declaring it
  for (const TaskSpec& t : task_specs())
    for (const Scorer& s : t.scorers) {
      const auto [it, fresh] = owner.emplace(s.name, t.name);
      SRU_CHECK(fresh, "scorer '", s.name, "' is declared by two tasks: ", it->second, " and ", t.name);
      out.push_back(&s);
    }
  return out;
}

std::unique_ptr<Task> make_task(const config::Config& cfg, Generator& gen, const TaskContext& context) {
  std::unique_ptr<Task> task = find_task(cfg.task).create(cfg, gen, context);
  task->set_name(cfg.task);
  return task;
}

std::optional<CrossValidationPlan> cross_validation_plan(const config::Config& cfg) {
  const TaskSpec& spec = find_task(cfg.task);
  return spec.cross_validation ? spec.cross_validation(cfg) : std::nullopt;
}

std::shared_ptr<nn::SequenceEncoder> make_encoder(const config::Config& cfg, int64_t input_size, Generator& gen,
                                                  int64_t vocab_size) {
  nn::EncoderArgs args;
  args.input_size = input_size;
  args.hidden_size = cfg.model.hidden_size;
  args.num_layers = cfg.model.num_layers;
  args.dropout = cfg.model.dropout;
  args.bidirectional = cfg.model.bidirectional;
  args.vocab_size = vocab_size;
  return nn::find_encoder(cfg.model.type).build(args, cfg.encoder_options, gen);
}

}  // namespace sru::tasks

namespace sru::config {

const Catalogue& catalogue() {
  static const Catalogue c = [] {
    Catalogue out;
    for (const tasks::TaskSpec& t : tasks::task_specs()) out.tasks.push_back({t.name, t.help, t.make_options});
    for (const nn::EncoderSpec& e : nn::encoders()) out.encoders.push_back({e.name, e.help, e.make_options});
    return out;
  }();
  return c;
}

}  // namespace sru::config
