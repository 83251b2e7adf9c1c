"""What ``memfs run`` is asked to do: the stores to attach (``--store REF[@AT][:ACCESS]``, or a
spec file's resources), the command and the options, and the error a launch fails with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import InvalidRequest, MemfsError, NotFound

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
    """One ``--store REF[:access]``, or one ``resources`` entry of a spec file
    (memfs.launcher.spec), which may carry its ``instructions``."""

    ref: str
    access: str = "read_write"
    instructions: str | None = None
    #: Time travel (``NAME@AT``, README "Time travel"): the store as it was at AT, read-only;
    #: set by :meth:`resolve` when the whole REF names no store.
    at: str | None = None
    #: The access was given (``:read_write`` with ``@AT`` is an error, not a default).
    explicit_access: bool = field(default=False, compare=False)

    @classmethod
    def parse(cls, spec: str) -> Attachment:
        """``REF``, ``REF:read_only`` or ``REF:read_write`` (also ``:ro``/``:rw``). A REF may
        itself hold colons: only a known access suffix is split off."""
        ref, sep, access = spec.rpartition(":")
        if sep and ref and access in ACCESS_ALIASES:
            return cls(ref, ACCESS_ALIASES[access], explicit_access=True)
        return cls(spec)

    def resolve(self, store: StoreAPI) -> MemoryStore:
        """The store :attr:`ref` names. A REF no store has that ends in ``:WORD`` was most
        likely a mistyped access mode (``Docs:readonly``): the error says so. A REF no store
        has that holds ``@`` is ``NAME@AT`` (split at the last ``@``): a snapshot, read-only.

        :raises NotFound: no such store. :raises InvalidRequest: an ambiguous name, or
            the unknown access mode, or ``@AT`` with ``:read_write``.
        """
        try:
            return store.stores.resolve(self.ref)
        except NotFound:
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
                "not an access mode (':read_only' or ':ro', ':read_write' or ':rw')"
            ) from None


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
