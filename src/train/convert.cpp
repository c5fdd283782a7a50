// Checkpoint conversion (see convert.h).
#include "train/convert.h"

#include <filesystem>

#include "nn/checkpoint.h"
#include "tasks/registry.h"
#include "train/checkpoint.h"

namespace sru::train {

void convert_checkpoint(const std::string& in, const std::string& form, const std::string& out) {
  SRU_CHECK(!out.empty(), "--convert needs --out FILE: where to write the converted checkpoint");
  SRU_CHECK(!std::filesystem::exists(out) || !std::filesystem::equivalent(in, out),
            "--out ", out, " is the checkpoint being converted: write the converted one to another file");
  const LoadedCheckpoint ckpt = read_checkpoint(in);
  Generator gen(static_cast<uint64_t>(ckpt.config.train.seed));
  const tasks::TaskContext context{/*load_data=*/false, &ckpt.file};
  auto task = tasks::make_task(ckpt.config, gen, context);
  load_model(task->model(), ckpt.file, in);
  tasks::ConvertsModel* conversion = task->model_conversion();
  SRU_CHECK(conversion, "--convert: task ", task->name(), " cannot convert its model");
  tasks::ConvertedModel converted = conversion->convert_model(form);
  auto target = tasks::make_task(converted.config, gen, context);
  nn::load_state_from(target->model(), safetensors::File{converted.state, {}}, "the converted model");
  save_checkpoint(out, *target, nullptr, converted.config.to_yaml(), ckpt.progress);
}

}  // namespace sru::train
