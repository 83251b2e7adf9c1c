"""The rules of the test suite itself (issue 21): no test module imports another (or a
conftest: fixtures come from conftest.py by pytest, helpers from tests/support), one "skip
here, fail in CI" gate (:func:`tests.support.need`) instead of copies that read ``CI`` or skip
on what the machine lacks, and an ERROR that memfs logs fails the test that did not expect it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SUPPORT = TESTS / "support"

#: Skips that are not about the machine, so not the gate's: an opt-in suite that costs tokens
#: (never in CI), and a test that reruns its own module and must not recurse.
NOT_THE_GATE = {"integration/test_real_api.py", "integration/test_sandbox.py"}


def _sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if ".venv" not in p.parts)


def _imported(path: Path) -> set[str]:
    """The modules ``path`` imports (anywhere in it), as dotted names; relative ones resolved
    against its package."""
    package = path.relative_to(TESTS.parent).parent.parts
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
    return found


def test_no_test_module_imports_another_or_a_conftest() -> None:
    offenders = {}
    for path in _sources():
        bad = {m for m in _imported(path) if m.startswith("tests.") and (
            m.rsplit(".", 1)[-1].startswith("test_") or m.rsplit(".", 1)[-1] == "conftest")}
        if bad:
            offenders[str(path.relative_to(TESTS))] = sorted(bad)
    assert not offenders, f"move what they share to tests/support: {offenders}"


def test_one_gate_skips_here_and_fails_in_ci() -> None:
    offenders = []
    for path in _sources():
        name = str(path.relative_to(TESTS))
        if path.is_relative_to(SUPPORT) or name in NOT_THE_GATE or path == Path(__file__):
            continue
        text = path.read_text()
        for needle in ('environ.get("CI")', "pytest.skip(", "mark.skipif", "importorskip"):
            if needle in text:
                offenders.append(f"{name}: {needle}")
    assert not offenders, f"use tests.support.need(condition, why): {offenders}"


PROBE = '''
import logging

import pytest

log = logging.getLogger("memfs.probe")


def test_unexpected():
    log.error("something broke")


@pytest.mark.allow_error_logs
def test_marked():
    log.error("expected")


def test_asked(error_logs):
    log.error("expected too")
    assert [r.getMessage() for r in error_logs] == ["expected too"]


def test_a_warning_is_no_error():
    log.warning("fine")
    logging.getLogger("elsewhere").error("not memfs's")
'''


def test_an_error_memfs_logs_fails_the_test_unless_it_expects_it(tmp_path: Path) -> None:
    """tests/conftest.py's check: an ERROR of a memfs logger fails the test that did not say
    it expects one (``allow_error_logs``, ``error_logs``); a warning, or another library's
    error, does not."""
    (tmp_path / "test_probe.py").write_text(PROBE)
    root = TESTS.parent
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-q", "--rootdir", str(root), "-c", str(root / "pyproject.toml"),
         str(tmp_path / "test_probe.py"), "-rA"],
        cwd=root, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)})
    out = r.stdout + r.stderr
    assert "4 passed, 1 error" in out, out
    assert "ERROR memfs.probe: something broke" in out, out
    assert "ERROR at teardown of test_unexpected" in out, out


LEAK = '''
def test_leaks_a_file():
    f = open(__file__)
    del f  # collected here, never closed: a ResourceWarning in its finalizer
'''


def test_a_warning_in_a_finalizer_fails_the_test(tmp_path: Path) -> None:
    """No global ignore of unraisable exceptions (pyproject.toml's filterwarnings): a file,
    socket or process a test leaves open warns in its finalizer, where nothing can raise, and
    that fails the test. A test that must live with one marks itself, narrowly, saying why."""
    (tmp_path / "test_leak.py").write_text(LEAK)
    root = TESTS.parent
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir",
         str(root), "-c", str(root / "pyproject.toml"), str(tmp_path / "test_leak.py")],
        cwd=root, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)})
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "ResourceWarning: unclosed file" in out, out


def _unclosed_clients(path: Path) -> list[int]:
    """The lines of ``path`` that make an SDK client (``anthropic.Anthropic``, ``AsyncAnthropic``)
    nothing is sure to close: not the expression of a ``with``, not on a transport the caller
    owns (``http_client=``), not made by a ``lambda`` for the code under test (which closes
    it: a dream's ``client_factory``)."""
    tree = ast.parse(path.read_text())
    closed = {id(item.context_expr) for node in ast.walk(tree)
              if isinstance(node, ast.With | ast.AsyncWith) for item in node.items}
    closed |= {id(node.body) for node in ast.walk(tree) if isinstance(node, ast.Lambda)}
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "anthropic"
            and node.func.attr in ("Anthropic", "AsyncAnthropic") and id(node) not in closed
            and not any(k.arg == "http_client" for k in node.keywords)]


def test_every_sdk_client_a_test_makes_is_closed() -> None:
    """A client left to the garbage collector closes its sockets in whatever test runs then,
    which fails on their ResourceWarning (a CI run failed so, in a time-travel test that uses
    no client). Tests make one in a ``with``, or with :func:`tests.support.server.sdk`, whose
    clients tests/conftest.py closes after the test."""
    offenders = [f"{path.relative_to(TESTS)}:{line}" for path in _sources()
                 if path != SUPPORT / "server.py" for line in _unclosed_clients(path)]
    assert not offenders, f"close these clients (tests.support.server.sdk): {offenders}"


SDK = '''
from tests.support.server import sdk

made = []


def test_makes_a_client():
    made.append(sdk("http://127.0.0.1:9"))
    assert not made[0].is_closed()


def test_the_client_was_closed_after_the_test():
    assert made[0].is_closed()
'''


def test_the_clients_of_sdk_are_closed_after_the_test(tmp_path: Path) -> None:
    (tmp_path / "test_sdk.py").write_text(SDK)
    root = TESTS.parent
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-q", "--rootdir", str(root), "-c", str(root / "pyproject.toml"),
         str(tmp_path / "test_sdk.py")],
        cwd=root, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)})
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "2 passed" in out, out
