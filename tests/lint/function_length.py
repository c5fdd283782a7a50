#!/usr/bin/env python3
"""Lint: no function in src/ longer than 80 lines (issue 40), except the declarative tables listed below.

A function is a definition at namespace level: a signature starting in column 0, over one or more
lines, ending with '{' after a ')'; its length runs from its first line to its closing brace. Braces inside string and character
literals and comments are not counted. Usage: function_length.py SOURCE_DIR [--max 80]
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

LITERAL_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|//.*')
START = re.compile(r'^[A-Za-z_][^;]*\)\s*(?:const\s*)?(?:override\s*)?(?:noexcept\s*)?(?:->\s*[^{]+)?\{\s*$')
NAME = re.compile(r'([A-Za-z_][A-Za-z_0-9:~]*)\s*\(')
SKIP = ("namespace", "struct", "class", "enum", "union", "template", "#", "extern")


def code_only(line, in_block_comment):
    """The line without literals and comments, and whether a /* comment is still open after it."""
    out = ""
    i = 0
    while i < len(line):
        if in_block_comment:
            end = line.find("*/", i)
            if end < 0:
                return out, True
            i, in_block_comment = end + 2, False
            continue
        start = line.find("/*", i)
        chunk = line[i:] if start < 0 else line[i:start]
        out += LITERAL_OR_COMMENT.sub("", chunk)
        if start < 0:
            break
        i, in_block_comment = start + 2, True
    return out, in_block_comment


def long_functions(path, rel, limit):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    clean, in_comment = [], False
    for line in lines:
        text, in_comment = code_only(line, in_comment)
        clean.append(text)
    found = []
    i = 0
    while i < len(lines):
        line = clean[i]
        if not line[:1].isalpha() and not line.startswith("_") or line.startswith(SKIP) or "(" not in line:
            i += 1
            continue
        # A signature may run over several lines: up to the one ending in '{' (a definition) or holding ';'.
        k = i
        while k < len(lines) and not clean[k].rstrip().endswith("{") and ";" not in clean[k]:
            k += 1
        if k >= len(lines) or ";" in clean[k] or not START.match(" ".join(c.strip() for c in clean[i:k + 1])):
            i += 1
            continue
        depth, j = 0, k
        while j < len(lines):
            depth += clean[j].count("{") - clean[j].count("}")
            if depth == 0:
                break
            j += 1
        names = NAME.findall(line.split("(")[0] + "(")
        name = names[-1].split("::")[-1] if names else "?"
        if j - i > limit and (rel, name) not in DECLARATIVE_TABLES:
            found.append((j - i, rel, i + 1, name))
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
