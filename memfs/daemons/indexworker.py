"""The indexer process of a mount daemon: ``python -m memfs.daemons.indexworker --parent PID
--model MODEL [-v] STORE_ID...``, started by the daemon (:class:`memfs.recall.supervisor.
IndexerProcess`), never by a user. It indexes the stores by meaning and answers the daemon's
questions on its stdin and stdout (:func:`memfs.recall.worker.serve`), and ends once idle.

- The database is ``MEMFS_DB`` and the provider ``MEMFS_EMBEDDINGS``, from the daemon's
  environment (nothing on the command line that another user could read in ``/proc``); a
  provider whose model is not ``--model`` (the one the daemon's searches count vectors of) is
  an error.
- It dies with the daemon: SIGTERM when the daemon's thread that started it ends (the
  parent-death signal; at once if the daemon is gone already), and the end of its stdin.
  SIGTERM ends it as idleness does: a round under way is given a moment to let its lease go.
  SIGINT (a terminal's Ctrl-C, which reaches the daemon's whole process group) is the
  daemon's to act on: ignored.
- Its stdout carries the answers only: anything else written to descriptor 1 goes to stderr,
  the daemon's log, where its own log lines go too.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence

from .. import errors, linux
from ..recall import embeddings, worker
from ..store import open_store
from . import logs

log = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m memfs.daemons.indexworker")
    p.add_argument("--parent", type=int, required=True, help="the daemon's pid")
    p.add_argument("--model", required=True)
    p.add_argument("--idle", type=float, default=worker.IDLE_SECONDS)
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("stores", nargs="+")
    a = p.parse_args(argv)
    linux.die_with_parent(a.parent, signal.SIGTERM)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    fmt = os.environ.get("MEMFS_LOG_FORMAT", "text")
    logs.configure(logging.INFO if a.verbose else logging.WARNING,
                   fmt if fmt in logs.FORMATS else "text")
    try:
        provider = embeddings.from_setting(None)
        if provider is None or provider.model != a.model:
            log.error("the indexer process would embed with %s, its daemon counts %s",
                      provider and provider.model, a.model)
            return 2
        store = open_store(os.environ.get("MEMFS_DB") or None, create=False,
                           synchronous="NORMAL")
    except errors.MemfsError as e:
        log.error("the indexer process cannot start: %s", e.message)
        return 2
    log.info("the indexer process (pid %d) indexes %d store(s) with %s", os.getpid(),
             len(a.stores), provider.model)
    why = worker.serve(store, provider, a.stores, sys.stdin.buffer, answers, idle=a.idle,
                       stop=stop)
    log.info("the indexer process (pid %d) ends: %s", os.getpid(), why)
    # The store is not closed: a round that did not end in time may still use it (os._exit).
    return 0


if __name__ == "__main__":
    code = main()
    logging.shutdown()
    # Not sys.exit: a round of the indexer's thread that did not end in time would hold the
    # interpreter's shutdown; what it had not committed is lost, never half-written.
    os._exit(code)
