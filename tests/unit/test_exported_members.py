"""The public surface that memfs declares is what it has, as httpx's
tests/test_exported_members.py checks its own (docs/development.md, "Private and public
names"): every name in an ``__all__`` exists, and a package that declares an ``__all__``
declares in it every public name it makes itself (defined in its ``__init__.py``, or imported
from one of its own modules). Names it imports from elsewhere (``typing.Any``,
``memfs.errors``) are the surface of where they come from."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import memfs

PACKAGE = Path(memfs.__file__).parent


def dotted(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def declares_all(path: Path) -> bool:
    return any(isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        for node in ast.parse(path.read_text(encoding="utf-8")).body)


WITH_ALL = sorted(dotted(p) for p in PACKAGE.rglob("*.py") if declares_all(p))
PACKAGES_WITH_ALL = [m for m in WITH_ALL if (PACKAGE.parent / m.replace(".", "/")).is_dir()]


def own_public_names(module: str) -> set[str]:
    """The public names a package's ``__init__.py`` binds itself or takes from its modules."""
    path = PACKAGE.parent / module.replace(".", "/") / "__init__.py"
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            names |= {a.asname or a.name for a in node.names}  # from .x import y
    return {n for n in names if not n.startswith("_")}


def test_the_packages_that_declare_their_surface_are_found() -> None:
    assert {"memfs", "memfs.store", "memfs.client"} <= set(PACKAGES_WITH_ALL)


@pytest.mark.parametrize("module", WITH_ALL)
def test_every_name_in_all_exists_once(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert missing == [], f"{module}.__all__ names what it does not have"
    assert len(mod.__all__) == len(set(mod.__all__)), f"{module}.__all__ repeats a name"


@pytest.mark.parametrize("module", PACKAGES_WITH_ALL)
def test_a_package_declares_every_public_name_it_makes(module: str) -> None:
    mod = importlib.import_module(module)
    assert sorted(own_public_names(module) - set(mod.__all__)) == [], (
        f"public in {module} but not in its __all__: declare it, or give it a leading _ if "
        f"{module} alone uses it")


def test_memfs_exports_exactly_its_public_names() -> None:
    """httpx's own test, for the top of the package: the whole namespace, sorted."""
    public = [name for name, value in vars(memfs).items()
              if (not name.startswith("_") or name == "__version__")
              and name != "annotations"  # from __future__ import annotations
              and not (hasattr(value, "__name__") and value.__name__ == f"memfs.{name}")]
    assert memfs.__all__ == sorted(public)
