"""A pinned PyPI package for a check script, imported from a private directory (pip's --target), so that
neither the system's Python nor a PEP 668 "externally managed" one is touched: used by
scripts/check_bleu.py (sacrebleu) and scripts/check_tensorboard.py (tensorboard)."""
import importlib
import subprocess
import sys


def import_pinned(package, version, target, load):
    """load() returns what the caller needs from `package` when it imports at `version`, else None.
    Tries it with `target` first on sys.path; if that fails, installs package==version into target with
    pip and tries again. Returns (result, None), or (None, reason) when pip cannot install it (no pip,
    no network) or the installed package does not import."""
    def attempt():
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]
        importlib.invalidate_caches()
        try:
            return load()
        except ImportError:
            return None

    if target not in sys.path:
        sys.path.insert(0, target)
    found = attempt()
    if found is not None:
        return found, None
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
           "--timeout", "30", "--retries", "2", "--upgrade", "--target", target, "%s==%s" % (package, version)]
    print("installing %s %s: %s" % (package, version, " ".join(cmd)), flush=True)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "pip could not run: %s" % e
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-6:])
        return None, "pip could not install %s==%s (no network? no pip?):\n%s" % (package, version, tail)
    found = attempt()
    if found is None:
        return None, "%s==%s was installed into %s but does not import" % (package, version, target)
    return found, None
