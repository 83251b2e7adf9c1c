"""A dream run by any agent program instead of the model: ``memfs dream STORE -s ID --
COMMAND``, launched like ``memfs run`` (:mod:`memfs.launcher`) in the dream's session."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any, cast

from ..models import Dream
from .prompt import build_prompt
from .runner import DB_POLL_SECONDS, HEARTBEAT_SECONDS, identity

log = logging.getLogger("memfs.dreams")  # the dreams' one logger, whichever module logs


def run_command(db_path: str | None, dream_id: str, command: list[str]) -> Dream:
    """Run the pending dream ``dream_id`` with ``command`` as the model: launched like
    ``memfs run`` (memfs.launcher) in the dream's session, the output store mounted read-write
    and the input read-only (``create_new``). Its environment names them:
    ``MEMFS_DREAM_OUTPUT`` and ``MEMFS_DREAM_INPUT`` (mount paths), ``MEMFS_DREAM_PROMPT_FILE``
    (the instructions, the input store and the sessions' transcripts, as a model would get
    them) besides ``memfs run``'s ``MEMFS_SYSTEM_PROMPT_FILE`` (the output's instructions hold
    the dream's). Exit status 0 completes the dream, anything else fails it; a cancel (``memfs
    dream cancel``) stops the command with SIGTERM.

    One database connection set at a time in this process (the launcher's, then one to record
    the outcome): the caller must have closed its own.
    """
    from ..errors import MemfsError
    from ..launcher.command import on_signal, send
    from ..launcher.plan import Launch
    from ..launcher.procs import process_identity
    from ..launcher.runner import Hooks, Launcher
    from ..launcher.state import LaunchState
    from ..store import Store, open_store

    done = threading.Event()

    class DreamSession:
        """The dream's part of its launch (:class:`~memfs.launcher.runner.Hooks`): the
        session is the dream's, a watcher stops the command on a cancel, and the command
        gets the dream's prompt."""

        dream: Dream | None = None
        watcher: threading.Thread | None = None

        def create_session(self, st: LaunchState) -> Any:
            store = cast(Store, st.store)  # a dream's command runs on the local database
            launcher = process_identity(os.getpid())
            if st.root_created and not st.namespace:
                launcher["scratch"] = st.root
            dream = store.dreams.start(dream_id, runner=identity(), session={
                "root": st.root, "launcher": launcher, "status": "idle",
                "agent": {"type": "agent", "id": "local", "name": os.path.basename(command[0])},
                "environment_id": "local"})
            if dream is None:
                raise MemfsError(f"dream {dream_id} is no longer pending")
            self.dream = dream
            session = store.sessions.get(dream.session_id or "")
            paths = {r.memory_store_id: r.mount_path for r in session.resources}
            os.environ["MEMFS_DREAM_ID"] = dream_id
            os.environ["MEMFS_DREAM_OUTPUT"] = paths[dream.output_store_id or ""]
            os.environ["MEMFS_DREAM_INPUT"] = paths[dream.memory_store_id]
            self.watcher = threading.Thread(target=self.watch, args=(st,),
                                            name=f"dream-watch-{dream_id}", daemon=True)
            self.watcher.start()
            return session

        def watch(self, st: LaunchState) -> None:  # a cancel from another process stops CMD
            store = cast(Store, st.store)
            last_beat = time.monotonic()
            while not done.wait(DB_POLL_SECONDS):
                if st.stop_signal is not None:
                    # Canceled: a command started after the cancel was seen (the launcher
                    # missed the signal kept for it, a narrow race) still gets it.
                    if st.unforwarded is not None and st.child is not None:
                        st.unforwarded = None
                        send(st, signal.SIGTERM)
                    continue
                try:
                    if time.monotonic() - last_beat >= HEARTBEAT_SECONDS:
                        last_beat = time.monotonic()
                        status = store.dreams.heartbeat(dream_id)
                    else:
                        status = store.dreams.get(dream_id).status
                except Exception:
                    log.exception("cannot read dream %s", dream_id)
                    continue
                if status == "canceled":
                    # As a SIGTERM to memfs itself: sent to the command if it runs, else kept
                    # for it, and a command not started yet is not started at all.
                    on_signal(st, signal.SIGTERM, None)

        def mounted(self, st: LaunchState) -> None:
            assert st.state_dir is not None and self.dream is not None
            prompt = st.state_dir / "dream-prompt.md"
            prompt.write_text(build_prompt(cast(Store, st.store), self.dream,
                                           os.environ["MEMFS_DREAM_INPUT"]), encoding="utf-8")
            if st.agent is not None:
                os.chown(prompt, st.agent.uid, st.agent.gid)
                prompt.chmod(0o400)
            os.environ["MEMFS_DREAM_PROMPT_FILE"] = str(prompt)

        def cleaning_up(self, st: LaunchState) -> None:
            done.set()  # the watcher stops before the launcher's store closes
            if self.watcher is not None:
                self.watcher.join()

    saved = {k: os.environ.get(k) for k in (
        "MEMFS_DREAM_ID", "MEMFS_DREAM_OUTPUT", "MEMFS_DREAM_INPUT", "MEMFS_DREAM_PROMPT_FILE")}
    error: str | None = None
    ds = DreamSession()
    launcher = Launcher(Launch(attachments=[], command=command, db_path=db_path),
                        Hooks(ds.create_session, ds.mounted, ds.cleaning_up))
    try:
        code = launcher.run()
        if code != 0:
            error = f"{command[0]} exited with status {code}"
    except MemfsError as e:
        error = e.message
    finally:
        done.set()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    with open_store(db_path, create=False) as store:
        if error is None:
            return store.dreams.finish(dream_id, "completed")
        # The command is the model: one that never started wrote nothing to the output.
        return store.dreams.finish(dream_id, "failed", {"type": "command_failed",
                                                       "message": error},
                                  discard_output=launcher.state.child is None)
