"""pjdfstest, the POSIX filesystem test suite, on a real memfs mount (about 8,800 checks).

The set of failing checks must be exactly the reasoned list in pjdfstest_expected.txt: a new
failure fails the test, and so does a listed check that now passes (remove it from the list).
The suite is built from ../shared/third_party/pjdfstest (PJDFSTEST_SRC); when it cannot be
built or run (no tools, not root), the test skips locally and fails when CI=true.
Run by hand, with per-check output: ``scripts/pjdfstest -v`` (``--tmpfs``: 0 failures).
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.support import need

from . import pjdfstest as pjd

pytestmark = pytest.mark.fuse

#: Wall-time budget of the whole run (build + mount + suite), measured about 90 s on 2 cores.
BUDGET_SECONDS = float(os.environ.get("PJDFSTEST_BUDGET", "240"))


def test_pjdfstest_failures_are_exactly_the_expected_list(fuse, tmp_path):
    # Skipped (scripts/test lists the reason in one line), or with CI=true failed with that
    # reason and no traceback: CI runs on a clone beside ../shared, where the sources are.
    need(os.geteuid() == 0, "pjdfstest unavailable: it needs root (it switches uid/gid and chowns)")
    expected = pjd.load_expected()  # a malformed list fails here, before the long run
    t0 = time.monotonic()
    try:
        built = pjd.build(tmp_path / "pjdfstest")
    except pjd.BuildError as e:
        why = str(e)  # said outside the handler: no "during handling" chain in the report
    else:
        why = ""
    need(not why, f"pjdfstest unavailable: {why}")
    results = pjd.run_on_memfs(built, tmp_path)
    seconds = time.monotonic() - t0
    failing = {c: r.diagnostics[c] for r in results for c in r.failed}
    checks = sum(max(r.plan or 0, r.checks) for r in results)
    assert len(results) > 200 and checks > 8000, f"only {len(results)} files, {checks} checks"
    new, fixed = pjd.compare(failing, expected)
    lines = [f"pjdfstest on memfs: {checks} checks, {len(failing)} failing "
             f"({len(expected)} expected), {seconds:.0f} s"]
    lines += [f"NEW FAILURE {c}: {failing[c][:300]}" for c in new]
    lines += [f"NOW PASSES, remove from {pjd.EXPECTED.name}: {c} ({expected[c]})" for c in fixed]
    assert not new and not fixed, "\n".join(lines)
    assert seconds < BUDGET_SECONDS, f"pjdfstest took {seconds:.0f} s (budget {BUDGET_SECONDS})"


@pytest.mark.parametrize("ci", [None, "true"], ids=["local", "CI"])
def test_without_its_sources_scripts_test_says_so_in_one_line(fuse, tmp_path, ci):
    """A clone with no ../shared beside it (issue 19): ``scripts/test`` skips pjdfstest with
    one line saying why, and with CI=true fails it with that line and no traceback."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PJDFSTEST_SRC"] = str(tmp_path / "no-pjdfstest")
    if ci:
        env["CI"] = ci
    done = subprocess.run(
        [str(pjd.REPO / "scripts" / "test"), "-q", "-p", "no:cacheprovider",
         "tests/integration/test_pjdfstest.py::test_pjdfstest_failures_are_exactly_the_expected_list"],
        env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout
    said = [line for line in out.splitlines() if "no-pjdfstest" in line]
    if ci:
        assert done.returncode == 1, out
        assert "Traceback" not in out and "\nE " not in out and "def test_" not in out, out
        assert said and all("required in CI: pjdfstest unavailable" in line for line in said), out
    else:
        assert done.returncode == 0, out
        assert len(said) == 1 and said[0].startswith("SKIPPED"), out
