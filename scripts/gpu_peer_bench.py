#!/usr/bin/env python3
# The PyTorch peers of srubench, run on the same machine (on a GPU, the same card in the same call:
# scripts/gpu_lease.sh):
#   layer: the peer rows of `srubench sru-vs-lstm`, on a GPU (--device cuda, the default) or the CPU
#          (--device cpu: the torch.nn.LSTM rows of docs/results.md's CPU tables): one layer, input
#          size = hidden size = d, batch B, float32, forward + backward of sum(h * ones) — torch.nn.LSTM
#          (cuDNN on a GPU; TF32 off like ours unless --matmul-precision says otherwise) and, with
#          --sru-src, the reference `sru` package's SRU
#          (its CUDA kernel, JIT-built by torch.utils.cpp_extension): warm-up runs, then the median of
#          the repeats; on a GPU timed with CUDA events, with the peak device memory of one call; on the
#          CPU with the wall clock, or with --cpu-time the process's CPU time (as srubench sru-vs-lstm
#          --cpu-time), at --threads threads (as srubench --threads);
#   train: the reference's language_model/train_enwik8.py step (embedding, dropout, sru.SRU or
#          nn.LSTM, dropout, linear, cross-entropy, Adam, gradient clipping, state carried across
#          batches and detached) at the sizes of our YAML configs, on the same bytes, in chars/s, at
#          PyTorch's fastest settings: on a GPU fused Adam (one launch for all parameters) and foreach
#          clipping; --amp fp16 (autocast with GradScaler, and the reference SRU's
#          amp_recurrence_fp16) or --amp bf16 (autocast, no scaler) for mixed precision;
#   translate: torch's nn.Transformer at the sizes of a translate YAML config (configs/translate/wmt-base.yaml:
#          6 + 6 layers, d 512, ff 2048, 8 heads, post-norm, dropout 0.1, ReLU), one embedding shared by
#          source, target and output (a shared vocabulary, --vocab as our data.vocab_size), sinusoidal
#          positions, cross-entropy with the config's label smoothing, fused Adam: a training step over
#          --batch sentence pairs of --src-len / --tgt-len tokens with no padding (the peer's best case;
#          ours pads its length-bucketed batches), in target tokens/s, at --matmul-precision or --amp.
# The reference package is imported from --sru-src (a folder holding the `sru` package, v2.6).
# Usage: python3 scripts/gpu_peer_bench.py --sru-src DIR layer --lengths 32 128 256 --hidden 256 512 1024
#        python3 scripts/gpu_peer_bench.py --device cpu --threads 2 --warmup 2 --repeats 7 layer --lengths 32 128 --hidden 256 512
#        python3 scripts/gpu_peer_bench.py --sru-src DIR train --config configs/enwik8-small.yaml --data FILE
#        python3 scripts/gpu_peer_bench.py --sru-src DIR --amp fp16 train --config configs/enwik8.yaml --data FILE
#        python3 scripts/gpu_peer_bench.py --amp bf16 translate --config configs/translate/wmt-base.yaml --vocab 8000
import argparse
import json
import statistics
import sys
import time
import warnings

import torch
import torch.nn as nn

DEVICE = "cuda"  # --device
CLOCK = time.perf_counter  # the CPU's clock: time.process_time with --cpu-time


def import_reference_sru(src):
    """The reference `sru` module, or None with the reason printed (its CUDA kernel must have built)."""
    if not src:
        return None
    sys.path.insert(0, src)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import sru  # noqa: F401 (the JIT build of its CUDA kernel runs here)
        except Exception as e:  # noqa: BLE001 (any failure: report it and leave the rows out)
            print(f"reference sru: import failed: {e!r}")
            return None
    for w in caught:
        if "unsuccessful" in str(w.message) and DEVICE != "cpu":
            print(f"reference sru: its CUDA kernel did not build: {w.message}")
            return None
    print(f"reference sru {sru.__version__} from {sru.__file__}")
    return sru


