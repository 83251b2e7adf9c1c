"""What the agent gets to reach the API: its session's own token, with the server's URL or,
on a local database, the URL of the session API the launcher serves on a unix socket
(:mod:`memfs.launcher.sessionapi`), from its start to its end."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..errors import MemfsError
from .setup import Setup

#: The longest path of the session API's unix socket (sun_path: 108 bytes with its NUL).
SOCKET_PATH_MAX = 100


class Credential(Setup):
    """The agent's credential and the session API."""

    def _agent_credentials(self) -> dict[str, str]:
        """What CMD gets to reach the API: the session's own token (never a server key, nor
        the database), with the server's URL, or on a local database the URL of the session
        API this launcher serves (:mod:`memfs.launcher.sessionapi`). Called once the session
        runs."""
        assert self.session is not None
        url = self.launch.url or self.api.url
        token = self.store.sessions.create_token(self.session.id,
                                                ttl_seconds=self.launch.token_ttl)
        return {"MEMFS_URL": url, "MEMFS_API_KEY": token.token}

    def _start_api(self) -> None:
        """On a local database: the session API's socket (:mod:`memfs.launcher.sessionapi`), in the
        state directory; it is served once CMD runs."""
        assert self.state_dir is not None and self.session is not None
        if self.launch.url:
            return
        from .sessionapi import SessionAPI

        path = self.state_dir / "api.sock"
        if len(os.fsencode(path)) > SOCKET_PATH_MAX:
            # A long $TMPDIR: a short directory of our own for it (sun_path holds 108 bytes).
            self._api_dir = Path(tempfile.mkdtemp(prefix="memfs-api-", dir="/tmp"))
            if self.agent is not None:
                self._api_dir.chmod(0o711)
            path = self._api_dir / "api.sock"
        owner = (self.agent.uid, self.agent.gid) if self.agent is not None else None
        self.api = SessionAPI(self.store, path, owner, session_id=self.session.id)
        try:
            self.api.listen()
        except MemfsError as e:
            self._fail(e.message)

    def _stop_api(self) -> None:
        """The session API (local database): nobody of the session is left to use it."""
        if self.api is not None:
            self.api.stop()
        if self._api_dir is not None:
            shutil.rmtree(self._api_dir, ignore_errors=True)
