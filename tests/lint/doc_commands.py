#!/usr/bin/env python3
"""Every command the docs show still works as written, so a renamed or removed flag fails CI.

    doc_commands.py BUILD_DIR SOURCE_DIR [FILE.md ...]     (default: README.md and docs/*.md)

Commands are the lines of the files' code blocks (indented or fenced) and the `code spans` that start
with a program (a span may wrap across the lines of a paragraph or list item, as Markdown reads it),
after leading VAR=value assignments, `bash`/`python3`, and launchers (mpirun, srun, docker run IMAGE,
timeout, taskset) are taken off; continued lines (\\) are joined; pipes and && split a line into
commands. For each:
  srutrain, srueval, srubench (also as build/..., ./build-quickstart/..., a Docker image srutrain:TAG):
    a subcommand must be listed by PROG --help and answer PROG SUB --help; every --option must be in
    that help; every --set KEY=VALUE key must be one `srutrain --list-keys` lists; a configs/ or tests/
    file named must exist; and a srutrain command with a --config that exists and concrete values is
    run as a dry run (--print-config), which validates the config and its overrides;
  scripts/... and tests/...: the file must exist; every --option of a scripts/ command must be in its
    --help (its usage) or, where that cannot run here (a missing Python package), in its source.
Placeholders (FILE, DIR, N, KEY=VALUE: upper-case words) and optional parts in [brackets] are read as
written. Exit 1 naming each file:line, command and what is wrong.
"""
import os
import re
import shlex
import subprocess
import sys

PROGRAMS = ("srutrain", "srueval", "srubench")
LAUNCHERS = ("mpirun", "mpiexec", "srun", "timeout", "nohup", "time", "exec", "taskset", "numactl")


def is_command_span(span):
    """A span that shows a command: more than one word, and a program after the assignments, interpreters
    and launchers program_of takes off (`SRU_X=1 scripts/y.sh`, `mpirun -np 2 srutrain ...`)."""
    return len(span.split()) > 1 and any(program_of(tokens)[0] is not None for tokens in commands(span))


