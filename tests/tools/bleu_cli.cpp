// Test-only front end of data/bleu.h for scripts/check_bleu.py, which compares it with the sacrebleu
// package. Prints one JSON object:
//   bleu_cli --hyp FILE --ref FILE [--ref FILE2 ...] [--lowercase] [--lines] [--tokens]
//   {"score", "counts", "totals", "precisions", "bp", "sys_len", "ref_len", "signature", "text",
//    "lines": [{"sys_len", "ref_len", "counts", "totals", "score"}, ...]   (--lines: each line's
//              statistics, and its score as a one-line corpus)
//    "tokens": {"hyp": [...], "refs": [[...], ...]}}                       (--tokens: the segments as scored)
// Errors: "bleu_cli: error: ..." on stderr, exit status 1.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/bleu.h"

namespace {

nlohmann::json score_json(const sru::data::BleuScore& s) {
  return {{"score", s.score}, {"counts", s.counts}, {"totals", s.totals}, {"precisions", s.precisions},
          {"bp", s.bp},       {"sys_len", s.sys_len}, {"ref_len", s.ref_len}};
}

int run(int argc, char** argv) {
  std::string hyp;
  std::vector<std::string> refs;
  sru::data::BleuOptions options;
  bool lines = false, tokens = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--hyp" && has_value) {
      hyp = argv[++i];
    } else if (arg == "--ref" && has_value) {
      refs.emplace_back(argv[++i]);
    } else if (arg == "--lowercase") {
      options.lowercase = true;
    } else if (arg == "--lines") {
      lines = true;
    } else if (arg == "--tokens") {
      tokens = true;
    } else {
      throw sru::Error("unknown or incomplete argument '" + arg +
                       "' (usage: bleu_cli --hyp FILE --ref FILE [--ref FILE ...] [--lowercase] [--lines] [--tokens])");
    }
  }
  if (hyp.empty() || refs.empty()) throw sru::Error("--hyp and at least one --ref are required");

  const sru::data::BleuCorpus corpus = sru::data::read_bleu_files(hyp, refs);
  const sru::data::BleuScore score = sru::data::corpus_bleu(corpus.hypotheses, corpus.references, options);
  nlohmann::json out = score_json(score);
  out["signature"] = score.signature;
  out["text"] = sru::data::format_bleu(score, 2, true);
  if (lines) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& stats : sru::data::bleu_line_statistics(corpus.hypotheses, corpus.references, options)) {
      nlohmann::json row = score_json(sru::data::bleu_from_statistics(stats));
      rows.push_back(std::move(row));
    }
    out["lines"] = std::move(rows);
  }
  if (tokens) {
    nlohmann::json hyp_tokens = nlohmann::json::array(), ref_tokens = nlohmann::json::array();
    for (const auto& line : corpus.hypotheses) hyp_tokens.push_back(sru::data::preprocess_bleu_segment(line, options));
    for (const auto& stream : corpus.references) {
      nlohmann::json one = nlohmann::json::array();
      for (const auto& line : stream) one.push_back(sru::data::preprocess_bleu_segment(line, options));
      ref_tokens.push_back(std::move(one));
    }
    out["tokens"] = {{"hyp", std::move(hyp_tokens)}, {"refs", std::move(ref_tokens)}};
  }
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "bleu_cli: error: " << e.what() << "\n";
    return 1;
  }
}
