"""Fail when a module of memfs/ uses a private name (a leading `_`) of another module.

A leading underscore says "only this module uses it" (docs/development.md, "Private and public
names"); a name that another module needs is public. The check reads every module of the package
with `ast` (nothing is imported) and reports, one line each, `file:line: NAME from MODULE` for:

- `from .x import _y` / `from memfs.x import _y` / `from . import _y` when `_y` is a name of that
  module (not a submodule);
- `mod._y` where `mod` is bound to a memfs module (`from .. import rules`, `import memfs.rules as
  rules`, `import memfs.rules`);
- a private module (httpx style: `memfs/pkg/_internal.py`) imported from outside its package
  `memfs.pkg` (inside the package it is allowed: that is what a private module is for).

Dunder names (`__version__`) are public. Tests are exempt: they may reach into a module.
Usage: scripts/check_private_imports [ROOT [PACKAGE]] (default: the repository, `memfs`).
Exit status 1 when there is any offence, 0 otherwise.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def is_private(name: str) -> bool:
    """A leading underscore, but not a dunder (`__version__`, `__all__` are public)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass(frozen=True)
class Offence:
    """One use of a private name outside its module: `path:line: name from module`."""

    path: Path
    line: int
    col: int
    name: str
    module: str  # the dotted module the name belongs to
    kind: str  # "import" (from M import _n), "attribute" (m._n) or "module" (a private module)

    def __str__(self) -> str:
        if self.kind == "module":
            owner = self.module.rsplit(".", 1)[0]
            return f"{self.path}:{self.line}: {self.module} is private to {owner}"
        return f"{self.path}:{self.line}: {self.name} from {self.module}"


class Package:
    """The modules of one package on disk, by dotted name."""

    def __init__(self, root: Path, package: str) -> None:
        self.root = root
        self.package = package
        self.modules: dict[str, Path] = {}
        self.packages: set[str] = set()
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
                self.packages.add(".".join(parts))
            self.modules[".".join(parts)] = path

    def is_module(self, dotted: str) -> bool:
        return dotted in self.modules

    def inside(self, dotted: str) -> bool:
        return dotted == self.package or dotted.startswith(self.package + ".")


def module_name(pkg: Package, path: Path) -> str:
    parts = list(path.relative_to(pkg.root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_from(pkg: Package, importer: str, node: ast.ImportFrom) -> str:
    """The absolute module of a `from X import ...` in module `importer`."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if importer not in pkg.packages:  # a plain module: relative to its package
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_module_offence(pkg: Package, importer: str, dotted: str) -> str | None:
    """The package a private module of `dotted` is private to, when `importer` is outside it."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if is_private(part):
            owner = ".".join(parts[:i])
            if importer != owner and not importer.startswith(owner + "."):
                return ".".join(parts[: i + 1])
            return None
    return None


def module_bindings(pkg: Package, importer: str, tree: ast.Module) -> dict[str, str]:
    """Local names bound to memfs modules anywhere in the file (`rules` -> `memfs.rules`).

    File-wide, not per scope: a module alias is rarely rebound, and an import inside a function
    (a lazy import) counts as well.
    """
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not pkg.inside(alias.name):
                    continue
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:  # `import memfs.rules` binds `memfs`
                    bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            source = resolve_from(pkg, importer, node)
            if not pkg.inside(source):
                continue
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if pkg.is_module(target):
                    bound[alias.asname or alias.name] = target
    return bound


def attribute_module(node: ast.expr, bound: dict[str, str], pkg: Package) -> str | None:
    """The memfs module an expression names (`rules`, `memfs.store.sessions`), if any."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        base = attribute_module(node.value, bound, pkg)
        if base is not None and pkg.is_module(f"{base}.{node.attr}"):
            return f"{base}.{node.attr}"
    return None


def offences_in(pkg: Package, path: Path) -> Iterator[Offence]:
    importer = module_name(pkg, path)
    tree = ast.parse(path.read_text(), str(path))
    bound = module_bindings(pkg, importer, tree)
    shown = path.relative_to(pkg.root)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if pkg.inside(alias.name):
                    owner = private_module_offence(pkg, importer, alias.name)
                    if owner:
                        yield Offence(shown, node.lineno, node.col_offset, alias.name, owner,
                                      "module")
        elif isinstance(node, ast.ImportFrom):
            source = resolve_from(pkg, importer, node)
            if not pkg.inside(source):
                continue
            owner = private_module_offence(pkg, importer, source)
            if owner:
                yield Offence(shown, node.lineno, node.col_offset, source, owner, "module")
                continue
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if pkg.is_module(target):
                    owner = private_module_offence(pkg, importer, target)
                    if owner:
                        yield Offence(shown, node.lineno, node.col_offset, target, owner,
                                      "module")
                elif is_private(alias.name) and source != importer:
                    yield Offence(shown, node.lineno, node.col_offset, alias.name, source,
                                  "import")
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            source = attribute_module(node.value, bound, pkg)
            if source is None or source == importer:
                continue
            target = f"{source}.{node.attr}"
            if pkg.is_module(target):
                owner = private_module_offence(pkg, importer, target)
                if owner:
                    yield Offence(shown, node.lineno, node.col_offset, target, owner, "module")
            else:
                yield Offence(shown, node.end_lineno or node.lineno,
                              (node.end_col_offset or 0) - len(node.attr), node.attr, source,
                              "attribute")


def offences(root: Path, package: str = "memfs") -> list[Offence]:
    """Every offence in the package under `root`, sorted by file and line."""
    pkg = Package(root, package)
    found = [o for path in pkg.modules.values() for o in offences_in(pkg, path)]
    return sorted(set(found), key=lambda o: (str(o.path), o.line, o.col, o.name))


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent
    package = argv[1] if len(argv) > 1 else "memfs"
    found = offences(root, package)
    for offence in found:
        print(offence)
    if found:
        names = {(o.module, o.name) for o in found if o.kind != "module"}
        print(f"{len(found)} uses of {len(names)} private names of other modules "
              f"(a name shared across modules is public: docs/development.md)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