def code_spans(text):
    """(offset, content) of the `code spans` of one paragraph's text, as Markdown reads them: a run of n
    backticks opens a span that the next run of exactly n closes (none: the run is literal text); a
    backslash escapes a backtick outside a span; a line break inside a span is a space, and one space
    each side of the content is dropped when both are there."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] != "`":
            i += 1
            continue
        n = len(re.match(r"`+", text[i:]).group(0))
        close = re.compile(r"(?<!`)" + "`" * n + r"(?!`)")
        m = close.search(text, i + n)
        if m is None:
            i += n
            continue
        span = text[i + n:m.start()].replace("\n", " ")
        if len(span) > 1 and span[0] == " " and span[-1] == " " and span.strip():
            span = span[1:-1]
        out.append((i, span))
        i = m.end()
    return out


def blocks(path):
    """(line number, text) of every command-like line of the file's code blocks and code spans.

    Code blocks: a fenced block's lines and an indented block's (4 spaces after a blank line, another
    code line or a fence; indented lines inside a paragraph continue it), a line ending in \\ joined with
    the next. Code spans are read per paragraph (or list item, heading, table row), so a span may wrap
    across lines; a paragraph ends at a blank line, a fence, a heading, a table row, a list item, an HTML
    comment or a thematic break. A span is numbered by the line it starts on."""
    out = []
    fenced = False
    pending, start = "", 0
    para, para_start = [], 0  # the lines (stripped) of the paragraph being read, and its first line

    def flush():
        text = "\n".join(para)
        for offset, span in code_spans(text):
            if is_command_span(span):
                out.append((para_start + text.count("\n", 0, offset), span))
        del para[:]

    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        indented = line.startswith("    ") and line.strip() and not line.lstrip().startswith(("-", "|"))
        if pending or fenced or line.lstrip().startswith("```") or (indented and not para):
            flush()
            if line.endswith("\\") and (fenced or line.startswith("    ")):  # a continued shell line
                pending, start = pending + line[:-1].strip() + " ", start or number
                continue
            if pending:
                out.append((start, pending + line.strip()))
                pending, start = "", 0
                continue
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            out.append((number, line.strip()))
            continue
        stripped = line.strip()
        if not stripped:
            flush()
        elif stripped.startswith(("|", "<!--")) or re.match(r"^(#{1,6}( |$)|([-*_])( *\3){2,}$)", stripped):
            flush()  # a line of its own: a heading, a table row, an HTML comment, a thematic break
            para[:], para_start = [stripped], number
            flush()
        elif re.match(r"^([-*+]|\d+[.)])( |$)", stripped):
            flush()  # a list item starts a paragraph
            para[:], para_start = [stripped], number
        else:
            if not para:
                para_start = number
            para.append(stripped)
    flush()
    return out


def commands(text):
    """The simple commands of one shell line, as token lists (comments, redirections dropped)."""
    text = text.replace("[", " ").replace("]", " ")
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars="|&;<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:
        return []
    cmds, cur, skip_next = [], [], False
    for t in tokens:
        if skip_next:
            skip_next = False
            continue
        if t in ("|", "||", "&&", ";", "&"):
            cmds.append(cur)
            cur = []
        elif t in (">", ">>", "<", "2>", "2>&1", ">&"):
            skip_next = True
        elif set(t) <= set("|&;<>"):
            continue
        else:
            cur.append(t)
    cmds.append(cur)
    return [c for c in cmds if c]


def program_of(tokens):
    """(kind, program path, arguments) after assignments, interpreters and launchers; kind is 'app',
    'script' or None."""
    i = 0
    while i < len(tokens) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[i]):
        i += 1
    while i < len(tokens):
        t = tokens[i]
        base = os.path.basename(t)
        if base in LAUNCHERS:
            i += 1
            # launcher options and their values up to the program
            while i < len(tokens) and os.path.basename(tokens[i]) not in PROGRAMS and not tokens[i].startswith(("scripts/", "./scripts/")):
                i += 1
            continue
        if t == "docker" and i + 1 < len(tokens) and tokens[i + 1] == "run":
            i += 2
            while i < len(tokens) and not re.match(r"^srutrain(:[\w.-]+)?$", tokens[i]):
                i += 1
            if i < len(tokens):
                return "app", "srutrain", tokens[i + 1:]
            return None, None, []
        if base in ("bash", "sh", "python3", "python", "env"):
            i += 1
            continue
        if base in PROGRAMS:
            return "app", base, tokens[i + 1:]
        if t.startswith(("scripts/", "./scripts/", "tests/", ".ci/")):
            return "script", t[2:] if t.startswith("./") else t, tokens[i + 1:]
        return None, None, []
    return None, None, []


class Checker:
    def __init__(self, build, src):
        self.build, self.src = build, src
        self.helps = {}
        self.keys = None

    def run(self, argv, timeout=60):
        try:
            p = subprocess.run(argv, cwd=self.src, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=timeout, stdin=subprocess.DEVNULL)
            return p.returncode, p.stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            return 1, str(e)

    def help_of(self, argv):
        key = tuple(argv)
        if key not in self.helps:
            self.helps[key] = self.run(argv + ["--help"])
        return self.helps[key]

    def config_keys(self):
        if self.keys is None:
            _, out = self.run([os.path.join(self.build, "srutrain"), "--list-keys"])
            self.keys = set(re.findall(r"^\| `([\w.]+)` \|", out, re.M))
        return self.keys

    @staticmethod
    def has_flag(help_text, flag):
        return re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", help_text) is not None

    def check(self, tokens):
        kind, prog, args = program_of(tokens)
        problems = []
        if kind is None:
            return problems
        flags = [a.split("=")[0] for a in args if a.startswith("--") and len(a) > 2 and not a[2:].split("=")[0].isupper()]
        if kind == "script":
            path = os.path.join(self.src, prog)
            if not os.path.exists(path):
                return ["%s does not exist" % prog]
            if flags and prog.startswith("scripts/"):
                # Its usage (--help), and its source for a script whose --help cannot run here (a Python
                # package it imports is missing): an option it parses is named there.
                interp = ["python3"] if prog.endswith(".py") else ["bash"]
                rc, text = self.help_of(interp + [prog])
                text = (text if rc == 0 else "") + open(path, encoding="utf-8").read()
                problems += ["%s takes no %s (neither its --help nor its source names it)" % (prog, f) for f in flags
                             if not self.has_flag(text, f)]
            return problems
        binary = os.path.join(self.build, prog)
        rc, text = self.help_of([binary])
        if rc != 0:
            return ["%s --help failed: %s" % (prog, text.strip()[-200:])]
        # A subcommand: the first word after the program that is not an option or an option's value and
        # names one (PROG --help lists them; global options may come first, e.g. srubench --threads 2 ...).
        name = prog
        for i, a in enumerate(args):
            if a.startswith("-") or (i > 0 and args[i - 1].startswith("--") and "=" not in args[i - 1]):
                continue
            if re.match(r"^[a-z][a-z0-9-]+$", a) and re.search(r"^\s+" + re.escape(a) + r"\b", text, re.M):
                rc, sub = self.help_of([binary, a])
                if rc != 0:
                    return ["%s %s --help failed: %s" % (prog, a, sub.strip()[-200:])]
                text += sub
                name = prog + " " + a
            break
        problems += ["%s takes no %s" % (name, f) for f in flags if not self.has_flag(text, f)]
        sets = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--set"]
        sets += [a[len("--set="):] for a in args if a.startswith("--set=")]
        for s in sets:
            key = s.split("=")[0]
            if key.isupper() or key in ("KEY", "..."):
                continue
            if key not in self.config_keys():
                problems.append("--set %s: no config key %s (srutrain --list-keys)" % (s, key))
        for a in args:
            placeholder = re.search(r"(?<![A-Za-z])[A-Z]{2,}(?![A-Za-z])", a)  # configs/translate/multi30k-MODEL.yaml
            if re.match(r"^(configs|tests)/[\w./-]+\.(yaml|txt|json)$", a) and not placeholder \
                    and not os.path.exists(os.path.join(self.src, a)):
                problems.append("%s does not exist" % a)
        if prog == "srutrain" and "--config" in args and not problems:
            config = args[args.index("--config") + 1] if args.index("--config") + 1 < len(args) else ""
            concrete = all(not re.search(r"\b[A-Z]{1,}\b", s.split("=", 1)[-1]) for s in sets)
            if config.startswith("configs/") and os.path.exists(os.path.join(self.src, config)) and concrete:
                argv = [binary, "--config", config]
                for s in sets:
                    argv += ["--set", s]
                rc, out = self.run(argv + ["--print-config"])
                if rc != 0:
                    problems.append("dry run (--print-config) failed: " + out.strip().splitlines()[-1])
        return problems


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    files = sys.argv[3:] or ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(src, "docs")) if f.endswith(".md"))
    checker = Checker(build, src)
    failures, checked = 0, 0
    for name in files:
        for number, line in blocks(os.path.join(src, name)):
            for tokens in commands(line):
                if program_of(tokens)[0] is None:
                    continue
                checked += 1
                for problem in checker.check(tokens):
                    failures += 1
                    print("%s:%d: %s\n    %s" % (name, number, problem, line))
    print("%d commands checked in %s: %s" % (checked, ", ".join(files), "%d problems" % failures if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
