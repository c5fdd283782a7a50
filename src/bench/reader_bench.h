// `srubench reader-rnn`: the SQuAD Document Reader's recurrent encoders (paragraph and question,
// bidirectional), SRU against LSTM, forward + backward per batch and per epoch — the paper's "time in
// RNN" — on the CPU or a CUDA device.
#pragma once

#include <cstdint>

#include "bench/bench.h"
#include "core/device.h"

namespace sru::bench {

struct ReaderBenchOptions {
  int64_t hidden = 128, embedding = 300, batch = 32;
  int64_t doc_length = 148, question_length = 12;  // dev-v1.1's mean paragraph and question (tokens)
  int64_t sru_layers = 6, lstm_layers = 3;         // the paper's SRU reader and DrQA's LSTM
  int64_t questions = 87599;                       // train-v1.1
  TimingOptions timing{1, 5};
  Device device;
};

void bench_reader_rnn(Report& report, const ReaderBenchOptions& options);

}  // namespace sru::bench
