"""scripts/bench's choice and order of targets, and the s3ql target's source and cached build
(scripts/bench_s3ql.py, issue 45), without mounting anything or building S3QL."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.repo import load_script

bench_s3ql = load_script("bench_s3ql")
bench = load_script("bench")


# -- the targets and their order --------------------------------------------------------------


def test_s3ql_runs_only_when_named_and_in_the_order_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bench_s3ql.SRC_ENV, raising=False)
    assert "s3ql" not in bench.parse_args([]).targets
    assert bench.parse_args(["--targets", "floor,s3ql,memfs"]).targets == ["floor", "s3ql", "memfs"]
    assert bench.parse_args(["--targets", "memfs, s3ql,floor,s3ql"]).targets == [
        "memfs", "s3ql", "floor"]


def test_an_unknown_target_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--targets", "floor,s3q1"])
    assert "s3q1" in capsys.readouterr().err


def test_the_s3ql_source_comes_from_the_option_then_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(bench_s3ql.SRC_ENV, raising=False)
    assert bench.parse_args(["--targets", "s3ql"]).s3ql_src is None
    monkeypatch.setenv(bench_s3ql.SRC_ENV, str(tmp_path / "env"))
    assert bench.parse_args(["--targets", "s3ql"]).s3ql_src == tmp_path / "env"
    given = bench.parse_args(["--targets", "s3ql", "--s3ql-src", str(tmp_path / "flag")])
    assert given.s3ql_src == tmp_path / "flag"


def test_each_pass_starts_one_target_further() -> None:
    names = ["floor", "s3ql", "memfs"]
    passes = [bench.pass_order(names, n) for n in range(4)]
    assert passes == [
        ["floor", "s3ql", "memfs"],
        ["s3ql", "memfs", "floor"],
        ["memfs", "floor", "s3ql"],
        ["floor", "s3ql", "memfs"],
    ]
    # Reversed, pass 1 runs them the other way round.
    assert bench.pass_order(names[::-1], 0) == ["memfs", "s3ql", "floor"]
    assert bench.pass_order([], 2) == []


def test_memfs_is_compared_with_s3ql_beside_the_floor() -> None:
    spec = bench.Spec(files=100)
    results = {
        name: bench.TargetResult(name, runs=[{"rename": seconds}])
        for name, seconds in (("floor", 1.0), ("s3ql", 2.0), ("memfs", 4.0))
    }
    ratios = bench.speed_ratios(results, spec)
    assert set(ratios) == {"memfs/floor", "memfs/s3ql", "s3ql/floor"}
    assert ratios["memfs/s3ql"]["rename"] == 0.5  # memfs takes twice S3QL's time
    assert ratios["s3ql/floor"]["rename"] == 0.5


# -- the s3ql target's source and build -------------------------------------------------------


def test_the_cache_follows_xdg_cache_home(tmp_path: Path) -> None:
    assert bench_s3ql.cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "memfs-bench"
    assert bench_s3ql.cache_root({}) == Path.home() / ".cache" / "memfs-bench"


@pytest.mark.parametrize(("version", "ok"), [
    ("3.54.1", True), ("3.42.0", True), ("3.41.2", False), ("3.38.2", False), ("3.7.17", False)])
def test_apsw_sqlite_older_than_3_42_is_refused(version: str, ok: bool) -> None:
    if ok:
        bench_s3ql.check_sqlite(version)
    else:
        with pytest.raises(bench_s3ql.BuildError, match=version):
            bench_s3ql.check_sqlite(version)


def _tree(path: Path, name: str = "s3ql", version: str = bench_s3ql.S3QL_VERSION) -> Path:
    path.mkdir(parents=True)
    (path / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "{version}"\n')
    return path


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t.invalid",
                    *args], check=True, capture_output=True)  # fmt: skip


def test_a_source_tree_is_copied_and_its_version_read(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    (src / "build").mkdir()  # an earlier in-tree build's: not copied
    laid = bench_s3ql.unpack(src, tmp_path / "into")
    assert laid == tmp_path / "into"
    assert sorted(p.name for p in laid.iterdir()) == ["pyproject.toml"]
    assert bench_s3ql.tree_version(laid) == bench_s3ql.S3QL_VERSION
    with pytest.raises(bench_s3ql.BuildError, match="not S3QL's"):
        bench_s3ql.tree_version(_tree(tmp_path / "other", name="other"))
    with pytest.raises(bench_s3ql.BuildError, match="S3QL source not found at"):
        bench_s3ql.unpack(tmp_path / "missing", tmp_path / "into2")


def test_a_git_clone_gives_its_tag_or_names_the_tags_it_has(tmp_path: Path) -> None:
    repo = _tree(tmp_path / "repo")
    _git(repo, "init", "-q")
    _git(repo, "add", "pyproject.toml")
    _git(repo, "commit", "-q", "-m", "6.3.0")
    _git(repo, "tag", "s3ql-6.2.2")
    with pytest.raises(bench_s3ql.BuildError, match="no tag s3ql-6.3.0 .newest: s3ql-6.2.2"):
        bench_s3ql.unpack(repo, tmp_path / "into")
    _git(repo, "tag", bench_s3ql.S3QL_TAG)
    (repo / "pyproject.toml").write_text("changed after the tag\n")  # the tag's, not the tree's
    laid = bench_s3ql.unpack(repo, tmp_path / "into")
    assert bench_s3ql.tree_version(laid) == bench_s3ql.S3QL_VERSION
    assert not (laid / ".git").exists()


def test_without_a_source_only_a_cached_build_will_do(tmp_path: Path) -> None:
    with pytest.raises(bench_s3ql.BuildError, match="S3QL source not found .no --s3ql-src"):
        bench_s3ql.build(None, tmp_path)
    home = tmp_path / f"s3ql-{bench_s3ql.S3QL_VERSION}"
    (home / "venv" / "bin").mkdir(parents=True)
    (home / "venv" / "bin" / "mount.s3ql").touch()
    info = {"s3ql": bench_s3ql.S3QL_VERSION, "pins": " ".join(bench_s3ql.shared_pins())}
    (home / bench_s3ql.STAMP).write_text(json.dumps(info))
    built = bench_s3ql.build(None, tmp_path)
    assert built.tool("mount.s3ql") == str(home / "venv" / "bin" / "mount.s3ql")
    assert built.info == info
    # Built against other versions of pyfuse3 or trio: built again, which needs the source.
    (home / bench_s3ql.STAMP).write_text(json.dumps({**info, "pins": "pyfuse3==0.0"}))
    with pytest.raises(bench_s3ql.BuildError, match="S3QL source not found"):
        bench_s3ql.build(None, tmp_path)
