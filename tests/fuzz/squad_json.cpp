// Fuzz target: SQuAD v1.1 JSON (read_squad, then the answer-span alignment map_answer_spans) and the
// predictions file of `srueval squad-score` (read_squad_predictions), from the same bytes.
#include "data/squad.h"
#include "data/squad_metric.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const sru::fuzz::TempFile file(std::string_view(reinterpret_cast<const char*>(data), size), ".json");
  sru::fuzz::expect_only_sru_errors([&] {
    const sru::data::SquadDataset dataset = sru::data::read_squad(file.path());
    (void)sru::data::map_answer_spans(dataset);
  });
  sru::fuzz::expect_only_sru_errors([&] { (void)sru::data::read_squad_predictions(file.path()); });
  return 0;
}