def time_ms(fn, warmup, repeats):
    """Median milliseconds of fn over `repeats` runs (CUDA events on a GPU, CLOCK on the CPU), after
    `warmup` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if DEVICE == "cpu":
            start = CLOCK()
            fn()
            times.append((CLOCK() - start) * 1000)
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def peak_mb(fn):
    if DEVICE == "cpu":
        return float("nan")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def layer_bench(a, sru):
    """The table of the layer rows; on the CPU without the peak memory column, ms to 2 decimals."""
    rows = []
    cpu = DEVICE == "cpu"
    torch.manual_seed(1)
    print("| impl | L | B | d | ms |" if cpu else "| impl | L | B | d | ms | peak MB |")
    print("|---|---|---|---|---|" if cpu else "|---|---|---|---|---|---|")
    for L in a.lengths:
        for d in a.hidden:
            x = torch.empty(L, a.batch, d, device=DEVICE).uniform_(-1, 1).requires_grad_()
            grad_h = torch.ones(L, a.batch, d, device=DEVICE)
            layers = {"torch_lstm": nn.LSTM(d, d).to(DEVICE)}
            if sru is not None:
                layers["ref_sru"] = sru.SRU(d, d, num_layers=1).to(DEVICE)
            for name, layer in layers.items():
                def step(layer=layer):
                    layer.zero_grad(set_to_none=False)
                    x.grad = None
                    layer(x)[0].backward(grad_h)
                ms = time_ms(step, a.warmup, a.repeats)
                if cpu:
                    rows.append({"impl": name, "L": L, "B": a.batch, "d": d, "ms": ms})
                    print(f"| {name} | {L} | {a.batch} | {d} | {ms:.2f} |", flush=True)
                    continue
                mb = peak_mb(step)
                rows.append({"impl": name, "L": L, "B": a.batch, "d": d, "ms": ms, "peak_mb": mb})
                print(f"| {name} | {L} | {a.batch} | {d} | {ms:.4f} | {mb:.1f} |", flush=True)
    return rows


class CharLM(nn.Module):
    """train_enwik8.py's model: embedding -> dropout -> SRU/LSTM stack -> dropout -> linear."""

    def __init__(self, vocab, m, sru, amp):
        super().__init__()
        self.drop = nn.Dropout(m.get("dropout", 0.0))
        self.embedding = nn.Embedding(vocab, m["embedding_size"])
        if m["type"] == "lstm":
            self.rnn = nn.LSTM(m["embedding_size"], m["hidden_size"], m["num_layers"], dropout=m.get("dropout", 0.0))
        else:
            self.rnn = sru.SRU(m["embedding_size"], m["hidden_size"], m["num_layers"], dropout=m.get("dropout", 0.0),
                               projection_size=m.get("projection_size", 0), highway_bias=m.get("highway_bias", 0.0),
                               layer_norm=m.get("layer_norm", False), rescale=m.get("rescale", False),
                               amp_recurrence_fp16=amp == "fp16")
        self.out = nn.Linear(m["hidden_size"], vocab)

    def forward(self, x, hidden):
        h, hidden = self.rnn(self.drop(self.embedding(x)), hidden)
        return self.out(self.drop(h)).view(-1, self.out.out_features), hidden


def detach(hidden):
    if hidden is None:
        return None
    return tuple(h.detach() for h in hidden) if isinstance(hidden, tuple) else hidden.detach()


def amp_tools(a):
    """(GradScaler, autocast dtype or None) for --amp: fp16 scales the loss, bf16 does not."""
    scaler = torch.amp.GradScaler(DEVICE, enabled=a.amp == "fp16")
    return scaler, {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.amp)


def update(loss, model, opt, scaler, clip, foreach):
    """PyTorch's training update at its fastest settings: (scaled) backward, foreach clipping, fused step."""
    scaler.scale(loss).backward()
    if clip > 0:
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), clip, foreach=foreach)
    scaler.step(opt)
    scaler.update()


