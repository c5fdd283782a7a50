#!/usr/bin/env python3
"""Lint: no function in src/ longer than 80 lines (issue 40), except the declarative tables listed below.

A function is a definition: a signature (over one or more lines) ending with '{' after a ')', either at
namespace level (starting in column 0, `template <...>` and attributes allowed before it) or inside a
class body (indented, with a return type or a constructor's name before the '('; control statements
are not definitions). Its length counts its lines from the signature's first to the closing brace.
Braces inside string and character literals and comments are not counted.
Usage: function_length.py SOURCE_DIR [--max 80]
"""
import argparse
import os
import re
import sys

# Functions that are tables: one entry after another, nothing to split (file, function name).
DECLARATIVE_TABLES = {
    ("src/ops/op_table.cpp", "build"),       # the op table's entries
    ("src/config/config.cpp", "schema"),     # the config keys with their types, defaults and help
}

END_OF_SIGNATURE = re.compile(r'\)\s*(?:const\s*)?(?:override\s*)?(?:final\s*)?(?:noexcept\s*)?(?:->\s*[^{;]+)?'
                              r'(?::\s*[^{;]*)?\{\s*$')
NAME = re.compile(r'([A-Za-z_~][A-Za-z_0-9:~]*)\s*\($')
PREFIX = re.compile(r'^\s*(?:template\s*<[^{;]*?>\s*|\[\[[^\]]*\]\]\s*|extern\s+"C"\s*)+')
NOT_DEFINITIONS = ("if", "for", "while", "switch", "catch", "return", "else", "do", "sizeof", "decltype",
                   "static_assert", "alignof", "new", "delete", "throw", "case")
SKIP = ("namespace", "struct", "class", "enum", "union", "#", "using", "typedef", "public:", "private:",
        "protected:", "}")


def strip_code(text):
    """The text with string and character literals and comments blanked (newlines kept), scanned
    character by character so that a literal holding /* or // is not taken for a comment."""
    out, i, n = [], 0, len(text)
    state = None  # None, '"', "'", '//', '/*'
    while i < n:
        ch = text[i]
        two = text[i:i + 2]
        if state is None:
            if two == "//":
                state, i = "//", i + 2
                continue
            if two == "/*":
                state, i = "/*", i + 2
                continue
            if ch in "\"'":
                state = ch
            out.append(ch if ch not in "\"'" else " ")
        elif state in "\"'":
            if ch == "\\":
                out.append(" " if text[i + 1:i + 2] != "\n" else "\n")
                i += 2
                continue
            if ch == state:
                state = None
            out.append("\n" if ch == "\n" else " ")
        elif state == "//":
            if ch == "\n":
                state = None
                out.append("\n")
        elif state == "/*":
            if two == "*/":
                state, i = None, i + 2
                continue
            out.append("\n" if ch == "\n" else " ")
        i += 1
    return "".join(out)


def definition_name(signature, indented):
    """The function's name when `signature` (joined lines) is a definition, else None."""
    sig = PREFIX.sub("", signature).strip()
    if not sig or sig.startswith(SKIP) or not END_OF_SIGNATURE.search(sig):
        return None
    head = sig.split("(")[0].rstrip() + "("
    m = NAME.search(head)
    if not m:
        return None
    name = m.group(1).split("::")[-1]
    if name in NOT_DEFINITIONS or "=" in head or "." in head or "->" in head:
        return None
    before = head[:m.start()].strip()
    # Inside a class: a return type (or a constructor, named like nothing before it) must be there, and
    # the line must not be a call statement or a lambda's body.
    if indented and not before and not re.match(r'^[A-Za-z_~]', sig):
        return None
    return name


def long_functions(path, rel, limit):
    clean = strip_code(open(path, encoding="utf-8", errors="replace").read()).split("\n")
    found = []
    i = 0
    while i < len(clean):
        line = clean[i]
        indented = line[:1].isspace()
        if not line.strip() or "(" not in line or line.strip().startswith(SKIP):
            i += 1
            continue
        # A signature may run over several lines: up to the one ending in '{' (a definition) or holding ';'.
        k = i
        while k < len(clean) and k - i < 12 and not clean[k].rstrip().endswith("{") and ";" not in clean[k]:
            k += 1
        if k >= len(clean) or ";" in clean[k] or not clean[k].rstrip().endswith("{"):
            i += 1
            continue
        name = definition_name(" ".join(c.strip() for c in clean[i:k + 1]), indented)
        if name is None:
            i += 1
            continue
        depth, j = 0, k
        while j < len(clean):
            depth += clean[j].count("{") - clean[j].count("}")
            if depth == 0:
                break
            j += 1
        length = j - i + 1
        if length > limit and (rel, name) not in DECLARATIVE_TABLES:
            found.append((length, rel, i + 1, name))
        # Inside a class body, keep scanning within this definition's lines for nothing: skip past it.
        i = j + 1
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source_dir")
    p.add_argument("--max", type=int, default=80)
    a = p.parse_args()
    found = []
    for root, _, files in os.walk(os.path.join(a.source_dir, "src")):
        for f in sorted(files):
            if f.endswith((".cpp", ".cu", ".h", ".cuh")):
                path = os.path.join(root, f)
                found += long_functions(path, os.path.relpath(path, a.source_dir), a.max)
    for n, rel, line, name in sorted(found, reverse=True):
        print(f"{rel}:{line}: {name} is {n} lines (at most {a.max}: split it, or list it in "
              f"tests/lint/function_length.py if it is a declarative table)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
