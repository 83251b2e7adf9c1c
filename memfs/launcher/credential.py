"""What the agent gets to reach the API: its session's own token, with the server's URL or,
on a local database, the URL of the session API the launcher serves on a unix socket
(:mod:`memfs.launcher.sessionapi`), from its start to its end."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..errors import MemfsError
from .state import LaunchState, fail

#: The longest path of the session API's unix socket (sun_path: 108 bytes with its NUL).
SOCKET_PATH_MAX = 100


def agent_credentials(st: LaunchState) -> dict[str, str]:
    """What CMD gets to reach the API: the session's own token (never a server key, nor
    the database), with the server's URL, or on a local database the URL of the session
    API this launcher serves (:mod:`memfs.launcher.sessionapi`). Called once the session
    runs."""
    assert st.session is not None
    if st.launch.url:
        url = st.launch.url
    else:
        assert st.api is not None  # start_api made it, on a local database
        url = st.api.url
    token = st.store.sessions.create_token(st.session.id,
                                          ttl_seconds=st.launch.token_ttl)
    return {"MEMFS_URL": url, "MEMFS_API_KEY": token.token}


def start_api(st: LaunchState) -> None:
    """On a local database: the session API's socket (:mod:`memfs.launcher.sessionapi`), in the
    state directory; it is served once CMD runs."""
    assert st.state_dir is not None and st.session is not None
    if st.launch.url:
        return
    from .sessionapi import SessionAPI

    path = st.state_dir / "api.sock"
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        # A long $TMPDIR: a short directory of our own for it (sun_path holds 108 bytes).
        st.api_dir = Path(tempfile.mkdtemp(prefix="memfs-api-", dir="/tmp"))
        if st.agent is not None:
            st.api_dir.chmod(0o711)
        path = st.api_dir / "api.sock"
    owner = (st.agent.uid, st.agent.gid) if st.agent is not None else None
    st.api = SessionAPI(st.store, path, owner, session_id=st.session.id)
    try:
        st.api.listen()
    except MemfsError as e:
        fail(st, e.message)


def stop_api(st: LaunchState) -> None:
    """The session API (local database): nobody of the session is left to use it."""
    if st.api is not None:
        st.api.stop()
    if st.api_dir is not None:
        shutil.rmtree(st.api_dir, ignore_errors=True)
