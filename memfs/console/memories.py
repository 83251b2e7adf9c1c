"""(to be written)"""

from __future__ import annotations

from starlette.routing import BaseRoute

from .web import Console


def routes(console: Console) -> list[BaseRoute]:
    return []