def train_bench(a, sru):
    import numpy as np  # here, so that the layer rows need torch alone
    import yaml

    data = np.frombuffer(open(a.data, "rb").read(), dtype=np.uint8)
    vocab_bytes, ids = np.unique(data, return_inverse=True)
    rows = []
    print("| config | params | chars/s | ms/step | peak MB |")
    print("|---|---|---|---|---|")
    for path in a.config:
        cfg = yaml.safe_load(open(path))
        m, B, bptt = cfg["model"], cfg["data"]["batch_size"], cfg["data"]["bptt"]
        if m["type"] != "lstm" and sru is None:
            print(f"| {path} | - | reference sru unavailable | | |")
            continue
        torch.manual_seed(1)
        model = CharLM(len(vocab_bytes), m, sru, a.amp).to(DEVICE)
        params = sum(p.numel() for p in model.parameters())
        gpu = DEVICE != "cpu"
        # A fixed learning rate: the schedule does not change the time of a step. Fused Adam on a GPU.
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, weight_decay=cfg["train"].get("weight_decay", 0.0),
                               fused=gpu)
        scaler, autocast_dtype = amp_tools(a)
        clip = cfg["train"].get("clip_grad_norm", 0.0)
        n = (len(ids) - 1) // B * B
        xs = torch.from_numpy(ids[:n].reshape(B, -1).T.copy()).to(DEVICE)
        ys = torch.from_numpy(ids[1:n + 1].reshape(B, -1).T.copy()).to(DEVICE)
        batches = xs.size(0) // bptt
        state = {"hidden": None, "i": 0}
        loss_fn = nn.CrossEntropyLoss()

        def step():
            i = state["i"] % batches
            state["i"] += 1
            x, y = xs[i * bptt:(i + 1) * bptt], ys[i * bptt:(i + 1) * bptt]
            model.zero_grad(set_to_none=False)
            with torch.autocast(x.device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
                out, hidden = model(x, detach(state["hidden"]))
                loss = loss_fn(out.float(), y.reshape(-1))
            state["hidden"] = hidden
            update(loss, model, opt, scaler, clip, foreach=gpu)
            return loss

        model.train()
        if DEVICE != "cpu":
            torch.cuda.reset_peak_memory_stats()
        ms = time_ms(lambda: [step() for _ in range(a.steps)], 1, a.repeats) / a.steps
        mb = torch.cuda.max_memory_allocated() / 2**20 if DEVICE != "cpu" else float("nan")
        chars = B * bptt / (ms / 1000)
        rows.append({"config": path, "params": params, "chars_per_s": chars, "ms_per_step": ms, "peak_mb": mb,
                     "amp": a.amp})
        print(f"| {path} | {params} | {chars:.0f} | {ms:.2f} | {mb:.0f} |", flush=True)
    return rows


class Seq2SeqTransformer(nn.Module):
    """nn.Transformer with one shared embedding (scaled by sqrt(d)), sinusoidal positions and a tied output
    layer, as fairseq's and OpenNMT-py's Transformer base with a shared vocabulary."""

    def __init__(self, vocab, m, max_len=512):
        super().__init__()
        d = m["hidden_size"]
        self.d = d
        self.embedding = nn.Embedding(vocab, d)
        nn.init.normal_(self.embedding.weight, std=d ** -0.5)
        position = torch.arange(max_len).unsqueeze(1)
        rate = torch.exp(torch.arange(0, d, 2) * (-torch.log(torch.tensor(10000.0)) / d))
        table = torch.zeros(max_len, d)
        table[:, 0::2], table[:, 1::2] = torch.sin(position * rate), torch.cos(position * rate)
        self.register_buffer("positions", table)
        self.drop = nn.Dropout(m.get("dropout", 0.1))
        self.transformer = nn.Transformer(d, m["num_heads"], m["num_layers"], m["num_layers"], m["ff_size"],
                                          m.get("dropout", 0.1), batch_first=True, norm_first=m.get("pre_norm", False))

    def embed(self, tokens):
        return self.drop(self.embedding(tokens) * self.d ** 0.5 + self.positions[:tokens.size(1)])

    def forward(self, src, tgt_in):
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=tgt_in.device)
        h = self.transformer(self.embed(src), self.embed(tgt_in), tgt_mask=causal, tgt_is_causal=True)
        return h @ self.embedding.weight.t()


