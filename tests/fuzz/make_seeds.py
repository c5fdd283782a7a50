#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets into tests/fuzz/corpus/TARGET/seed-*: one small valid
example of every format each target parses (the committed corpus; crash regressions sit beside them
as crash-*). Standard library only. Usage: make_seeds.py [CORPUS_DIR]"""
import gzip
import io
import json
import os
import struct
import sys
import zipfile

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
here = os.path.dirname(os.path.abspath(__file__))
project = os.path.dirname(os.path.dirname(here))


def put(target, name, data):
    os.makedirs(os.path.join(root, target), exist_ok=True)
    with open(os.path.join(root, target, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def read(path):
    with open(os.path.join(project, path), "rb") as f:
        return f.read()


# config: YAML, then NUL-separated --set overrides.
tiny = read("tests/data/tiny.yaml")
put("config", "tiny", tiny)
put("config", "tiny-overrides", tiny + b"\0train.lr=0.01\0model.type=lstm")
put("config", "quickstart", read("configs/quickstart.yaml"))
put("config", "classify", read("tests/data/classify_tiny.yaml") + b"\0data.fold=1")
put("config", "translate", read("configs/translate/multi30k-sru-4.yaml"))
put("config", "squad", read("tests/data/squad_tiny.yaml"))


# safetensors: a srutrain checkpoint's layout with two small tensors and the training metadata.
def safetensors(tensors, metadata):
    header, blob = {}, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + blob


meta = {"format": "srutrain", "format_version": "1", "config": tiny.decode(), "step": "6", "epoch": "0",
        "step_in_epoch": "6", "rng_seed": "5", "rng_offset": "1024", "best_metric": "7.5", "best_step": "6",
        "evals_without_improvement": "0", "last_eval_step": "6", "vocabulary": "bytes-256"}
tensors = {"embedding.weight": ("F32", [4, 2], struct.pack("<8f", *range(8))),
           "optim.step": ("I64", [1], struct.pack("<q", 6)),
           "task.vocab": ("I32", [3], struct.pack("<3i", 97, 10, 98))}
put("safetensors", "checkpoint", safetensors(tensors, meta))
put("safetensors", "plain", safetensors({"w": ("F64", [2], struct.pack("<2d", 1.5, -2))}, {}))

# zip_gzip: deflated and stored zip members (one ZIP64), gzip, plain.
text = b"<mediawiki>\n  <page>\n    <title>A</title>\n  </page>\n</mediawiki>\n" * 3
for name, kw in [("deflate", {"compression": zipfile.ZIP_DEFLATED}), ("stored", {"compression": zipfile.ZIP_STORED})]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", **kw) as z:
        z.writestr("enwik8", text)
    put("zip_gzip", name, buf.getvalue())
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
    with z.open("enwik8", "w", force_zip64=True) as f:
        f.write(text)
put("zip_gzip", "zip64", buf.getvalue())
put("zip_gzip", "gzip", gzip.compress(text, mtime=0))
put("zip_gzip", "plain", text)

# text_readers: labelled sentences, words, a parallel pair (source NUL target).
put("text_readers", "labeled", "1 a good movie .\n0 a bad film\r\n1 fine\n")
put("text_readers", "words", " the cat sat on the mat \n the dog <unk> ran \n")
put("text_readers", "parallel", "a man is walking .\nzwei hunde\n\0ein mann geht .\ntwo dogs\n")
put("text_readers", "utf8", "\ufeffcaf\u00e9 \u00fcber\n\u4e2d\u6587 \U0001f600\n".encode())

# squad_json: a SQuAD v1.1 file and a predictions file.
squad = {"version": "1.1", "data": [{"title": "T", "paragraphs": [{
    "context": "The cat sat on the mat in Paris.",
    "qas": [{"id": "q1", "question": "Where did the cat sit?", "answers": [{"answer_start": 15, "text": "the mat"}]},
            {"id": "q2", "question": "Which city?", "answers": [{"answer_start": 26, "text": "Paris"}]}]}]}]}
put("squad_json", "dataset", json.dumps(squad))
put("squad_json", "predictions", json.dumps({"q1": "the mat", "q2": "Paris"}))
sample_predictions = os.path.join(project, "tests/data/squad_sample_predictions.json")
if os.path.getsize(sample_predictions) < 8192:
    put("squad_json", "sample-predictions", read("tests/data/squad_sample_predictions.json"))

# word_vectors: GloVe text, fastText text with a header, word2vec binary.
put("word_vectors", "glove", "the 0.1 -0.2 0.3\na 1e-3 2 3\nx 0 0 0\n")
put("word_vectors", "fasttext", "3 2\nthe 0.5 0.25\na -1 1\n</s> 0 0\n")
put("word_vectors", "word2vec", b"2 2\nthe " + struct.pack("<2f", 0.5, -0.5) + b"a " + struct.pack("<2f", 1, 2) + b"\n")

# checkpoint_strings: vocabularies as checkpoints store them.
put("checkpoint_strings", "vocabulary", "the\ncat\n.\n")
put("checkpoint_strings", "words", "<unk>\n<eos>\nthe\ncat\n")
