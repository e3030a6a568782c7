"""A stand-alone test runner copied into every generated SWE task's workspace as ``run_tests.py``.

It needs nothing but the standard library (the sandbox image may lack pytest) and runs
pytest-style test files: module-level ``test_*`` functions using plain ``assert``. Before running,
each ``assert`` is rewritten so a failure can say what was evaluated, what was expected and what
came out (like pytest's assertion rewriting, much smaller). Output is one line per test in the
format of pytest's ``-rA`` summary, which :func:`rockroll.envs.swe.tasks.parse_test_report` reads::

    PASSED test_roman.py::test_to_roman_simple
    FAILED test_roman.py::test_to_roman_subtractive - to_roman(4) returned 'IIII', expected 'IV'

With ``--json`` a final line ``JSON <object>`` carries the same results with structured details
(the task generator uses it to write problem statements).

Usage: ``python run_tests.py [--json] [--timeout SECONDS] [test_file.py ...]`` (default: every
``test_*.py`` in the current directory). Exit status 0 when every test passed.
"""

import ast
import importlib.machinery
import json
import os
import signal
import sys
import traceback

_HELPERS = "__swe_check_eq", "__swe_check_true", "__swe_check_is"


class CheckFailed(AssertionError):
    """An assertion failed; ``detail`` says how."""

    def __init__(self, detail):
        super().__init__(detail["message"])
        self.detail = detail


def _short(value, limit=200):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_eq(left, right, left_src, right_src):
    if not left == right:
        message = f"{left_src} returned {_short(left)}, expected {_short(right)}"
        raise CheckFailed(
            {"kind": "mismatch", "call": left_src, "expected": _short(right), "got": _short(left), "message": message}
        )


def _check_is(left, right, left_src, right_src):
    if left is not right:
        message = f"{left_src} returned {_short(left)}, expected {_short(right)}"
        raise CheckFailed(
            {"kind": "mismatch", "call": left_src, "expected": _short(right), "got": _short(left), "message": message}
        )


def _check_true(value, src):
    if not value:
        message = f"{src} was {_short(value)}, expected a true value"
        raise CheckFailed({"kind": "false", "call": src, "expected": "True", "got": _short(value), "message": message})


class _RewriteAsserts(ast.NodeTransformer):
    """``assert a == b`` -> ``__swe_check_eq(a, b, 'a', 'b')``; ``assert x`` -> ``__swe_check_true(x, 'x')``."""

    def __init__(self, source):
        self.source = source

    def _src(self, node):
        return ast.get_source_segment(self.source, node) or "<expression>"

    def visit_Assert(self, node):
        test = node.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            args = [
                test.left,
                test.comparators[0],
                ast.Constant(self._src(test.left)),
                ast.Constant(self._src(test.comparators[0])),
            ]
            func = _HELPERS[0]
        elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is):
            right = test.comparators[0]
            args = [test.left, right, ast.Constant(self._src(test.left)), ast.Constant(self._src(right))]
            func = _HELPERS[2]
        else:
            args = [test, ast.Constant(self._src(test))]
            func = _HELPERS[1]
        call = ast.Call(func=ast.Name(id=func, ctx=ast.Load()), args=args, keywords=[])
        return ast.copy_location(ast.Expr(value=call), node)