def translate_bench(a):
    import yaml

    rows = []
    print("| config | params | target tokens/s | ms/step | peak MB |")
    print("|---|---|---|---|---|")
    for path in a.config:
        cfg = yaml.safe_load(open(path))
        m = cfg["model"]
        torch.manual_seed(1)
        model = Seq2SeqTransformer(a.vocab, m).to(DEVICE)
        params = sum(p.numel() for p in model.parameters())
        t = cfg.get("train", {})
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, t.get("beta2", 0.999)), fused=True)
        scaler, autocast_dtype = amp_tools(a)
        loss_fn = nn.CrossEntropyLoss(label_smoothing=t.get("label_smoothing", 0.0))
        clip = t.get("clip_grad_norm", 0.0)
        # Tokens 1..vocab-1 (0 would be padding); a new batch each step, drawn once ahead of the timing.
        batches = [(torch.randint(1, a.vocab, (a.batch, a.src_len), device=DEVICE),
                    torch.randint(1, a.vocab, (a.batch, a.tgt_len + 1), device=DEVICE)) for _ in range(8)]
        state = {"i": 0}

        def step():
            src, tgt = batches[state["i"] % len(batches)]
            state["i"] += 1
            opt.zero_grad(set_to_none=False)
            with torch.autocast("cuda", dtype=autocast_dtype, enabled=autocast_dtype is not None):
                logits = model(src, tgt[:, :-1])
                loss = loss_fn(logits.float().reshape(-1, a.vocab), tgt[:, 1:].reshape(-1))
            update(loss, model, opt, scaler, clip, foreach=True)

        model.train()
        torch.cuda.reset_peak_memory_stats()
        ms = time_ms(lambda: [step() for _ in range(a.steps)], 1, a.repeats) / a.steps
        mb = torch.cuda.max_memory_allocated() / 2**20
        tokens = a.batch * a.tgt_len / (ms / 1000)
        rows.append({"config": path, "params": params, "target_tokens_per_s": tokens, "ms_per_step": ms,
                     "peak_mb": mb, "amp": a.amp, "batch": a.batch, "src_len": a.src_len, "tgt_len": a.tgt_len})
        print(f"| {path} | {params} | {tokens:.0f} | {ms:.2f} | {mb:.0f} |", flush=True)
    return rows


def attention_bench(a):
    """F.scaled_dot_product_attention forward + backward on (B, H, L, d) at each dtype, causal or not:
    the peer of `srubench ops --device cuda --only fused_attention` (its bench case: (L, B, H x d) heads,
    causal) and of the issue's goal (L 512, 8 heads, d 64). PyTorch picks its fastest backend (flash
    or memory-efficient attention) for the dtype."""
    import torch.nn.functional as F
    rows = []
    print("| impl | dtype | B | H | L | d | causal | fwd ms | fwd+bwd ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dtype_name in a.dtypes:
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
        shape = (a.batch, a.heads, a.length, a.dim)
        q, k, v = (torch.empty(shape, device=DEVICE, dtype=dtype).uniform_(-1, 1).requires_grad_() for _ in range(3))
        grad = torch.ones(shape, device=DEVICE, dtype=dtype)

        def forward():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)

        def both():
            q.grad = k.grad = v.grad = None
            F.scaled_dot_product_attention(q, k, v, is_causal=a.causal).backward(grad)
        fwd, fwd_bwd = time_ms(forward, a.warmup, a.repeats), time_ms(both, a.warmup, a.repeats)
        rows.append({"impl": "torch_sdpa", "dtype": dtype_name, "B": a.batch, "H": a.heads, "L": a.length, "d": a.dim,
                     "causal": a.causal, "fwd_ms": fwd, "fwd_bwd_ms": fwd_bwd})
        print(f"| torch_sdpa | {dtype_name} | {a.batch} | {a.heads} | {a.length} | {a.dim} | {a.causal} | {fwd:.4f} | "
              f"{fwd_bwd:.4f} |", flush=True)
    return rows


