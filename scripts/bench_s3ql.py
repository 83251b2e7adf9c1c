"""S3QL for ``scripts/bench --targets s3ql``: find its source, build it once, say how to run it.

S3QL (https://github.com/s3ql/s3ql) is the closest peer of memfs: a pyfuse3 + trio filesystem
whose metadata lives in SQLite. It is not on PyPI (its dependencies are), so the benchmark
builds it from a source tree, or from a git clone's tag ``s3ql-6.3.0``, given by ``--s3ql-src
DIR`` or ``MEMFS_S3QL_SRC``, into a virtual environment of its own under the cache directory
(``$XDG_CACHE_HOME`` or ``~/.cache``, then ``memfs-bench/s3ql-VERSION/``). Later runs use that
build and need no source. pyfuse3 and trio are pinned to the versions memfs runs on, so that
both filesystems pay the same request loop.

The build's rules come from S3QL's own: ``pip install .`` (setuptools and Cython build its two
extensions, ``s3ql.sqlite3ext``, C++ against the system's ``sqlite3ext.h``, and
``s3ql._linked_dict``); ``apsw >= 3.42.0`` (its pyproject), which brings its own SQLite, and
that SQLite must be at least 3.42.0 (S3QL's log handler needs it) and not 3.38.0-3.38.3 (bloom
filter bugs, ``s3ql/database.py``), which 3.42.0 already rules out. ``umount.s3ql`` needs
``fuser`` (psmisc).

Pure logic and subprocesses only: nothing here mounts anything (``bench.S3qlTarget`` does).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

log = logging.getLogger(__name__)

S3QL_VERSION = "6.3.0"
S3QL_TAG = f"s3ql-{S3QL_VERSION}"
SRC_ENV = "MEMFS_S3QL_SRC"
#: The SQLite under apsw that S3QL needs (see the module's docstring).
MIN_SQLITE = (3, 42, 0)
#: Run as S3QL's installation guide advises ("a minor performance boost": no assert checks).
RUN_ENV = {"PYTHONOPTIMIZE": "1"}
#: Packages S3QL shares with memfs, pinned to memfs's versions: the same request loop.
SHARED_PACKAGES = ("pyfuse3", "trio")
STAMP = "built.json"
BUILD_TIMEOUT = 1800.0


class BuildError(Exception):
    """S3QL's source is missing or could not be built."""


@dataclass(frozen=True)
class Build:
    """A built S3QL: its virtual environment and what it was built from."""

    venv: Path
    info: dict[str, str]

    def tool(self, name: str) -> str:
        """The path of one of S3QL's commands (mkfs.s3ql, mount.s3ql, umount.s3ql)."""
        return str(self.venv / "bin" / name)


