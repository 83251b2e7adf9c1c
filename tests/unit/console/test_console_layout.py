"""The Console's layout (issue 40): each view a function at the top of its resource's module,
handed the app's Console (datasette's one view per resource), no function too branchy to read
(McCabe, as ruff counts it: a closure counts in the function that holds it), no module too long.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.routing import Route

import memfs.console
from tests.support import need

CONSOLE = Path(memfs.console.__file__).parent
MODULES = sorted(m.name for m in pkgutil.iter_modules([str(CONSOLE)]))
#: The most branches a function of the Console may have (ruff's C901).
MAX_COMPLEXITY = 12


def test_no_function_of_the_console_is_too_complex() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    need(ruff.exists(), "ruff is not installed in this venv (scripts/_setup.sh installs it)")
    r = subprocess.run(
        [str(ruff), "check", "--isolated", "--select", "C901", "--config",
         f"lint.mccabe.max-complexity={MAX_COMPLEXITY}", "--output-format", "concise",
         str(CONSOLE)],
        capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("name", MODULES)
def test_each_module_is_readable_top_to_bottom(name: str) -> None:
    lines = (CONSOLE / f"{name}.py").read_text().count("\n")
    assert lines < 800, f"memfs/console/{name}.py has {lines} lines"


def test_every_page_is_a_view_at_the_top_of_its_module() -> None:
    with_routes = 0
    for name in MODULES:
        module = importlib.import_module(f"memfs.console.{name}")
        routes = getattr(module, "routes", None)
        if routes is None:
            continue
        with_routes += 1
        assert isinstance(routes, list), f"{name}.routes is a table, not a function"
        for route in routes:
            assert isinstance(route, Route)
            view = getattr(module, route.endpoint.__name__, None)
            assert inspect.iscoroutinefunction(view), (name, route.path)
            assert view.__module__ == module.__name__, (name, route.path)
    assert with_routes == 9
