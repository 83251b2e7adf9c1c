"""What keeps the code readable top to bottom (issue 40, docs/development.md): no class with more
than :data:`MAX_PUBLIC_METHODS` public methods, inherited ones included (a god object hides
which part uses which), and no module over :data:`MAX_LINES` lines."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import memfs

MAX_PUBLIC_METHODS = 35
MAX_LINES = 800
PACKAGE = Path(memfs.__file__).parent


def _classes() -> list[type]:
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(memfs.__path__, "memfs."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and obj.__module__ == module.__name__:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def public_methods(cls: type) -> list[str]:
    """The public methods of ``cls``, its bases' included (a property is an attribute)."""
    return [name for name in dir(cls) if not name.startswith("_")
            and callable(getattr(cls, name, None))
            and not inspect.isclass(getattr(cls, name, None))]


def test_no_class_has_more_than_35_public_methods() -> None:
    big = {f"{c.__module__}.{c.__qualname__}": len(public_methods(c)) for c in _classes()
           if len(public_methods(c)) > MAX_PUBLIC_METHODS}
    assert not big, big


def test_no_module_is_over_800_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_the_count_sees_inherited_methods() -> None:
    class Base:
        def a(self) -> None: ...

        def _hidden(self) -> None: ...

    class Child(Base):
        def b(self) -> None: ...

        @property
        def c(self) -> int:
            return 1

    assert sorted(public_methods(Child)) == ["a", "b"]
