"""`memfs run` and its session daemon start fast (issue 11: a session of 8 stores reaches its
command in 0.5 s): the launcher and the daemon do not import the HTTP stacks they do not use.
Each check runs in a fresh interpreter, since this test process has imported everything."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Needed only by `memfs serve`, the Console, `--url` sessions and remote mounts.
HEAVY = ("httpx", "starlette", "jinja2", "hypercorn", "pygments", "memfs.api", "memfs.server",
         "memfs.client", "memfs.console")


def imported_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        check=True, capture_output=True, text=True,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import memfs.cli",  # every `memfs` command, `memfs run` included
    "import memfs.cli, memfs.session",  # the launcher of `memfs run`
    "import memfs.sessionfs",  # the session daemon of a local session
    "import memfs.daemon",  # `memfs mount` of a local store
])
def test_launcher_and_daemon_do_not_import_the_http_stacks(code: str) -> None:
    mods = imported_after(code)
    heavy = sorted(m for m in mods if m.split(".")[0] in HEAVY or m in HEAVY
                   or any(m.startswith(h + ".") for h in HEAVY))
    assert not heavy, f"{code!r} imports {heavy}"
