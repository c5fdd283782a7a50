#!/usr/bin/env python3
"""Check SRU char-LM checkpoints of srutrain against the reference PyTorch package `sru` v2.6 (and the
LSTM baseline's against torch.nn.LSTM).

What it checks: that a srutrain `charlm` checkpoint with `model.type: sru` loads into the reference's
`sru.SRU` by name and shape (`load_state_dict(strict=True)`: the contract of docs/checkpoint-format.md),
wrapped as embedding -> SRU -> output linear, and that the reference then gives the bits per character
srueval gives on a text: one stream from a zero state, `--chunk` tokens a forward with the cell states
carried, cross-entropy summed. The reference runs on the CPU in float32 (its compiled inference kernel)
and in float64 (its pure-PyTorch recurrence, `elementwise_recurrence_naive` under grad mode).

Checkpoints: --checkpoint (default tests/data/fixtures/sru.safetensors: the SRU's default options), and
with --srutrain also one trained here (tests/data/fixtures/charlm.yaml, 12 steps) with every stack option
that changes the parameters or the computation: proj_input_to_hidden_first, weight_c_init,
projection_size, layer_norm, rescale, highway_bias. --lstm-checkpoint (default
tests/data/fixtures/lstm.safetensors; empty to skip): a `model.type: lstm` char-LM loaded into
torch.nn.LSTM (weight_ih_l{k}, ..., gate order i, f, g, o), its (h, c) carried, in float32 and float64.

How to run (from the repository root):

    python3 -m pip install torch safetensors numpy   # test-only; PyPI
    git clone https://github.com/asappresearch/sru /tmp/sru-ref   # --sru-src: the directory holding sru/
    python3 scripts/check_sru_reference.py --sru-src /tmp/sru-ref --srueval build/srueval --srutrain build/srutrain

`import sru` JIT-compiles the reference's CPU inference kernel (g++, ninja), which the float32 pass uses.
Exit status 1 when |srueval - reference float64| exceeds --tol (default 1e-5) for any checkpoint.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_srupp_reference import parse_config, read_safetensors, run_srueval  # noqa: E402

# The stack options of the second checkpoint (--srutrain): each changes names, shapes or the math.
OPTIONS_UNDER_TEST = ['model.proj_input_to_hidden_first=true', 'model.weight_c_init=0.3', 'model.projection_size=6',
                      'model.layer_norm=true', 'model.rescale=true', 'model.highway_bias=-2']


def build_reference(torch, sru, tensors, m):
    nn = torch.nn
    assert m['type'] in ('sru', 'lstm'), m['type']
    assert not m['bidirectional'] and not m.get('tie_weights', False)
    vocab, emb_size = tensors['embedding.weight'].shape
    weight_c_init = m.get('weight_c_init', -1.0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, emb_size)
            if m['type'] == 'lstm':
                self.rnn = nn.LSTM(emb_size, m['hidden_size'], num_layers=m['num_layers'])
            else:
                self.rnn = sru.SRU(emb_size, m['hidden_size'], num_layers=m['num_layers'], dropout=0.0,
                                   projection_size=m['projection_size'], use_tanh=m['use_tanh'],
                                   layer_norm=m['layer_norm'], highway_bias=m['highway_bias'],
                                   has_skip_term=m['has_skip_term'], rescale=m['rescale'], v1=m['v1'],
                                   normalize_after=m['normalize_after'],
                                   weight_c_init=None if weight_c_init < 0 else weight_c_init,
                                   proj_input_to_hidden_first=m.get('proj_input_to_hidden_first', False))
            self.output = nn.Linear(m['hidden_size'], vocab)

    model = Model()
    state = {k: torch.from_numpy(v) for k, v in tensors.items() if k.startswith(('embedding.', 'rnn.', 'output.'))}
    model.load_state_dict(state, strict=True)  # every name and shape must match
    model.eval()
    return model


def evaluate(torch, model, tokens, chunk, dtype):
    """Bits per character of `tokens` (predicting tokens[1:]) from a zero state, chunk by chunk. The
    reference picks its recurrence by grad mode: without grad its compiled CPU kernel (float32 only),
    with grad its pure-PyTorch loop, which float64 runs (the state is detached between chunks)."""
    F = torch.nn.functional
    model = model.to(dtype)
    x_all = torch.tensor(tokens[:-1], dtype=torch.long)
    y_all = torch.tensor(tokens[1:], dtype=torch.long)
    c = None
    total = 0.0
    with torch.set_grad_enabled(dtype == torch.float64):
        for s in range(0, len(x_all), chunk):
            x = x_all[s:s + chunk].unsqueeze(1)  # (L, B = 1)
            out, c = model.rnn(model.embedding(x), c)  # c: the SRU's cell states, the LSTM's (h, c)
            c = tuple(t.detach() for t in c) if isinstance(c, tuple) else c.detach()
            logits = model.output(out).view(-1, model.output.out_features)
            total += F.cross_entropy(logits.double(), y_all[s:s + chunk], reduction='sum').item()
    return total / len(y_all) / math.log(2)


def train_with_options(srutrain, work):
    cmd = [srutrain, '--config', 'tests/data/fixtures/charlm.yaml', '--run-dir', os.path.join(work, 'run')]
    for s in OPTIONS_UNDER_TEST:
        cmd += ['--set', s]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return os.path.join(work, 'run', 'last.safetensors')


def check(torch, sru, checkpoint, text, chunk_arg, srueval, tol):
    tensors, meta = read_safetensors(checkpoint)
    cfg = parse_config(meta['config'])
    m = cfg['model']
    chunk = chunk_arg or cfg['data']['bptt']
    with open(text, 'rb') as f:
        tokens = list(f.read())
    model = build_reference(torch, sru, tensors, m)
    if m['type'] == 'lstm':
        print(f'{checkpoint}: loads into torch.nn.LSTM by name and shape (strict); layers {m["num_layers"]}, '
              f'hidden {m["hidden_size"]}; chunk {chunk}, {len(tokens) - 1} predictions')
    else:
        print(f'{checkpoint}: loads into sru.SRU by name and shape (strict); layers {m["num_layers"]}, hidden '
              f'{m["hidden_size"]}, projection {m["projection_size"]}, layer_norm {m["layer_norm"]}, rescale '
              f'{m["rescale"]}, weight_c_init {m.get("weight_c_init")}, proj_input_to_hidden_first '
              f'{m.get("proj_input_to_hidden_first")}; chunk {chunk}, {len(tokens) - 1} predictions')
    ref32 = evaluate(torch, model, tokens, chunk, torch.float32)
    ref64 = evaluate(torch, model, tokens, chunk, torch.float64)
    print(f'  reference bpc float32 {ref32!r}, float64 {ref64!r}')
    if not srueval:
        return True
    ours = run_srueval(srueval, checkpoint, text, chunk, [])
    ok = abs(ours - ref64) <= tol
    print(f'  srueval bpc           {ours!r} (- float64 {ours - ref64:+.3e}, - float32 {ours - ref32:+.3e}): '
          f'{"OK" if ok else "MISMATCH"}')
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sru-src', default='/tmp/sru-ref', help='directory holding the reference sru/ package (v2.6)')
    ap.add_argument('--checkpoint', default='tests/data/fixtures/sru.safetensors')
    ap.add_argument('--lstm-checkpoint', default='tests/data/fixtures/lstm.safetensors',
                    help='an LSTM char-LM checkpoint to check against torch.nn.LSTM ("" to skip)')
    ap.add_argument('--text', default='tests/data/fixtures/text.txt')
    ap.add_argument('--chunk', type=int, default=0, help='tokens per forward (default data.bptt)')
    ap.add_argument('--srueval', default='', help='srueval binary to compare with (optional)')
    ap.add_argument('--srutrain', default='', help='srutrain binary: also train and check a checkpoint with the '
                                                   'stack options on')
    ap.add_argument('--tol', type=float, default=1e-5)
    args = ap.parse_args()

    sys.path.insert(0, args.sru_src)
    import warnings
    warnings.filterwarnings('ignore')  # the CUDA kernel's failed load, TorchScript's deprecation
    import torch
    import sru
    torch.set_num_threads(1)
    print(f'reference: sru {sru.__version__}, torch {torch.__version__}')
    ok = check(torch, sru, args.checkpoint, args.text, args.chunk, args.srueval, args.tol)
    if args.lstm_checkpoint:
        ok = check(torch, sru, args.lstm_checkpoint, args.text, args.chunk, args.srueval, args.tol) and ok
    if args.srutrain:
        with tempfile.TemporaryDirectory() as work:
            trained = train_with_options(args.srutrain, work)
            ok = check(torch, sru, trained, args.text, args.chunk, args.srueval, args.tol) and ok
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
