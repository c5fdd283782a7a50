#!/usr/bin/python3
"""Check an SRU++ char-LM checkpoint of srutrain against the reference PyTorch SRUpp.

What it checks: that srueval's bits per character of a text, for a srutrain `charlm` checkpoint with
`model.type: srupp` (e.g. tests/data/fixtures/srupp-memory.safetensors: pre-norm layer norm, an
attention memory of model.memory_length rows, attention in every layer), equal what the reference
implementation computes with the same weights: `sru.SRUpp` of asappresearch/sru, branch 3.0.0-dev
(sru/modules.py), wrapped as the reference's enwik8 model (experiments/srupp_experiments/train_enwik8.py:
embedding -> SRUpp -> output linear, cross-entropy), evaluated as that script's `eval_model` does: one
stream from a zero state, chunk by chunk, the memory of each layer being the layer's raw inputs
(`saved_inputs`) that the previous call returned, with the reference's same-length evaluation mask
(`Model.set_mask(mem_length, same_length=True)`: query at position p sees keys p - M .. p, additive
-10000 elsewhere). The reference normalises (pre-norm `layer_norm`) only the current segment, not the
memory rows it concatenates, so its numbers are srutrain's with `--set model.normalize_memory=false`.

The reference evaluates with memory = the whole previous chunk, i.e. its memory length is its chunk
length. srutrain keeps exactly M = model.memory_length rows; this script therefore keeps the last M
saved inputs of each layer (previous memory + current inputs) and builds the same-length mask with
window M for any chunk length (with --chunk M this is exactly the reference's own eval_model). Rows
older than M are masked anyway by the same-length mask, so truncating them changes nothing.

How to run (from the repository root), e.g.:

    /usr/bin/python3 scripts/check_srupp_reference.py --sru-src /tmp/sru-ref \
        --checkpoint tests/data/fixtures/srupp-memory.safetensors --text tests/data/fixtures/text.txt \
        --srueval ./build/srueval

It prints the reference's bpc (float32 through the reference's compiled CPU kernel, and float64
through its pure-PyTorch recurrence), and, with --srueval, srueval's bpc with
model.normalize_memory=false and with the default (true) at the same chunk, and their differences.
It also runs the reference fed its memory rows through each layer's pre-norm LayerNorm (the memory
tensors handed to SRUpp.forward normalised; what is carried stays raw): that is srutrain's default
convention, and equals the reference run on the whole stream in one chunk. Exit status 1 if
|srueval(normalize_memory=false) - reference| or |srueval(default) - normalised reference| (float64)
exceeds --tol (default 1e-5).

What it needs: PyTorch for /usr/bin/python3 (Debian `apt-get install python3-torch`, numpy comes with
it; g++ and ninja for the reference's JIT-compiled CPU kernel sru/csrc/sru_cpu_impl.cpp, which
`sru.ops` compiles on import; the CUDA kernel is not needed: its load fails with a warning), and the
reference source: the `sru/` package of github.com/asappresearch/sru at branch 3.0.0-dev, e.g.

    git clone -b 3.0.0-dev https://github.com/asappresearch/sru /tmp/sru-ref  # --sru-src /tmp/sru-ref

(--sru-src is the directory that holds sru/; any checkout or `git archive 3.0.0-dev sru` export works)

(checked with the branch's head c2d44e6 "config consistency", torch 1.13 of Debian 12).
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def read_safetensors(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop('__metadata__', {})
    dtypes = {'F32': np.float32, 'F64': np.float64, 'I64': np.int64, 'I32': np.int32,
              'F16': np.float16, 'U8': np.uint8}
    tensors = {}
    for name, info in header.items():
        b, e = info['data_offsets']
        arr = np.frombuffer(data[b:e], dtype=dtypes[info['dtype']]).reshape(info['shape'])
        tensors[name] = arr.copy()
    return tensors, meta


def parse_config(text):
    try:
        import yaml
        return yaml.safe_load(text)
    except ImportError:  # a two-level mapping of scalars is all the stored config holds
        cfg, section = {}, None
        for line in text.splitlines():
            if not line.strip():
                continue
            key, _, val = line.strip().partition(':')
            val = val.strip()
            if not line.startswith(' '):
                section = cfg.setdefault(key, {}) if not val else None
                if val:
                    cfg[key] = val.strip('"')
                continue
            if val.startswith('"'):
                v = val.strip('"')
            elif val in ('true', 'false'):
                v = val == 'true'
            else:
                try:
                    v = int(val)
                except ValueError:
                    try:
                        v = float(val)
                    except ValueError:
                        v = val
            section[key] = v
        return cfg


def build_reference(torch, sru, tensors, model_cfg):
    nn = torch.nn
    m = model_cfg
    emb_w = tensors['embedding.weight']
    vocab, emb_size = emb_w.shape
    hidden = m['hidden_size']
    num_layers = m['num_layers']
    proj = tensors['rnn.rnn_lst.0.transform_module.linear1.weight'].shape[0]
    assert m['type'] == 'srupp', m['type']
    assert not m['bidirectional']
    assert not m.get('tie_weights', False)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, emb_size)
            self.rnn = sru.SRUpp(
                emb_size, hidden, proj,
                num_layers=num_layers,
                dropout=0.0,
                attn_dropout=0.0,
                num_heads=m['num_heads'],
                bidirectional=False,
                layer_norm=m['layer_norm'],
                normalize_after=m['normalize_after'],
                attn_layer_norm=m['attn_layer_norm'],
                highway_bias=m['highway_bias'],
                attention_every_n_layers=m['attention_every_n_layers'],
                attention_last_n_layers=m['attention_last_n_layers'],
                rescale=m['rescale'],
                proj_input_to_hidden_first=m['proj_input_to_hidden_first'],
                weight_c_init=m['weight_c_init'],
            )
            self.output = nn.Linear(hidden, vocab)

    model = Model()
    state = {k: torch.from_numpy(v) for k, v in tensors.items()
             if k.startswith(('embedding.', 'rnn.', 'output.'))}
    model.load_state_dict(state, strict=True)  # every name and shape must match
    model.eval()
    return model


def same_length_mask(torch, mem_len, length, window, same_length, dtype):
    """The reference's additive evaluation mask (train_enwik8.py Model.set_mask) for a chunk of
    `length` queries after `mem_len` memory rows: query at p = mem_len + i sees key j iff j <= p and,
    with same_length, j >= p - window."""
    p = torch.arange(mem_len, mem_len + length).unsqueeze(1)
    j = torch.arange(mem_len + length).unsqueeze(0)
    hidden = j > p
    if same_length:
        hidden = hidden | (j < p - window)
    return hidden.to(dtype) * -10000.0


def evaluate(torch, model, tokens, chunk, mem_length, same_length, dtype, normalize_memory=False):
    """Bits per character of the stream `tokens` (predicting tokens[1:]) from a zero state.
    normalize_memory: hand each layer its memory rows through the layer's own pre-norm LayerNorm
    (srutrain's default convention) instead of raw (the reference's)."""
    F = torch.nn.functional
    model = model.to(dtype)
    x_all = torch.tensor(tokens[:-1], dtype=torch.long)
    y_all = torch.tensor(tokens[1:], dtype=torch.long)
    num_layers = model.rnn.num_layers
    hidden = None
    memory = [None] * num_layers
    total = 0.0
    for s in range(0, len(x_all), chunk):
        x = x_all[s:s + chunk].unsqueeze(1)  # (L, B=1)
        y = y_all[s:s + chunk]
        mem_len = 0 if memory[0] is None else memory[0].size(0)
        mask = same_length_mask(torch, mem_len, x.size(0), mem_length, same_length, dtype)
        emb = model.embedding(x)
        mem = memory
        if mem_len and normalize_memory:
            mem = [m if m is None or cell.layer_norm is None or cell.normalize_after
                   else cell.layer_norm(m) for m, cell in zip(memory, model.rnn.rnn_lst)]
        out, hidden, mem_dict = model.rnn(emb, hidden, memory=mem if mem_len else None,
                                          attn_mask=mask)
        logits = model.output(out).view(-1, model.output.out_features)
        total += F.cross_entropy(logits.double(), y, reduction='sum').item()
        new_memory = []
        for i, inp in enumerate(mem_dict['saved_inputs']):
            full = inp if memory[i] is None else torch.cat([memory[i], inp], dim=0)
            new_memory.append(full[-mem_length:].detach())  # srutrain keeps the last M inputs
        memory = new_memory
    return total / len(y_all) / math.log(2)


def run_srueval(srueval, checkpoint, text, chunk, sets):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, 'm.json')
        cmd = [srueval, '--threads', '1', '--checkpoint', checkpoint, '--text', text,
               '--chunk', str(chunk), '--json', out]
        for s in sets:
            cmd += ['--set', s]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)['metrics']['bpc']


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sru-src', default='/tmp/sru-ref',
                    help='directory holding the reference sru/ package (3.0.0-dev)')
    ap.add_argument('--checkpoint', default='tests/data/fixtures/srupp-memory.safetensors')
    ap.add_argument('--text', default='tests/data/fixtures/text.txt')
    ap.add_argument('--chunk', type=int, default=0, help='tokens per forward (default data.bptt)')
    ap.add_argument('--srueval', default='', help='srueval binary to compare with (optional)')
    ap.add_argument('--tol', type=float, default=1e-5)
    args = ap.parse_args()

    sys.path.insert(0, args.sru_src)
    import warnings
    warnings.filterwarnings('ignore')  # the CUDA kernel's failed load; the CPU grad-mode note
    import torch
    import sru
    torch.set_num_threads(1)

    tensors, meta = read_safetensors(args.checkpoint)
    cfg = parse_config(meta['config'])
    mcfg = cfg['model']
    chunk = args.chunk or cfg['data']['bptt']
    mem_length = mcfg['memory_length']
    assert mem_length > 0, 'this check is about the memory path'
    same_length = mcfg.get('same_length', True)
    with open(args.text, 'rb') as f:
        tokens = list(f.read())

    model = build_reference(torch, sru, tensors, mcfg)
    print(f'reference: sru {sru.__version__}, torch {torch.__version__}; SRUpp layers '
          f'{mcfg["num_layers"]}, heads {mcfg["num_heads"]}, layer_norm {mcfg["layer_norm"]} '
          f'(normalize_after {mcfg["normalize_after"]}), memory {mem_length}, '
          f'same_length {same_length}, chunk {chunk}, {len(tokens) - 1} predictions')
    with torch.no_grad():  # the reference's inference path: compiled CPU kernel, float32
        ref32 = evaluate(torch, model, tokens, chunk, mem_length, same_length, torch.float32)
    with torch.enable_grad():  # grad mode selects the reference's pure-PyTorch recurrence
        ref64 = evaluate(torch, model, tokens, chunk, mem_length, same_length, torch.float64)
        ref64n = evaluate(torch, model, tokens, chunk, mem_length, same_length, torch.float64,
                          normalize_memory=True)
    print(f'reference bpc float32 (CPU kernel)      {ref32!r}')
    print(f'reference bpc float64 (PyTorch loop)    {ref64!r}')
    print(f'reference float64, memory rows normed   {ref64n!r}  (srutrain\'s default convention)')
    if not args.srueval:
        return 0
    ours_raw = run_srueval(args.srueval, args.checkpoint, args.text, chunk,
                           ['model.normalize_memory=false'])
    ours_def = run_srueval(args.srueval, args.checkpoint, args.text, chunk, [])
    print(f'srueval normalize_memory=false          {ours_raw!r}  (- ref64 = {ours_raw - ref64:+.3e}, '
          f'- ref32 = {ours_raw - ref32:+.3e})')
    print(f'srueval default (normalize_memory=true) {ours_def!r}  (- ref64 = {ours_def - ref64:+.3e}, '
          f'- normed ref = {ours_def - ref64n:+.3e})')
    ok = abs(ours_raw - ref64) <= args.tol and abs(ours_def - ref64n) <= args.tol
    print('OK' if ok else f'MISMATCH: a difference above {args.tol}')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
