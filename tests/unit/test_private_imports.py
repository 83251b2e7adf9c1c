"""scripts/check_private_imports.py, run by scripts/lint: a memfs module uses no private name
of another module (docs/development.md, "Names"). Run on a small tree with
one module of each kind, so that the check itself is seen to fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "scripts" / "check_private_imports.py"

#: What is allowed: public names, a module's own private names, dunders, and a private module
#: (httpx's `_client.py`) imported inside its own package.
GOOD = {
    "memfs/__init__.py": "__version__ = '1'\n_internal_default = 1\n",
    "memfs/rules.py": "LIMIT = 1\n_SECRET = 2\n\ndef check() -> int:\n    return _SECRET\n",
    "memfs/api/__init__.py": "",
    "memfs/api/_wire.py": "def helper() -> None: ...\n",
    "memfs/api/handlers.py": (
        "from .. import rules, __version__\n"
        "from ..rules import LIMIT, check\n"
        "from ._wire import helper\n"
        "from . import _wire\n"
        "import memfs.rules as r\n"
        "\n"
        "def f() -> object:\n"
        "    _local = rules.LIMIT + r.LIMIT\n"
        "    self_ = object()\n"
        "    return (_local, self_, check, helper, _wire.helper, LIMIT, __version__,\n"
        "            rules.__name__)\n"
    ),
    "memfs/api/deep/__init__.py": "from .._wire import helper\n",
    # tests may reach into a module
    "tests/test_rules.py": "from memfs.rules import _SECRET\n",
}

#: Each offence, and the line the check must print for it.
BAD = {
    "memfs/cli.py": (
        "from .rules import _SECRET\n"
        "from memfs.rules import LIMIT, _SECRET as S\n"
        "from . import _internal_default\n",
        ["memfs/cli.py:1: _SECRET from memfs.rules",
         "memfs/cli.py:2: _SECRET from memfs.rules",
         "memfs/cli.py:3: _internal_default from memfs"],
    ),
    "memfs/api/routes.py": (
        "from .. import rules\n"
        "import memfs.rules as r\n"
        "import memfs.rules\n"
        "\n"
        "def g() -> object:\n"
        "    from memfs import rules as lazy\n"
        "    return (rules._SECRET, r._SECRET, memfs.rules._SECRET, lazy._SECRET)\n",
        ["memfs/api/routes.py:7: _SECRET from memfs.rules"] * 4,
    ),
    "memfs/console.py": (
        "from .api._wire import helper\n"
        "from .api import _wire\n"
        "import memfs.api._wire\n",
        ["memfs/console.py:1: memfs.api._wire is private to memfs.api",
         "memfs/console.py:2: memfs.api._wire is private to memfs.api",
         "memfs/console.py:3: memfs.api._wire is private to memfs.api"],
    ),
}


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK), str(root)], capture_output=True,
                          text=True, timeout=60)


def test_a_tree_that_shares_only_public_names_passes(tmp_path: Path) -> None:
    write(tmp_path, GOOD)
    result = check(tmp_path)
    assert (result.returncode, result.stdout) == (0, ""), result.stderr


def test_each_kind_of_private_use_is_reported_on_its_own_line(tmp_path: Path) -> None:
    write(tmp_path, GOOD)
    write(tmp_path, {name: text for name, (text, _) in BAD.items()})
    result = check(tmp_path)
    assert result.returncode == 1
    assert sorted(result.stdout.splitlines()) == sorted(
        line for _, lines in BAD.values() for line in lines)
    assert "private names of other modules" in result.stderr


def test_each_bad_module_alone_fails_the_check(tmp_path: Path) -> None:
    for name, (text, lines) in BAD.items():
        root = tmp_path / Path(name).stem
        write(root, GOOD)
        write(root, {name: text})
        result = check(root)
        assert (result.returncode, result.stdout.splitlines()) == (1, lines)


def test_the_repository_shares_no_private_name() -> None:
    result = check(REPO)
    assert (result.returncode, result.stdout) == (0, "")
