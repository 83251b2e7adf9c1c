"""The read-only extended attributes of a mount's files (SPEC §8): what the store knows of the
memory a file shows, so that an agent with ``getfattr`` sees it without reading the file.

- ``user.memfs.memory_id``, ``user.memfs.memory_version_id``, ``user.memfs.content_sha256``:
  every committed file (and ``user.memfs.redacted`` in a time-travel mount, for a version that
  was redacted).
- What the memory says about itself (:class:`memfs.models.MemoryMeta`, derived by the store
  from its front matter and its directory at its last write), each only when the memory has a
  value (ENODATA otherwise, and not listed): ``user.memfs.type``, ``user.memfs.importance``
  (0 to 1), ``user.memfs.expires_at`` (RFC 3339), ``user.memfs.tags`` (comma-separated),
  ``user.memfs.warnings`` (one a line), ``user.memfs.description`` and ``user.memfs.pinned``
  (``true``, only when pinned).

The tree keeps each file's :class:`~memfs.fuse.tree.FileState` (with its meta) from the store's
tree, the change feed and the mount's own writes, so a file written here shows its type at
once, and a change made elsewhere once the feed brings it. None can be set or removed
(``EPERM``). No pyfuse3, no store here.
"""

from __future__ import annotations

from ..models import MemoryMeta
from .history import XATTR_REDACTED
from .tree import FileState

#: Every extended attribute name memfs answers starts so (these, and .history's and .search's).
XATTR_PREFIX = b"user.memfs."
#: Those of every committed file.
XATTRS = (b"user.memfs.memory_id", b"user.memfs.memory_version_id",
          b"user.memfs.content_sha256")
XATTR_TYPE = b"user.memfs.type"
XATTR_IMPORTANCE = b"user.memfs.importance"
XATTR_EXPIRES_AT = b"user.memfs.expires_at"
XATTR_TAGS = b"user.memfs.tags"
XATTR_WARNINGS = b"user.memfs.warnings"
XATTR_DESCRIPTION = b"user.memfs.description"
XATTR_PINNED = b"user.memfs.pinned"
#: Those of what a memory says about itself (each present only with a value).
META_XATTRS = (XATTR_TYPE, XATTR_IMPORTANCE, XATTR_EXPIRES_AT, XATTR_TAGS, XATTR_WARNINGS,
               XATTR_DESCRIPTION, XATTR_PINNED)
#: The names a file answers that nobody may set or remove (EPERM; any other: ENOTSUP, which
#: ``cp -a`` and rsync skip).
READ_ONLY = frozenset((*XATTRS, *META_XATTRS, XATTR_REDACTED))


def meta_xattrs(meta: MemoryMeta | None) -> dict[bytes, bytes]:
    """The extended attributes of what a memory says about itself: those with a value."""
    if meta is None:
        return {}
    out: dict[bytes, bytes] = {}
    if meta.type is not None:
        out[XATTR_TYPE] = meta.type.encode("utf-8")
    if meta.importance is not None:
        out[XATTR_IMPORTANCE] = repr(meta.importance).encode()
    if meta.expires_at is not None:
        out[XATTR_EXPIRES_AT] = meta.expires_at.encode()
    if meta.tags:
        out[XATTR_TAGS] = ",".join(meta.tags).encode("utf-8")
    if meta.warnings:
        out[XATTR_WARNINGS] = "\n".join(meta.warnings).encode("utf-8")
    if meta.description:
        out[XATTR_DESCRIPTION] = meta.description.encode("utf-8")
    if meta.pinned:
        out[XATTR_PINNED] = b"true"
    return out


def file_xattrs(m: FileState, redacted_at: str | None = None) -> dict[bytes, bytes]:
    """Every extended attribute of a committed file showing ``m``, in the order listxattr
    lists them (``redacted_at``: when the version it shows was redacted, in a time-travel
    mount)."""
    out = {XATTRS[0]: m.id.encode(), XATTRS[1]: m.memory_version_id.encode(),
           XATTRS[2]: m.content_sha256.encode()}
    if redacted_at:
        out[XATTR_REDACTED] = redacted_at.encode()
    out.update(meta_xattrs(m.meta))
    return out
