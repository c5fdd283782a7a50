// srubench reader-rnn (see bench/reader_bench.h): the Document Reader's encoders built from the squad
// task's config defaults, SRU and LSTM, and their per-batch and per-epoch rows.
#include "bench/reader_bench.h"

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/engine.h"
#include "config/config.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "nn/sru.h"
#include "tasks/registry.h"

namespace sru::bench {

// The Document Reader's recurrent part, the paper's "time in RNN": the paragraph encoder (input
// 2E + 3: embedding, aligned question embedding, features) and the question encoder (input E), both
// bidirectional, forward + backward of a training batch with the configs' dropout, per batch and per
// epoch of `questions` questions.
void bench_reader_rnn(Report& report, const ReaderBenchOptions& o) {
  double lstm_ms = 0;
  std::vector<std::pair<std::string, double>> totals;
  for (const std::string type : {"lstm", "sru"}) {
    sru::config::Config cfg = sru::config::Config::defaults("squad", type);
    cfg.model.hidden_size = o.hidden;
    cfg.model.num_layers = type == "sru" ? o.sru_layers : o.lstm_layers;
    cfg.model.bidirectional = true;
    cfg.model.dropout = 0.2;
    if (type == "sru") cfg.encoder_options.as<sru::nn::SRUOptions>().rnn_dropout = 0.2;
    sru::Generator gen(1);
    const auto doc_rnn = sru::tasks::make_encoder(cfg, 2 * o.embedding + 3, gen);
    const auto question_rnn = sru::tasks::make_encoder(cfg, o.embedding, gen);
    const std::string name = type == "lstm" && o.device.is_cuda() ? "lstm_cudnn" : type;
    double both = 0;
    for (const auto& [part, rnn, L, n_in] :
         {std::tuple{"paragraph", doc_rnn, o.doc_length, 2 * o.embedding + 3},
          std::tuple{"question", question_rnn, o.question_length, o.embedding}}) {
      rnn->to(o.device);
      rnn->train(true);
      const Tensor x = Tensor::uniform({L, o.batch, n_in}, -1, 1, sru::DType::F32, gen).to(o.device).set_requires_grad(true);
      const Tensor grad = Tensor::ones({L, o.batch, rnn->output_size()}, sru::DType::F32, o.device);
      const auto t = sru::bench::time_on(o.device, [&, rnn = rnn] {
        sru::nn::EncoderStatePtr state;
        rnn->zero_grad();
        sru::autograd::backward(rnn->forward_sequence({x, Tensor(), Tensor()}, state), grad);
      }, o.timing);
      both += t.median_ms;
      Row row{name + "/" + part, o.device.str(), {}};
      row.set("layers", static_cast<double>(cfg.model.num_layers)).set("L", L).set("B", o.batch).set("d", o.hidden);
      row.set("ms_per_batch", t.median_ms);
      report.add(row);
    }
    if (type == "lstm") lstm_ms = both;
    Row row{name + "/both", o.device.str(), {}};
    row.set("layers", static_cast<double>(cfg.model.num_layers)).set("ms_per_batch", both);
    row.set("s_per_epoch", both / 1000.0 * static_cast<double>((o.questions + o.batch - 1) / o.batch));
    row.set("lstm_over_this", lstm_ms / both);
    report.add(row);
  }
}

}  // namespace sru::bench
