"""The mount's handlers' class is made of parts it holds, not of a chain of subclasses: no
class of the package has more than 35 public methods (inherited ones included), and
``.history`` and ``.search`` reach the mount through :class:`memfs.fuse.dotdirs.Host` only
(no private name of another object)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pyfuse3

import memfs.fuse
from memfs.fuse.ops import Operations

MOST_METHODS = 35


def _public_methods(cls: type) -> list[str]:
    return [n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))]


def test_no_class_of_the_mount_has_more_than_35_public_methods() -> None:
    big = {}
    for info in pkgutil.iter_modules(memfs.fuse.__path__):
        module = importlib.import_module(f"memfs.fuse.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and len(_public_methods(cls)) > MOST_METHODS:
                big[f"{module.__name__}.{name}"] = len(_public_methods(cls))
    assert big == {}


def test_operations_has_the_handlers_and_load_only() -> None:
    assert set(_public_methods(Operations)) - set(_public_methods(pyfuse3.Operations)) == {
        "load"}


def test_dotdirs_call_no_private_name_of_another_object() -> None:
    """Only ``self``'s own private names: the mount is reached through ``Host``."""
    source = Path(memfs.fuse.__path__[0], "dotdirs.py").read_text()
    reached = sorted(
        f"{ast.unparse(node.value)}.{node.attr}" for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self"))
    assert reached == []