def _assert_source_at(source, lineno):
    """The source of the ``assert`` statement covering ``lineno`` (or that line's text)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assert) and node.lineno <= lineno <= (node.end_lineno or node.lineno):
            test = node.test
            if isinstance(test, ast.Compare):
                test = test.left
            return ast.get_source_segment(source, test) or ""
    lines = source.splitlines()
    return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""


def _load(path):
    with open(path, encoding="utf-8") as f:
        source = f.read()
    tree = _RewriteAsserts(source).visit(ast.parse(source, path))
    ast.fix_missing_locations(tree)
    name = os.path.splitext(os.path.basename(path))[0]
    namespace = {
        "__name__": name,
        "__file__": path,
        _HELPERS[0]: _check_eq,
        _HELPERS[1]: _check_true,
        _HELPERS[2]: _check_is,
    }
    exec(compile(tree, path, "exec"), namespace)
    return source, namespace


def _on_alarm(signum, frame):
    raise TimeoutError("test took too long (infinite loop?)")


def _error_detail(exc, source, path):
    """Describe an exception raised by a test: which call, what was raised."""
    lineno = 0
    for frame, line in traceback.walk_tb(exc.__traceback__):
        if os.path.abspath(frame.f_code.co_filename) == os.path.abspath(path):
            lineno = line
    call = _assert_source_at(source, lineno) if lineno else ""
    raised = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    message = f"{call} raised {raised}" if call else f"raised {raised}"
    return {"kind": "error", "call": call, "expected": "", "got": raised, "message": message}


def run_file(path, timeout_s):
    """Run every ``test_*`` function of one file; return a list of result dicts."""
    base = os.path.basename(path)
    try:
        source, namespace = _load(path)
    except BaseException as exc:  # noqa: B036, BLE001 - a broken import fails the whole file, never the runner
        return [{"test": f"{base}::<module>", "outcome": "ERROR", "detail": _error_detail(exc, "", path)}]
    results = []
    for name, func in list(namespace.items()):
        if not (name.startswith("test_") and callable(func)):
            continue
        test_id = f"{base}::{name}"
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            func()
            results.append({"test": test_id, "outcome": "PASSED", "detail": None})
        except CheckFailed as exc:
            results.append({"test": test_id, "outcome": "FAILED", "detail": exc.detail})
        except BaseException as exc:  # noqa: B036, BLE001 - SystemExit and friends are test failures too
            results.append({"test": test_id, "outcome": "FAILED", "detail": _error_detail(exc, source, path)})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return results


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compile workspace modules from their source, never from ``__pycache__``."""

    def get_code(self, fullname):
        return self.source_to_code(self.get_data(self.path), self.path)


def _install_source_only_imports(root):
    """Modules under ``root`` load from ``.py`` files only: no stale or planted bytecode, no ``.so``."""

    def hook(path):
        full = os.path.abspath(path or ".")
        if full != root and not full.startswith(root + os.sep):
            raise ImportError("not in the workspace")
        return importlib.machinery.FileFinder(full, (_SourceOnlyLoader, [".py"]))

    sys.dont_write_bytecode = True
    sys.path_hooks.insert(0, hook)
    sys.path_importer_cache.clear()


def main(argv):
    _install_source_only_imports(os.path.abspath(os.getcwd()))
    return _main(argv)


def _main(argv):
    want_json = "--json" in argv
    args = [a for a in argv if a != "--json"]
    timeout_s = 5.0
    if "--timeout" in args:
        i = args.index("--timeout")
        timeout_s = float(args[i + 1])
        del args[i : i + 2]
    here = os.getcwd()
    if here not in sys.path:
        # after the standard library (a workspace ``json.py`` must not replace the runner's), before
        # site-packages (a workspace module wins over an installed one of the same name)
        sites = [i for i, p in enumerate(sys.path) if "-packages" in p]
        sys.path.insert(sites[0] if sites else len(sys.path), here)
    files = args or sorted(f for f in os.listdir(here) if f.startswith("test_") and f.endswith(".py"))
    results = []
    for path in files:
        results.extend(run_file(path, timeout_s))
    for r in results:
        line = f"{r['outcome']} {r['test']}"
        if r["detail"]:
            line += " - " + r["detail"]["message"].replace("\n", " ")
        print(line)
    failed = sum(r["outcome"] != "PASSED" for r in results)
    print(f"{len(results) - failed} passed, {failed} failed")
    if want_json:
        print("JSON " + json.dumps(results))
    sys.stdout.flush()
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
