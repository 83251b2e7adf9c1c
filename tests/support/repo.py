"""The repository the tests run from, and a copy of it (what a fresh clone holds)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` imported as the module ``name`` (the scripts are not a package).
    It is registered in ``sys.modules`` (dataclasses look their module up) and the scripts'
    directory is on ``sys.path`` (scripts import each other: bench_cost imports bench)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def copy_of_the_repo(dest: Path) -> Path:
    """The files of the repository git knows of (tracked, or new and not ignored), in ``dest``."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                           check=True, capture_output=True, text=True).stdout.splitlines()
    for name in files:
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest
