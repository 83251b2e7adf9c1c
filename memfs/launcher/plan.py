"""What ``memfs run`` is asked to do: the stores to attach (``--store
REF[@AT][:ACCESS][:SCOPE][:pinned=N]``, or a spec file's resources), the command and the
options, and the error a launch fails with."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import InvalidRequest, MemfsError, NotFound
from ..rules import SCOPES
from .history import DEFAULT_BUDGET, DEFAULT_MESSAGES

if TYPE_CHECKING:
    from ..models import MemoryStore
    from ..protocol import StoreAPI

ACCESS_ALIASES = {"read_only": "read_only", "read_write": "read_write",
                  "ro": "read_only", "rw": "read_write"}


class LaunchError(MemfsError):
    """The session could not be set up, CMD could not be started, or a mount died.

    ``status`` is the exit status ``memfs run`` should end with (126/127 like a shell when
    CMD cannot be executed / is not found, else 1).
    """

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Attachment:
    """One ``--store REF[:access][:scope]``, or one ``resources`` entry of a spec file
    (memfs.launcher.spec), which may carry its ``instructions``."""

    ref: str
    access: str = "read_write"
    instructions: str | None = None
    #: Time travel (``NAME@AT``, README "Time travel"): the store as it was at AT, read-only;
    #: set by :meth:`resolve` when the whole REF names no store.
    at: str | None = None
    #: The access was given (``:read_write`` with ``@AT`` is an error, not a default).
    explicit_access: bool = field(default=False, compare=False)
    #: general or workflow (SPEC §8): what the store holds for this session.
    scope: str = "general"
    #: The characters of pinned memories this store may put in the prompt (SPEC §9,
    #: ``:pinned=N``; None: the store's default, 4,000).
    pinned_budget: int | None = None
    #: The suffixes :meth:`parse` split off REF, in order (``("read_only", "workflow")``):
    #: a store whose name ends in one is still found (:meth:`resolve`).
    suffixes: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def parse(cls, spec: str) -> Attachment:
        """``REF``, then at most one access suffix (``:read_only``, ``:read_write``, also
        ``:ro``/``:rw``), one scope suffix (``:general``, ``:workflow``) and one budget of
        pinned memories (``:pinned=8000``, characters), in any order:
        ``"Sprint 12:read_only:workflow"``. A REF may itself hold colons: only known
        suffixes, one of each kind, are split off (``x:ro:rw`` is the store ``x:ro``)."""
        ref, words = spec, list[str]()
        while len(words) < 3:
            head, sep, word = ref.rpartition(":")
            if not (sep and head) or _kind(word) is None \
                    or any(_kind(w) == _kind(word) for w in words):
                break
            ref, words = head, [word, *words]
        return cls._with(ref, tuple(words))

    @classmethod
    def _with(cls, ref: str, words: tuple[str, ...]) -> Attachment:
        access = next((ACCESS_ALIASES[w] for w in words if w in ACCESS_ALIASES), None)
        scope = next((w for w in words if w in SCOPES), SCOPES[0])
        budget = next((int(w.removeprefix("pinned=")) for w in words
                       if _kind(w) == "pinned"), None)
        return cls(ref, access or "read_write", explicit_access=access is not None,
                   scope=scope, pinned_budget=budget, suffixes=words)

    def resolve(self, store: StoreAPI) -> MemoryStore:
        """The store :attr:`ref` names. A REF no store has that ends in ``:WORD`` was most
        likely a mistyped access mode or scope (``Docs:readonly``): the error says so. A REF
        no store has that holds ``@`` is ``NAME@AT`` (split at the last ``@``): a snapshot,
        read-only. When no store has the REF left by :meth:`parse` but one is named with
        its first suffixes (a store named ``Plan:workflow``, made before scopes), that one
        is attached, with the suffixes after them.

        :raises NotFound: no such store. :raises InvalidRequest: an ambiguous name, or
            the unknown access mode, or ``@AT`` with ``:read_write``.
        """
        try:
            return store.stores.resolve(self.ref)
        except NotFound:
            for k in range(1, len(self.suffixes) + 1):
                named = self._with(":".join((self.ref, *self.suffixes[:k])), self.suffixes[k:])
                try:
                    found = store.stores.resolve(named.ref)
                except NotFound:
                    continue
                self.ref, self.access, self.scope = named.ref, named.access, named.scope
                self.pinned_budget = named.pinned_budget
                self.explicit_access, self.suffixes = named.explicit_access, named.suffixes
                return found
            name, sep, at = self.ref.rpartition("@")
            if sep and not name:
                raise InvalidRequest(f"--store {self.ref!r}: no store name before '@' "
                                     "(NAME@AT: the store NAME as it was at AT)") from None
            if sep and name and at and self.at is None:
                found = store.stores.resolve(name)
                if self.explicit_access and self.access == "read_write":
                    raise InvalidRequest(
                        f"--store {self.ref!r}: a store as it was at {at} is a read-only "
                        "snapshot; drop ':read_write'") from None
                self.ref, self.at, self.access = name, at, "read_only"
                return found
            name, sep, mode = self.ref.rpartition(":")
            if not (sep and name):
                raise
            raise InvalidRequest(
                f"--store {self.ref!r}: no memory store has that id or name, and {mode!r} is "
                "neither an access mode (':read_only' or ':ro', ':read_write' or ':rw'), a "
                "scope (':general', ':workflow') nor a budget of pinned memories "
                "(':pinned=8000')"
            ) from None


def _kind(word: str) -> str | None:
    """The kind of a ``--store`` suffix (None: not one)."""
    if word in ACCESS_ALIASES:
        return "access"
    if word in SCOPES:
        return "scope"
    if re.fullmatch(r"pinned=[0-9]{1,9}", word):
        return "pinned"
    return None


@dataclass(frozen=True)
class Resume:
    """``memfs run --resume SESSION``: the session to go on from, and how much of its
    conversation the prompt gets (:mod:`memfs.launcher.history`)."""

    session_id: str
    messages: int = DEFAULT_MESSAGES
    budget: int = DEFAULT_BUDGET


@dataclass
class Launch:
    """What ``memfs run`` was asked to do.

    :param instructions: ``(REF, TEXT)`` pairs; REF names an attached store by id or name
        (matched after resolution, so ``--store notes`` and ``--instructions <its id>=…`` agree).
    """

    attachments: list[Attachment]
    command: Sequence[str]
    root: str | None = None
    db_path: str | None = None
    #: A memfs server (``memfs run --url``): the session lives there and every mount is a
    #: remote mount of it; ``db_path`` is then unused.
    url: str | None = None
    api_key: str | None = None
    isolation: str = "auto"  # auto | namespace | none
    #: ``none``: CMD in a network namespace of its own, with only ``lo`` (and the session
    #: API's unix socket, a file); ``host``: the host's network.
    network: str = "host"
    instructions: list[tuple[str, str]] = field(default_factory=list)
    #: The session's title (default: the command line) and metadata (``--spec``).
    title: str | None = None
    metadata: dict[str, str] | None = None
    #: ``USER[:GROUP]`` (names or numbers) to run CMD as; None: the invoking user of a
    #: ``sudo`` (SUDO_UID/SUDO_GID), else the launcher's own user.
    user: str | None = None
    #: Seconds CMD's session token lives at most (None: the store's default, one day).
    token_ttl: float | None = None
    #: The session this one resumes (``--resume``): its attachments unless ``attachments``
    #: names others, its last messages in the prompt (:mod:`memfs.launcher.resume`).
    resume: Resume | None = None
