#!/usr/bin/env bash
# The layering of src/ (docs/architecture.md, "Layers"): (a) no #include from a lower layer to a higher
# one; (b) no task name and no encoder name in src/apps/ or src/train/, which reach tasks and encoders
# through the registries only. The names come from the registries' sources (the TaskSpec functions of
# src/tasks/*.cpp, the EncoderSpec functions of src/nn/*.cpp), so a new entry is covered without an
# edit here. Prints every violation as FILE:LINE. Usage: layering.sh SOURCE_DIR
set -euo pipefail
root=${1:?usage: $0 SOURCE_DIR}

python3 - "$root" <<'PY'
import os, re, sys

root = sys.argv[1]
src = os.path.join(root, "src")

# ---- (a) includes ----
# docs/architecture.md: core <- autograd <- ops <- nn <- (optim, config) <- dist <- tasks <- train <- apps.
# What each directory of src/ may include besides itself. Layers of one rank (optim, config) do not
# include each other. The others, read from the docs and the code:
#   data   - the data readers: on core alone, beside the chain; used by tasks and everything above them.
#   search - (new) above nn, below tasks: on core, autograd, ops, nn; used by tasks and above.
#   bench  - benchmark timing and reporting (library sru_bench): may use every library layer; used by
#            apps only.
CHAIN = ["core", "autograd", "ops", "nn"]
ALLOWED = {
    "core": [],
    "autograd": ["core"],
    "ops": ["core", "autograd"],
    "nn": CHAIN[:3],
    "optim": CHAIN,
    "config": CHAIN,
    "search": CHAIN,
    "data": ["core"],
    "dist": CHAIN + ["optim", "config"],
}
ALLOWED["tasks"] = ALLOWED["dist"] + ["dist", "search", "data"]
ALLOWED["train"] = ALLOWED["tasks"] + ["tasks"]
ALLOWED["bench"] = ALLOWED["train"] + ["train"]
ALLOWED["apps"] = ALLOWED["bench"] + ["bench"]
# The documented exceptions (docs/architecture.md, "Layers"): config/schema.h and config/options.h (a
# typed key list and its holder, no other dependencies) are used by nn, so that an encoder declares
# its config keys next to its module; so they may be included wherever nn may be.
EXCEPTIONS = {"config/schema.h": "nn", "config/options.h": "nn"}

SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inc")

def source_files(layer):
    """(path, path relative to root) of each source file under src/<layer>, by directory, sorted within one."""
    for dirpath, _, files in os.walk(os.path.join(src, layer)):
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                path = os.path.join(dirpath, f)
                yield path, os.path.relpath(path, root)

violations = []
layers = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
for layer in layers:
    if layer not in ALLOWED:
        violations.append(f"src/{layer}/: a directory that is not in the layer table of tests/lint/layering.sh "
                          "(add it where docs/architecture.md's Layers line puts it)")
        continue
    for path, rel in source_files(layer):
        for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
            m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
            if not m or "/" not in m.group(1):
                continue
            target = m.group(1)
            to = target.split("/")[0]
            if not os.path.isdir(os.path.join(src, to)) or to == layer:
                continue  # not a directory of src/ (a generated or third-party file), or the same layer
            if to in ALLOWED[layer]:
                continue
            if target in EXCEPTIONS and (EXCEPTIONS[target] == layer or EXCEPTIONS[target] in ALLOWED[layer]):
                continue
            violations.append(f"{rel}:{n}: {layer} includes \"{target}\" ({to} is not below {layer})")

# ---- (b) task and encoder names in src/apps and src/train ----
def lex(text):
    """(kind, text, line) of each code token, string literal and character literal; comments dropped."""
    i, line, out, n = 0, 1, [], len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1; i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2); j = n if j < 0 else j + 2
            line += text.count("\n", i, j); i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i-1].isalnum() or text[i-1] == "_")):
            k = text.find("(", i + 2); delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k); j = n if j < 0 else j + len(delim)
            out.append(("string", text[k + 1:j - len(delim)], line)); line += text.count("\n", i, j); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(("string" if c == '"' else "char", text[i + 1:j], line)); i = j + 1
        elif c.isspace():
            i += 1
        elif c.isalnum() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            out.append(("code", text[i:j], line)); i = j
        else:
            out.append(("punct", c, line)); i += 1
    return out

def closing(toks, j, open_, close):
    """The position of the token that closes the open_ token at toks[j] (len(toks) when none does)."""
    depth = 0
    while j < len(toks):
        if toks[j][:2] == ("punct", open_): depth += 1
        if toks[j][:2] == ("punct", close):
            depth -= 1
            if depth == 0: break
        j += 1
    return j

KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof", "noexcept",
            "static_assert", "requires"}