def main():
    p = argparse.ArgumentParser(description="PyTorch peers of srubench, on a GPU or the CPU")
    p.add_argument("--sru-src", default="", help="folder holding the reference `sru` package")
    p.add_argument("--json", default="", help="also write the rows as JSON here")
    p.add_argument("--device", default="cuda", help="cuda, or cpu (the CPU peer rows of srubench sru-vs-lstm)")
    p.add_argument("--threads", type=int, default=0, help="torch's CPU threads (0: torch's default)")
    p.add_argument("--cpu-time", action="store_true", help="--device cpu: time with the process's CPU time")
    p.add_argument("--matmul-precision", default="highest", choices=["highest", "high", "medium"],
                   help="float32 products on a GPU, as our train.precision fp32 / tf32 / bf16 (srubench --precision): "
                   "torch.set_float32_matmul_precision, and cuDNN's TF32 allowed unless highest (medium is "
                   "refused: torch's CUDA medium is TF32, ours BF16)")
    p.add_argument("--amp", default="none", choices=["none", "fp16", "bf16"],
                   help="train and translate: torch.autocast at this dtype (fp16 with GradScaler and the reference "
                   "SRU's amp_recurrence_fp16, GPU only; bf16 also on the CPU, torch.autocast('cpu'))")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=20)
    sub = p.add_subparsers(dest="cmd", required=True)
    lp = sub.add_parser("layer")
    lp.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 256])
    lp.add_argument("--hidden", type=int, nargs="+", default=[256, 512, 1024])
    lp.add_argument("--batch", type=int, default=32)
    tp = sub.add_parser("train")
    tp.add_argument("--config", nargs="+", required=True)
    tp.add_argument("--data", required=True)
    tp.add_argument("--steps", type=int, default=20, help="steps per timed repeat")
    xp = sub.add_parser("translate")
    xp.add_argument("--config", nargs="+", required=True)
    xp.add_argument("--vocab", type=int, default=8000, help="the shared vocabulary (our data.vocab_size)")
    xp.add_argument("--batch", type=int, default=328, help="sentence pairs a step")
    xp.add_argument("--src-len", type=int, default=16)
    xp.add_argument("--tgt-len", type=int, default=15, help="target tokens a sentence (the decoder's input is as long)")
    xp.add_argument("--steps", type=int, default=20, help="steps per timed repeat")
    ap = sub.add_parser("attention")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--length", type=int, default=512)
    ap.add_argument("--dim", type=int, default=64, help="features a head")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16", "fp16"])
    a = p.parse_args()
    global DEVICE, CLOCK
    DEVICE = a.device
    if a.cpu_time and DEVICE != "cpu":
        p.error("--cpu-time is for --device cpu (a GPU is timed with CUDA events)")
    if a.cpu_time:
        CLOCK = time.process_time
    if a.matmul_precision != "highest" and DEVICE == "cpu":
        p.error("--matmul-precision is for a GPU: our CPU products stay FP32 (torch's CPU ones would change)")
    if a.amp != "none" and a.cmd == "layer":
        p.error("--amp is for train and translate")
    if a.amp == "fp16" and DEVICE == "cpu":
        p.error("--amp fp16 is for a GPU (on the CPU: --amp bf16, torch.autocast('cpu'))")
    if a.cmd == "translate" and DEVICE == "cpu":
        p.error("translate is for a GPU")
    if a.matmul_precision == "medium":
        p.error("--matmul-precision medium has no like-for-like peer: torch runs CUDA float32 matmuls at medium "
                "as TF32 (ours as BF16); compare at highest or high")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.set_float32_matmul_precision(a.matmul_precision)  # highest: TF32 off, as ours
    torch.backends.cudnn.allow_tf32 = a.matmul_precision != "highest"
    if DEVICE == "cpu":
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads" + (", clock: process CPU time" if a.cpu_time else "")
              + (f", AMP {a.amp} (torch.autocast('cpu'))" if a.amp != "none" else ""))
    else:
        print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}, "
              f"matmul precision {a.matmul_precision}" + (" (TF32 off)" if a.matmul_precision == "highest" else "")
              + (f", AMP {a.amp}" if a.amp != "none" else ""))
    sru = import_reference_sru(a.sru_src)
    benches = {"layer": lambda: layer_bench(a, sru), "train": lambda: train_bench(a, sru), "translate": lambda: translate_bench(a),
               "attention": lambda: attention_bench(a)}
    rows = benches[a.cmd]()
    if a.json:
        json.dump([dict(r, matmul_precision=a.matmul_precision) for r in rows], open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