def cache_root(environ: Mapping[str, str] = os.environ) -> Path:
    """Where builds are kept: ``$XDG_CACHE_HOME/memfs-bench`` or ``~/.cache/memfs-bench``."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memfs-bench"


def source_arg(given: str | None, environ: Mapping[str, str] = os.environ) -> Path | None:
    """The source named by ``--s3ql-src`` (first) or ``MEMFS_S3QL_SRC``, if any."""
    value = given if given else environ.get(SRC_ENV, "")
    return Path(value).expanduser() if value else None


def is_git_dir(path: Path) -> bool:
    """A repository: a bare one (HEAD and objects/) or a work tree with .git."""
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


def tree_version(src: Path) -> str:
    """The version an unpacked S3QL source tree declares in its pyproject.toml."""
    try:
        project = tomllib.loads((src / "pyproject.toml").read_text())["project"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise BuildError(f"{src} is not an S3QL source tree (pyproject.toml: {exc})") from exc
    if project.get("name") != "s3ql":
        raise BuildError(f"{src}/pyproject.toml is not S3QL's (name {project.get('name')!r})")
    return str(project.get("version", "unknown"))


def parse_sqlite_version(text: str) -> tuple[int, ...]:
    """'3.54.1' -> (3, 54, 1)."""
    try:
        return tuple(int(part) for part in text.strip().split("."))
    except ValueError as exc:
        raise BuildError(f"cannot read the SQLite version {text!r}") from exc


def check_sqlite(version: str) -> None:
    """Refuse an apsw whose SQLite S3QL cannot run on (see the module's docstring)."""
    if parse_sqlite_version(version) < MIN_SQLITE:
        need = ".".join(map(str, MIN_SQLITE))
        raise BuildError(f"apsw's SQLite is {version}; S3QL needs {need} or newer")


def missing_tools() -> list[str]:
    """Debian packages the build or umount.s3ql need that this machine lacks."""
    missing = []
    if not Path("/usr/include/sqlite3ext.h").is_file():
        missing.append("libsqlite3-dev")
    if shutil.which("c++") is None:
        missing.append("g++")
    if shutil.which("fuser") is None:
        missing.append("psmisc")
    return missing


def shared_pins() -> list[str]:
    """``name==version`` of the packages S3QL shares with memfs, as this interpreter has them."""
    pins = []
    for name in SHARED_PACKAGES:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            log.warning("%s is not installed here: S3QL gets the newest", name)
    return pins


def _run(cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True,
                              timeout=BUILD_TIMEOUT)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", None) or getattr(exc, "stdout", None) or str(exc)
        if isinstance(detail, bytes):  # a TimeoutExpired's output is bytes even with text=True
            detail = detail.decode(errors="replace")
        raise BuildError(f"{what} failed: {detail.strip()[-800:]}") from exc


def unpack(src: Path, into: Path) -> Path:
    """Lay the source to build in ``into``: a copy of the tree src, or the tag S3QL_TAG of the
    git clone src."""
    if not src.exists():
        raise BuildError(f"S3QL source not found at {src}; see docs/performance.md (S3QL)")
    shutil.rmtree(into, ignore_errors=True)
    if not is_git_dir(src):
        # A copy: pip's in-tree build leaves build/ and *.egg-info behind, not in the caller's.
        shutil.copytree(src, into, ignore=shutil.ignore_patterns(".git", ".venv", "build"))
        return into
    git_dir = src / ".git" if (src / ".git").exists() else src
    tags = _run(["git", f"--git-dir={git_dir}", "tag", "--list", "s3ql-*"], "git tag").stdout
    if S3QL_TAG not in tags.split():
        newest = sorted(tags.split(), key=_tag_key)[-3:]
        raise BuildError(f"{src} has no tag {S3QL_TAG} (newest: {', '.join(newest) or 'none'})")
    into.mkdir(parents=True)
    tarball = into.with_suffix(".tar")
    _run(["git", f"--git-dir={git_dir}", "archive", f"--output={tarball}", S3QL_TAG],
         "git archive")  # fmt: skip
    try:
        _run(["tar", "-x", "-f", str(tarball), "-C", str(into)], "tar -x")
    finally:
        tarball.unlink(missing_ok=True)
    return into


def _tag_key(tag: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in tag.removeprefix("s3ql-").split("."))
    except ValueError:
        return (0,)


def build(src_arg: Path | None, root: Path | None = None) -> Build:
    """S3QL S3QL_VERSION built in ``root/s3ql-VERSION/venv``: the one there, or built now.

    :raises BuildError: with what to do (the source, a Debian package) in its message.
    """
    home = (root or cache_root()) / f"s3ql-{S3QL_VERSION}"
    venv, stamp = home / "venv", home / STAMP
    pins = shared_pins()
    if stamp.is_file() and (venv / "bin" / "mount.s3ql").is_file():
        info = json.loads(stamp.read_text())
        if info.get("pins") == " ".join(pins):
            log.info("s3ql: using the build in %s", venv)
            return Build(venv, info)
        log.info("s3ql: rebuilding (pins %s, built with %s)", pins, info.get("pins"))
    if src_arg is None:
        raise BuildError(f"S3QL source not found (no --s3ql-src DIR nor {SRC_ENV}, and no "
                         f"build of it in {home}); see docs/performance.md (S3QL)")  # fmt: skip
    if missing := missing_tools():
        raise BuildError(f"building S3QL needs: apt install {' '.join(missing)}")
    src = unpack(src_arg.resolve(), home / "src")
    version = tree_version(src)
    if version != S3QL_VERSION:
        raise BuildError(f"{src_arg} holds S3QL {version}, not {S3QL_VERSION}")
    log.info("s3ql: building S3QL %s from %s into %s (a minute or two)", version, src_arg, venv)
    shutil.rmtree(venv, ignore_errors=True)
    stamp.unlink(missing_ok=True)
    # The base interpreter of the one running memfs: the same Python as memfs.
    _run([sys.executable, "-m", "venv", str(venv)], "python -m venv")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    constraints = home / "pins.txt"
    constraints.write_text("".join(f"{pin}\n" for pin in pins))
    # Not --quiet: a failing compiler's error is in pip's output, which BuildError keeps.
    _run([*pip, "install", "--constraint", str(constraints), str(src)], "pip install S3QL")
    probe = _run([str(venv / "bin" / "python"), "-c", _PROBE], "importing the built S3QL")
    info = {**json.loads(probe.stdout), "source": str(src_arg), "pins": " ".join(pins)}
    check_sqlite(info["sqlite"])
    stamp.write_text(json.dumps(info, indent=2) + "\n")
    return Build(venv, info)


# Run in S3QL's venv: its versions, and that both extensions are compiled (not pure Python).
_PROBE = """
import json, apsw, pyfuse3, trio, s3ql, s3ql.sqlite3ext as ext, s3ql._linked_dict as ld
for mod in (ext, ld):
    if not mod.__file__.endswith(".so"):
        raise SystemExit(mod.__file__ + " is not compiled")
print(json.dumps({"s3ql": s3ql.VERSION, "apsw": apsw.apsw_version(),
                  "sqlite": apsw.sqlitelibversion(), "pyfuse3": pyfuse3.__version__,
                  "trio": trio.__version__}))
"""