def spec_names(directory, spec_type):
    """The names the spec_type functions of directory/*.cpp give their entries: per function the first
    name-like string literal of its body, or, when its body has none (the name comes from a helper),
    the name-like literals of the same file's functions it calls."""
    name_like = re.compile(r"[a-z][a-z0-9_]*(?:[+-][a-z0-9_]+)*")
    names, problems = {}, []
    for f in sorted(os.listdir(directory)):
        if not f.endswith(".cpp"):
            continue
        path = os.path.join(directory, f)
        toks = lex(open(path, encoding="utf-8", errors="replace").read())
        bodies = {}  # function name -> its body's tokens (every function defined in the file)
        specs = []
        for k in range(len(toks) - 3):
            if toks[k][0] == "code" and toks[k][1] not in KEYWORDS and toks[k + 1][:2] == ("punct", "("):
                # name ( ... ) [const] { : a definition
                j = closing(toks, k + 1, "(", ")") + 1
                if j < len(toks) and toks[j][1] == "const": j += 1
                if j >= len(toks) or toks[j][:2] != ("punct", "{"):
                    continue
                b = closing(toks, j, "{", "}")
                body = toks[j:b + 1]
                bodies.setdefault(toks[k][1], body)
                if k >= 1 and toks[k - 1][:2] == ("code", spec_type) and toks[k + 2][1] == ")":
                    specs.append((toks[k][1], body, toks[k][2]))
        for fn, body, line in specs:
            own = [t[1] for t in body if t[0] == "string" and name_like.fullmatch(t[1])]
            if own:
                found = own[:1]
            else:
                called = {a[1] for a, t in zip(body, body[1:]) if a[0] == "code" and t[:2] == ("punct", "(")}
                found, seen, todo = [], set(), sorted(called & bodies.keys())
                while todo:  # the helpers it calls, and theirs
                    h = todo.pop()
                    if h in seen: continue
                    seen.add(h)
                    hb = bodies[h]
                    found += [t[1] for t in hb if t[0] == "string" and name_like.fullmatch(t[1])]
                    todo += sorted({a[1] for a, t in zip(hb, hb[1:]) if a[0] == "code" and t[:2] == ("punct", "(")}
                                   & bodies.keys() - seen)
            if not found:
                problems.append(f"{os.path.relpath(path, root)}:{line}: cannot find the name {fn}() gives its "
                                f"{spec_type} (tests/lint/layering.sh reads it from a string literal)")
            for name in found:
                names.setdefault(name, f"{spec_type} in {os.path.relpath(path, root)}")
    return names, problems

tasks, p1 = spec_names(os.path.join(src, "tasks"), "TaskSpec")
encoders, p2 = spec_names(os.path.join(src, "nn"), "EncoderSpec")
violations += p1 + p2
if not tasks or not encoders:
    violations.append(f"found {len(tasks)} task and {len(encoders)} encoder names: the registries' sources moved?")
print("task names:", ", ".join(sorted(tasks)))
print("encoder names:", ", ".join(sorted(encoders)))
names = {**{n: "task" for n in tasks}, **{n: "encoder" for n in encoders}}

# Files left out of (b), each with its reason; their hits are printed as notes, not counted.
EXEMPT = {}
# Words that name a capability (an interface of tasks/task.h that srueval asks any task for) and happen
# to be a task's name too: allowed in string literals (option names, messages), never as identifiers.
CAPABILITY_WORDS = {"translate": "srueval --translate asks the task for its Translates capability"}
notes = []

# Identifier-like tokens: letters, digits and _, joined by single - or + (so "embed-sru" is one token and
# "squad-score" is not "squad"); case-sensitive, as the names are (prose "SRU" or "LSTM" is not a name).
token = re.compile(r"[A-Za-z0-9_]+(?:[-+][A-Za-z0-9_]+)*")
for layer in ("apps", "train"):
    for path, rel in source_files(layer):
        toks = lex(open(path, encoding="utf-8", errors="replace").read())
        found = notes if rel in EXEMPT else violations
        for k, (kind, text, line) in enumerate(toks):
            if kind == "code":
                if text not in names:
                    continue
                # The project's namespace is not the encoder: `sru::`, `namespace sru`.
                nxt = toks[k + 1][1] + toks[k + 2][1] if k + 2 < len(toks) else ""
                if text == "sru" and (nxt == "::" or (k > 0 and toks[k - 1][1] == "namespace")):
                    continue
                found.append(f"{rel}:{line}: identifier {text} is the {names[text]} name '{text}'")
            elif kind in ("string", "char"):
                for m in token.finditer(text):
                    if m.group(0) in names and m.group(0) not in CAPABILITY_WORDS:
                        found.append(f"{rel}:{line}: string \"{text}\" names the {names[m.group(0)]} "
                                     f"'{m.group(0)}'")

for rel, why in EXEMPT.items():
    hits = [h for h in notes if h.startswith(rel + ":")]
    print(f"note: {rel} is exempt from the name check ({why}); {len(hits)} hit(s) there:")
    for h in hits:
        print("  " + h)
if violations:
    print(f"{len(violations)} layering violation(s):")
    for v in violations:
        print("  " + v)
    sys.exit(1)
print("ok: includes follow the layers; src/apps and src/train name no task or encoder")
PY
