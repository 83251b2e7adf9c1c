"""pjdfstest (the POSIX filesystem test suite) against a directory: build it, run it, parse its
TAP into one id per failing check, and keep the reasoned expected-failure list.

A check id is ``<test file relative to tests/>:<check number>``, e.g. ``rename/00.t:17``. A test
file that stops before its plan fails every check it did not run (same ids); one that prints no
plan, or exits non-zero with every check ok, fails as ``<file>:plan`` / ``<file>:exit``.

Used by ``scripts/pjdfstest`` and ``tests/integration/test_pjdfstest.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _source() -> Path:
    """``../shared/third_party/pjdfstest`` next to the repository (or next to an ancestor, for
    a git worktree below the checkout); PJDFSTEST_SRC overrides."""
    if os.environ.get("PJDFSTEST_SRC"):
        return Path(os.environ["PJDFSTEST_SRC"])
    for up in REPO.parents:
        if (up / "shared/third_party/pjdfstest").is_dir():
            return up / "shared/third_party/pjdfstest"
    return REPO.parent / "shared/third_party/pjdfstest"


#: The unmodified upstream suite, outside the project (read-only in CI).
SOURCE = _source()
EXPECTED = Path(__file__).with_name("pjdfstest_expected.txt")
#: The categories a reason may start with; ``real:`` entries are bugs to fix (then delete them);
#: a ``flaky:`` check may fail or pass from run to run (its reason says why), so it is not
#: compared at all: keep these few and fix them first.
CATEGORIES = ("by-design", "knock-on", "real", "flaky", "TODO")
#: A test file that runs longer than this is killed and its unrun checks fail.
FILE_TIMEOUT = float(os.environ.get("PJDFSTEST_FILE_TIMEOUT", "120"))
#: Test files run in parallel (each in its own directory): most of the suite's time is sleeps.
JOBS = int(os.environ.get("PJDFSTEST_JOBS", "8"))

_RESULT = re.compile(r"^(not )?ok (\d+)\b(.*)$")
_PLAN = re.compile(r"^1\.\.(\d+)")
_LINE = re.compile(r"^(\S+\.t):(\S+)\s+(\S.*)$")


class BuildError(RuntimeError):
    pass


def build(dest: Path, source: Path = SOURCE) -> Path:
    """Copy the suite to ``dest`` and build the ``pjdfstest`` program; returns ``dest``."""
    if not (source / "configure.ac").is_file():
        raise BuildError(f"pjdfstest sources not found at {source} (set PJDFSTEST_SRC)")
    missing = [t for t in ("autoreconf", "gcc", "make", "prove") if shutil.which(t) is None]
    if missing:
        raise BuildError(f"missing build tools: {' '.join(missing)} "
                         "(apt-get install autoconf automake gcc make perl)")
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest)
    for cmd in (["autoreconf", "-ifs"], ["./configure"], ["make", "pjdfstest"]):
        r = subprocess.run(cmd, cwd=dest, capture_output=True, text=True)
        if r.returncode != 0:
            raise BuildError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    if not os.access(dest / "pjdfstest", os.X_OK):
        raise BuildError(f"no pjdfstest program in {dest} after make")
    return dest


@dataclass
class FileResult:
    name: str  # relative to tests/, e.g. "rename/00.t"
    seconds: float
    plan: int | None = None
    failed: list[str] = field(default_factory=list)  # check ids
    diagnostics: dict[str, str] = field(default_factory=dict)  # check id -> "not ok" line
    checks: int = 0  # checks the file ran
    output: str = ""


def test_files(built: Path, only: Iterable[str] = ()) -> list[str]:
    tests = built / "tests"
    names = sorted(str(p.relative_to(tests)) for p in tests.rglob("*.t"))
    prefixes = [o.rstrip("/") for o in only]
    if prefixes:
        names = [n for n in names
                 if any(n == p or n.startswith(p + "/") for p in prefixes)]
    return names


def parse_tap(name: str, output: str, returncode: int | None) -> FileResult:
    """The failing check ids of one test file's TAP output. A ``not ok ... # TODO`` is not a
    failure (as for prove)."""
    res = FileResult(name, 0.0, output=output)
    seen: set[int] = set()
    for line in output.splitlines():
        if res.plan is None and (m := _PLAN.match(line)):
            res.plan = int(m.group(1))
            continue
        m = _RESULT.match(line)
        if not m:
            continue
        n = int(m.group(2))
        seen.add(n)
        if m.group(1) and "# TODO" not in m.group(3):
            cid = f"{name}:{n}"
            res.failed.append(cid)
            res.diagnostics[cid] = line
    res.checks = len(seen)
    if res.plan is None:
        res.failed.append(f"{name}:plan")
        res.diagnostics[f"{name}:plan"] = f"no plan; exit {returncode}"
        return res
    for n in range(1, res.plan + 1):
        if n not in seen:
            cid = f"{name}:{n}"
            res.failed.append(cid)
            res.diagnostics[cid] = f"not run (exit {returncode})"
    if returncode != 0 and not res.failed:
        res.failed.append(f"{name}:exit")
        res.diagnostics[f"{name}:exit"] = f"exit {returncode}"
    return res


def run_file(built: Path, name: str, workdir: Path) -> FileResult:
    """Run one test file (a /bin/sh script printing TAP, as prove runs it) in a fresh directory
    ``workdir`` on the filesystem under test."""
    workdir.mkdir()
    t0 = time.monotonic()
    try:
        r = subprocess.run(["/bin/sh", str(built / "tests" / name)], cwd=workdir,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           errors="replace", timeout=FILE_TIMEOUT)
        out, code = r.stdout, r.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        code = None
    res = parse_tap(name, out, code)
    res.seconds = time.monotonic() - t0
    return res


def run_all(built: Path, under_test: Path, only: Iterable[str] = (),
            jobs: int = JOBS) -> list[FileResult]:
    """Run every test file (or those under ``only``) in its own new directory below
    ``under_test``; results in file order."""
    names = test_files(built, only)
    dirs = {n: under_test / f"t{i:03d}" for i, n in enumerate(names)}
    # Longest first (file size is a fair guess; chown/00.t alone sleeps over a minute).
    order = sorted(names, key=lambda n: -(built / "tests" / n).stat().st_size)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        done = dict(zip(order, pool.map(lambda n: run_file(built, n, dirs[n]), order),
                        strict=True))
    return [done[n] for n in names]


# --- the expected-failure list ------------------------------------------------------------

def _check_key(cid: str) -> tuple[str, int]:
    name, _, n = cid.rpartition(":")
    return name, int(n) if n.isdigit() else 10**9


def expand(spec: str, name: str) -> list[str]:
    """``"1-3,7,plan"`` -> ["name:1", "name:2", "name:3", "name:7", "name:plan"]."""
    out: list[str] = []
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            out += [f"{name}:{i}" for i in range(int(a), int(b) + 1)]
        elif part.isdigit() or part in ("plan", "exit"):
            out.append(f"{name}:{part}")
        else:
            raise ValueError(f"bad check {part!r}")
    return out


def compress(ids: Iterable[str]) -> list[tuple[str, str]]:
    """Check ids -> [(file, "1-3,7")] in file order."""
    by_file: dict[str, list[str]] = {}
    for cid in sorted(ids, key=_check_key):
        name, _, n = cid.rpartition(":")
        by_file.setdefault(name, []).append(n)
    out = []
    for name, ns in by_file.items():
        parts: list[str] = []
        nums = [int(n) for n in ns if n.isdigit()]
        i = 0
        while i < len(nums):
            j = i
            while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
                j += 1
            parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
            i = j + 1
        parts += [n for n in ns if not n.isdigit()]
        out.append((name, ",".join(parts)))
    return out


@dataclass
class Entry:
    name: str
    spec: str
    reason: str

    @property
    def ids(self) -> list[str]:
        return expand(self.spec, self.name)


def parse_expected(text: str) -> tuple[list[str | Entry], dict[str, str]]:
    """The list's lines (comments and blank lines kept as strings, entries as Entry) and the
    reason of every expected failing check id. Raises ValueError on a malformed line, an entry
    without a categorised reason, or a check listed twice."""
    lines: list[str | Entry] = []
    reasons: dict[str, str] = {}
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line or line.lstrip().startswith("#"):
            lines.append(line)
            continue
        m = _LINE.match(line)
        if not m:
            raise ValueError(f"{EXPECTED.name}:{i}: not '<file>.t:<checks> <reason>': {raw!r}")
        e = Entry(*m.groups())
        if not e.reason.startswith(tuple(c + ":" for c in CATEGORIES)):
            raise ValueError(f"{EXPECTED.name}:{i}: reason must start with one of "
                             f"{', '.join(c + ':' for c in CATEGORIES)}: {raw!r}")
        try:
            ids = e.ids
        except ValueError:
            raise ValueError(f"{EXPECTED.name}:{i}: bad check list {e.spec!r}") from None
        for cid in ids:
            if cid in reasons:
                raise ValueError(f"{EXPECTED.name}:{i}: {cid} is listed twice")
            reasons[cid] = e.reason
        lines.append(e)
    return lines, reasons


def load_expected(path: Path = EXPECTED) -> dict[str, str]:
    return parse_expected(path.read_text())[1]


def update_expected(failing: dict[str, str], path: Path = EXPECTED) -> tuple[int, int]:
    """Rewrite the list for the set of ``failing`` check ids (id -> diagnostic): entries keep
    their reasons and lose the checks that now pass; failures not listed are appended with
    ``TODO:`` reasons for a human. Returns (removed, added) check counts."""
    lines, reasons = parse_expected(path.read_text()) if path.exists() else ([], {})
    out: list[str] = []
    for item in lines:
        if isinstance(item, str):
            out.append(item)
            continue
        for name, spec in compress(c for c in item.ids if c in failing):
            out.append(f"{name}:{spec}  {item.reason}")
    new = [c for c in failing if c not in reasons]
    if new:
        out += ["", "# New failures: replace each TODO with by-design:/knock-on:/real: and why."]
        for name, spec in compress(new):
            first = next(c for c in expand(spec, name) if c in failing)
            diag = failing[first].replace("\n", " ")[:160]
            out.append(f"{name}:{spec}  TODO: first: {diag}")
    path.write_text("\n".join(out).rstrip("\n") + "\n")
    removed = sum(1 for c in reasons if c not in failing)
    return removed, len(new)


def compare(failing: Iterable[str], expected: dict[str, str]) -> tuple[list[str], list[str]]:
    """(unexpected failures, listed checks that now pass), each sorted; ``flaky:`` checks are
    neither."""
    f = set(failing)
    flaky = {c for c, r in expected.items() if r.startswith("flaky:")}
    return (sorted(f - expected.keys(), key=_check_key),
            sorted(expected.keys() - f - flaky, key=_check_key))


# --- running against a fresh memfs mount or a tmpfs ---------------------------------------

def run_on_memfs(built: Path, tmp: Path, only: Iterable[str] = (), jobs: int = JOBS,
                 mount_args: Iterable[str] = ()) -> list[FileResult]:
    """Mount a fresh store of a new database under ``tmp`` and run the suite on it."""
    from memfs.store import Limits, Store
    from tests.support.mount import Mount

    db = tmp / "memfs.db"
    store = Store(db, limits=Limits())
    try:
        sid = store.stores.create("pjdfstest").id
    finally:
        store.close()
    m = Mount(db, sid, tmp / "mnt", list(mount_args))
    try:
        m.wait_mounted()
        (m.root / "pjd").mkdir()
        results = run_all(built, m.root / "pjd", only, jobs)
        if m.proc.poll() is not None:
            raise RuntimeError(f"memfs mount died during the run: {m.log()[-2000:]}")
        return results
    finally:
        m.stop()


def run_on_tmpfs(built: Path, tmp: Path, only: Iterable[str] = (),
                 jobs: int = JOBS) -> list[FileResult]:
    root = tmp / "tmpfs"
    root.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(root)], check=True)
    try:
        return run_all(built, root, only, jobs)
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    p = argparse.ArgumentParser(prog="scripts/pjdfstest", description=(
        "Build pjdfstest and run it on a fresh memfs mount (or --tmpfs); print one line per "
        "failing check and compare with tests/integration/pjdfstest_expected.txt."))
    p.add_argument("only", nargs="*", help="test groups or files, e.g. rename unlink/00.t")
    p.add_argument("--tmpfs", action="store_true", help="run on a fresh tmpfs instead")
    p.add_argument("--update-expected", action="store_true",
                   help="rewrite the expected list: keep reasons, drop passing checks, "
                        "add new failures as 'TODO:'")
    p.add_argument("--out", type=Path, help="also write the failing check ids to this file")
    p.add_argument("--build", type=Path, help="reuse this already built pjdfstest directory")
    p.add_argument("--jobs", type=int, default=JOBS)
    p.add_argument("--verbose", "-v", action="store_true",
                   help="print each failing check's TAP line, and each file's time")
    a = p.parse_args(argv)
    if a.update_expected and (a.tmpfs or a.only):
        p.error("--update-expected needs a full run on memfs")
    with tempfile.TemporaryDirectory(prefix="pjdfstest-") as t:
        tmp = Path(t)
        t0 = time.monotonic()
        built = a.build or build(tmp / "pjdfstest")
        t1 = time.monotonic()
        run = run_on_tmpfs if a.tmpfs else run_on_memfs
        results = run(built, tmp, a.only, a.jobs)
        t2 = time.monotonic()
    failing = {c: r.diagnostics[c] for r in results for c in r.failed}
    for cid in sorted(failing, key=_check_key):
        print(f"{cid}  {failing[cid]}" if a.verbose else cid)
    if a.out:
        a.out.write_text("".join(f"{c}\n" for c in sorted(failing, key=_check_key)))
    if a.verbose:
        for r in sorted(results, key=lambda r: -r.seconds)[:10]:
            print(f"# slowest: {r.name} {r.seconds:.1f} s", file=sys.stderr)
    total = sum(max(r.plan or 0, r.checks) for r in results)
    where = "tmpfs" if a.tmpfs else "memfs"
    print(f"# {where}: {len(results)} files, {total} checks, {len(failing)} failing; "
          f"build {t1 - t0:.0f} s, run {t2 - t1:.0f} s", file=sys.stderr)
    if a.update_expected:
        removed, added = update_expected(failing)
        print(f"# {EXPECTED.name}: {removed} checks removed, {added} added as TODO",
              file=sys.stderr)
        return 0
    if a.tmpfs:
        return 1 if failing else 0
    expected = load_expected() if EXPECTED.exists() else {}
    if a.only:
        names = set(test_files(built, a.only)) if a.build else {r.name for r in results}
        expected = {c: r for c, r in expected.items() if c.rpartition(":")[0] in names}
    new, fixed = compare(failing, expected)
    for c in new:
        print(f"# NEW FAILURE {c}  {failing[c]}", file=sys.stderr)
    for c in fixed:
        print(f"# NOW PASSES (remove from expected list) {c}  {expected[c]}", file=sys.stderr)
    return 1 if new or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
