"""pjdfstest, the POSIX filesystem test suite, on a real memfs mount (about 8,800 checks).

The set of failing checks must be exactly the reasoned list in pjdfstest_expected.txt: a new
failure fails the test, and so does a listed check that now passes (remove it from the list).
The suite is built from ../shared/third_party/pjdfstest (PJDFSTEST_SRC); when it cannot be
built or run (no tools, not root), the test skips locally and fails when CI=true.
Run by hand, with per-check output: ``scripts/pjdfstest -v`` (``--tmpfs``: 0 failures).
"""

from __future__ import annotations

import os
import time

import pytest

from . import pjdfstest as pjd

pytestmark = pytest.mark.fuse

#: Wall-time budget of the whole run (build + mount + suite), measured about 90 s on 2 cores.
BUDGET_SECONDS = float(os.environ.get("PJDFSTEST_BUDGET", "240"))


def _cannot(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"pjdfstest is required in CI: {why}")
    pytest.skip(f"pjdfstest unavailable: {why}")


def test_pjdfstest_failures_are_exactly_the_expected_list(fuse, tmp_path):
    if os.geteuid() != 0:
        _cannot("pjdfstest needs root (it switches uid/gid and chowns)")
    expected = pjd.load_expected()  # a malformed list fails here, before the long run
    t0 = time.monotonic()
    try:
        built = pjd.build(tmp_path / "pjdfstest")
    except pjd.BuildError as e:
        _cannot(str(e))
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
