"""Session scratch: the names of editors' and tools' temporary files, which a mount keeps as
files of its own and never stores (docs/mounts.md, "Scratch files").

An editor saves through files of its own beside the one it edits: vim a binary swap file
(``.x.md.swp``, ``.swx``, ``.swo``...), a probe (``4913``) and a backup (``x.md~``) made by
renaming the file away before writing it again; emacs a lock (``.#x.md``) and a backup
(``x.md~``); ``sed -i`` a temporary file (``sedAb12Cd``) renamed over the file. Stored, each
was a memory with versions of its own (a binary swap file was refused: vim failed to save), and
one edit left half a dozen versions behind. Scratch files hold any bytes, live in the mount's
memory until they are deleted or the mount ends, and are never versions, memories or events;
renamed onto a real name, their content is saved there as one version, as any write is.

:func:`is_scratch` is the one rule of what is scratch; the handlers (:mod:`memfs.fuse.ops`,
:mod:`memfs.fuse.buffers`) ask it when a file is created or renamed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The names of scratch files (the last component of a path; directories are never scratch).
SCRATCH_NAMES = re.compile(
    r"\..+\.sw[a-z]"          # vim's swap files: .x.md.swp, then .swo, .swn..., .swx (a probe)
    r"|.+~"                   # backups: vim's and emacs's x.md~, nano's, emacs's #x.md#~ too
    r"|sed[A-Za-z0-9]{6}"     # GNU sed -i's temporary file (mkstemp's six characters)
    r"|\.#.+"                 # emacs's lock files (.#x.md)
    r"|#.+#"                  # emacs's auto-save files (#x.md#)
    r"|[0-9]+",               # vim's probe (4913, then 5036...): see is_scratch
    re.DOTALL)

#: What a mount's scratch files may hold together, in bytes: a write past it fails with ENOSPC
#: (they live in the daemon's memory).
SCRATCH_BUDGET = 64 * 1024 * 1024
#: How many scratch files a mount may hold at once (each is a node in the daemon's memory,
#: an empty one too): a create past it fails with ENOSPC.
SCRATCH_FILES = 1000

#: vim's probe for whether it can make files in a directory: 4913, else 4913 + 123 * n.
_VIM_PROBE, _VIM_PROBE_STEP = 4913, 123


def is_scratch(name: str) -> bool:
    """Is a file named ``name`` session scratch (never stored)?"""
    if SCRATCH_NAMES.fullmatch(name) is None:
        return False
    if name.isdigit():
        n = int(name)
        return n >= _VIM_PROBE and (n - _VIM_PROBE) % _VIM_PROBE_STEP == 0
    return True


@dataclass(eq=False, slots=True)
class Scratch:
    """What makes a node a scratch file (:attr:`memfs.fuse.tree.Node.scratch`).

    A memory renamed onto a scratch name (vim's and emacs's backup: ``x.md`` → ``x.md~``,
    then a new ``x.md`` is written) is *parked*: its file becomes scratch with its content,
    and the store is not changed yet. Saved at its path again, the memory takes the new
    content as one version (the same memory, its history going on). Else, deleting the
    scratch file deletes the memory, and renaming it onto a real name moves the memory there.
    """

    #: The path of the parked memory, which the store still holds there; None: no memory.
    parked_path: str | None = None
    #: The parked memory's id.
    parked_id: str | None = None
    #: The version of it the mount parked: the change feed's state of that version is not
    #: brought back at its path (a memory changed elsewhere since is).
    parked_version: str | None = None
