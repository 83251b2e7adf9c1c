"""The launcher is functions over one state object (issue 40): no class of it is a god object
(at most 35 public methods, inherited ones included), and none inherits from another of its
classes, so that a session's launch is followed through named functions, with no inherited
hop. Each module stays readable (at most 800 lines)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import memfs.launcher

PACKAGE = Path(memfs.launcher.__file__).parent
MODULES = sorted(m.name for m in pkgutil.iter_modules([str(PACKAGE)]))


def classes(module: str) -> list[type]:
    """The classes ``memfs.launcher.<module>`` defines (not those it imports)."""
    mod = importlib.import_module(f"memfs.launcher.{module}")
    return [c for _, c in inspect.getmembers(mod, inspect.isclass)
            if c.__module__ == mod.__name__]


def public_methods(cls: type) -> list[str]:
    return [n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))]


@pytest.mark.parametrize("module", MODULES)
def test_no_class_has_more_than_35_public_methods(module: str) -> None:
    for cls in classes(module):
        methods = public_methods(cls)
        assert len(methods) <= 35, (cls.__qualname__, len(methods))


@pytest.mark.parametrize("module", MODULES)
def test_no_class_inherits_from_another_of_the_launcher(module: str) -> None:
    for cls in classes(module):
        for base in cls.__mro__[1:]:
            assert not base.__module__.startswith("memfs.launcher."), (cls, base)


@pytest.mark.parametrize("module", MODULES)
def test_modules_stay_under_800_lines(module: str) -> None:
    lines = len((PACKAGE / f"{module}.py").read_text().splitlines())
    assert lines <= 800, (module, lines)
