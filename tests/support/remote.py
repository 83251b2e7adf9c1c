"""Remote mounts (``memfs --url URL mount``) of a real ``memfs serve``: the key and the memory
limit of the server of tests/integration/conftest.py's ``server`` fixture (and its ``sdk`` and
``mounts``), and the environment that makes a mount remote."""

from __future__ import annotations

KEY = "sk-memfs-remote"
#: The module's server runs with this memory limit (MEMFS_MAX_MEMORIES), for ENOSPC.
MAX_MEMORIES = 6


def remote_env(url: str, key: str = KEY) -> dict[str, str]:
    return {"MEMFS_URL": url, "MEMFS_API_KEY": key}
