"""The read-only ``.search/`` directory of a mount: a question as a file name, its answer as the
file's content.

``cat "MOUNT/.search/who gets paged at night"`` prints the store's best hits for the question
(:meth:`memfs.store.Store.search.in_store`: words and meaning, best first, 10 at most), one per
line::

    /mnt/memory/notes/people/oncall.md<TAB>0.9312<TAB>Nights and weekends: Dana is paged first…

- **The path first**, as the agent sees it: the mount path followed by the memory's path, so
  ``cut -f1`` gives files that can be read from anywhere (``cut -f1 | xargs -d '\\n' cat``; the
  ``-d '\\n'`` because a path may hold spaces, never a TAB or a newline). Then the score, in
  (0, 1] with 4 decimals, and a one-line snippet (no TAB, no newline). No hit: an empty file.
- **Only hits in the file**, so that every line is one for pipes. When meaning could not rank
  (no provider, the index not built yet, the provider down), words alone answered; the file says
  nothing of it, the tool event does (its text), and so do the extended attributes
  ``user.memfs.search.meaning`` (``true``/``false``), ``user.memfs.search.note`` (why, or how
  much of the store meaning covers), ``user.memfs.search.indexed`` (``N/M`` memories) and
  ``user.memfs.search.model``.
- **Fresh at every use**: the kernel keeps no name or attribute of a question (both timeouts
  0), so every path lookup (``cat``, ``stat``) searches again and returns the size of that
  answer; the ``open`` that follows a lookup (within :data:`REUSE_SECONDS`) reads the same
  answer, so size and content agree. The lookups of one process within that second (``ls -l``
  looks a name up three times) get the same answer while the mount has seen no change
  (:meth:`Search.changed`: its own writes at once, others' from the change feed). A memory is
  found by its words as soon as its write has returned.
- **Each search is a tool event** (operation ``search``, the question file's path, the hits'
  paths and scores and, when words alone answered, why), failed ones too.
- **Only what passes the threshold** (default :data:`~memfs.rules.SEARCH_DEFAULT_THRESHOLD`):
  when nothing does, the file is empty and ``user.memfs.search.best`` gives the best relevance
  seen (``user.memfs.search.note`` says that nothing scored enough); no candidate at all: no
  ``best``.
- **Any question, with options, from a path** (:func:`parse`). A file name cannot hold
  ``/``: in a question it is written ``%2F`` (``%25`` is ``%`` and ``%40`` is ``@``, for a
  question that begins with it; any other ``%`` is itself). A name beginning with ``@`` is an
  option, a directory under which the question (or another option) goes::

      .search/@limit=3/@threshold=0.5/@prefix=people/@words/who is on call

  ``@limit=N`` (hits at most), ``@threshold=S`` (0 to 1), ``@prefix=P`` (only memories whose
  path begins with ``/P``; ``%2F`` for each ``/`` in it: ``@prefix=people%2Fteam``),
  ``@type=T`` (only memories of type ``T``, SPEC §8: ``@type=context``), ``@words`` (words
  alone: at once, while meaning may still be catching up) and, in a session's mount,
  ``@session`` (every store of the session at once, hits merged by relevance, each path
  under its own store's mount). An unknown option is ``ENOENT``; a
  value that is not one (``@limit=x``), an option given twice or a value the store refuses
  (``@limit=1000``) is ``EINVAL``.
- **Refused**: a question over 255 bytes (``ENAMETOOLONG``), one that is not UTF-8
  (``EILSEQ``, as a file name that is not UTF-8 is everywhere in a mount), one the store
  refuses (no word, a control character: ``EINVAL``). NUL cannot be in a file name.
  Every change under ``.search`` is ``EROFS`` (:mod:`memfs.fuse.ops`). ``ls .search/`` lists
  nothing.
- Only where the store searches: a time-travel mount's store (:class:`~memfs.daemons.snapshot.
  SnapshotStore`) does not, and has no ``.search``.

Searches run in a worker thread (a query embedding takes tens of milliseconds, a provider that
hangs up to 2 s): the trio thread keeps serving. No pyfuse3 here: :mod:`memfs.fuse.ops` answers the
kernel with what :class:`Search` returns, and this module is tested alone.
"""

from __future__ import annotations

import errno
import math
import posixpath
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .describe import DESCRIBE
from .history import HISTORY
from .sessionlog import SESSIONS
from .tree import Tree

if TYPE_CHECKING:
    from ..recall.search import Result

__all__ = ["SEARCH", "Search", "SNode", "Answer", "Refused", "Options", "SessionScope", "parse",
           "unescape", "render", "REUSE_SECONDS"]

#: The name of the search directory in a mount's root (hidden from its listing).
SEARCH = ".search"
#: The longest question, in bytes: a file name's limit.
MAX_QUESTION_BYTES = 255
#: Seconds an answer found by a lookup is what the open (or getattr, getxattr) after it reads.
REUSE_SECONDS = 1.0
#: Answers kept at most (of questions the kernel still knows; the oldest dropped first).
ANSWERS_KEPT = 256

XATTR_MEANING = b"user.memfs.search.meaning"
XATTR_NOTE = b"user.memfs.search.note"
XATTR_INDEXED = b"user.memfs.search.indexed"
XATTR_MODEL = b"user.memfs.search.model"
XATTR_BEST = b"user.memfs.search.best"

#: What stands for a character a file name cannot hold (or an option's ``@``) in a question.
_ESCAPE = re.compile("%(2[Ff]|25|40)")

Call = Callable[..., Awaitable[Any]]

_ONE_LINE = str.maketrans({"\t": " ", "\n": " ", "\r": " "})
#: Memories under these are shadowed in a mount (their names are the virtual directories, and
#: the virtual file ``.describe``).
_SHADOWED = ("/" + HISTORY + "/", "/" + SEARCH + "/", "/" + DESCRIBE + "/", "/" + SESSIONS + "/")


class Refused(Exception):
    """A question the mount cannot ask: the errno, and the line for the event log."""

    def __init__(self, errno_: int, why: str) -> None:
        super().__init__(errno_, why)
        self.errno = errno_
        self.why = why


@dataclass(frozen=True)
class Options:
    """A question's options, from the ``@`` directories above it (:func:`parse`)."""

    limit: int | None = None
    threshold: float | None = None
    prefix: str | None = None
    #: Only memories of this type (``@type=context``).
    type: str | None = None
    words: bool = False
    session: bool = False

    def kwargs(self) -> dict[str, Any]:
        """The search's keyword arguments (:meth:`memfs.store.Store.search.in_store`); the type
        only when given."""
        return {"limit": self.limit, "path_prefix": self.prefix, "threshold": self.threshold,
                **({"memory_type": self.type} if self.type is not None else {}),
                **({"channels": ("words",)} if self.words else {})}


@dataclass(frozen=True)
class SessionScope:
    """The session a mount belongs to, for ``@session``: its stores' search
    (:meth:`memfs.store.Store.search.in_session`, bound to the session) and their mount paths
    (store id -> the path its mount shows), both called in a worker thread."""

    search: Callable[..., Result]
    mounts: Callable[[], dict[str, str]]


def unescape(text: str) -> str:
    """A name's text with ``%2F`` (or ``%2f``) as ``/``, ``%25`` as ``%`` and ``%40`` as
    ``@``; any other ``%`` stays itself."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def parse(name: bytes, options: Options = Options(), *, session: bool = False,
          ) -> Options | str:
    """A name under ``.search`` (or under an option directory, whose ``options`` apply): the
    options with the one it names (a name beginning with ``@``), else its question.
    ``session``: the mount belongs to a session (``@session`` exists).

    :raises Refused: ENAMETOOLONG (over 255 bytes), EILSEQ (not UTF-8), ENOENT (an unknown
        option), EINVAL (a value that is not one, an option given twice).
    """
    text = question_of(name)
    if not text.startswith("@"):
        return unescape(text)
    key, has_value, value = text[1:].partition("=")
    flags = ("words", "session") if session else ("words",)
    if key not in ("limit", "threshold", "prefix", "type", *flags):
        known = ", ".join(f"@{k}" for k in ("limit=N", "threshold=S", "prefix=P", "type=T",
                                             *flags))
        raise Refused(errno.ENOENT, f"no search option {text!r} (options: {known}; a "
                      "question beginning with @ is written %40)")
    if getattr(options, key) is not None and getattr(options, key) is not False:
        raise Refused(errno.EINVAL, f"the search option @{key} is given twice")
    if key in flags:
        if has_value:
            raise Refused(errno.EINVAL, f"the search option @{key} takes no value")
        return replace(options, words=True) if key == "words" else replace(options, session=True)
    if not value:
        raise Refused(errno.EINVAL, f"the search option @{key} needs a value: @{key}=...")
    if key == "limit":
        if not value.isascii() or not value.isdigit():
            raise Refused(errno.EINVAL, f"@limit takes a number of hits, not {value!r}")
        return replace(options, limit=int(value))
    if key == "threshold":
        try:
            threshold = float(value)
        except ValueError:
            threshold = math.nan
        if not math.isfinite(threshold) or not value.isascii():
            raise Refused(errno.EINVAL, f"@threshold takes a number from 0 to 1, not {value!r}")
        return replace(options, threshold=threshold)
    if key == "type":
        return replace(options, type=unescape(value))
    prefix = unescape(value)
    return replace(options, prefix=prefix if prefix.startswith("/") else "/" + prefix)


@dataclass
class Answer:
    """A question's answer as the file shows it (``data``), and how it was found."""

    data: bytes
    result: Result
    hits: list[tuple[str, float]]
    mtime_ns: int
    at: float
    #: Who asked, and the mount's changes seen then (:meth:`Search.reusable`).
    pid: int = 0
    gen: int = 0

    def xattrs(self) -> dict[bytes, bytes]:
        r = self.result
        out = {XATTR_MEANING: b"true" if r.meaning else b"false",
               XATTR_INDEXED: f"{r.indexed}/{r.memories}".encode()}
        if r.note:
            out[XATTR_NOTE] = r.note.encode("utf-8")
        if r.model:
            out[XATTR_MODEL] = r.model.encode("utf-8")
        if r.best is not None:
            out[XATTR_BEST] = f"{r.best:.4f}".encode()
        return out

    def summary(self, question: str) -> str:
        """The tool event's text: how many hits, how they were found, then each hit's path
        and score, one a line."""
        n = len(self.hits)
        how = "by words and meaning" if self.result.meaning else "by words only"
        lines = [f"searched for {question!r}: {n} hit{'' if n == 1 else 's'} {how}"
                 + (f" ({self.result.note})" if self.result.note else "")]
        lines += [f"{path}\t{score:.4f}" for path, score in self.hits]
        return "\n".join(lines)


def render(result: Result, display: Callable[[str], str], mounts: dict[str, str] | None = None,
           ) -> tuple[bytes, list[tuple[str, float]]]:
    """The file's content (``path<TAB>score<TAB>snippet`` lines, best first) and the hits it
    shows (their displayed paths and scores). Memories the mount shadows are left out.
    ``mounts``: the hits are a session's (store id -> the path of its mount; the other
    stores' hits are shown under their own mounts)."""
    lines: list[str] = []
    shown: list[tuple[str, float]] = []
    for hit in result.hits:
        if hit.path.startswith(_SHADOWED) or hit.path == "/" + DESCRIBE:
            continue
        if mounts is None:
            path = display(hit.path)
        elif hit.memory_store_id in mounts:
            path = posixpath.join(mounts[hit.memory_store_id], hit.path.lstrip("/"))
        else:
            continue  # a store no mount of the session shows
        shown.append((path, hit.score))
        lines.append(f"{path}\t{hit.score:.4f}\t{hit.snippet.translate(_ONE_LINE)}\n")
    return "".join(lines).encode("utf-8"), shown


@dataclass(eq=False, slots=True)
class SNode:
    """``.search`` itself or an option directory under it (``question`` None), or one
    question's file."""

    ino: int
    question: str | None
    mtime_ns: int
    lookups: int = 0
    handles: int = 0
    answer: Answer | None = None
    #: The size the kernel was last told (the answer a lookup or getattr gave).
    told: int = -1
    #: The options of the directories above it (and its own, for a directory).
    options: Options = field(default_factory=Options)
    #: The path below the mount root, as an agent sees it (``/.search/@limit=3/who is on
    #: call``: the names as written, escapes and all).
    display: str = "/" + SEARCH
    #: The directory it is in (None: ``.search`` itself, in the mount root).
    parent: SNode | None = None

    @property
    def is_dir(self) -> bool:
        return self.question is None

    @property
    def size(self) -> int:
        if self.question is None:
            return 4096
        return len(self.answer.data) if self.answer is not None else 0


def question_of(name: bytes) -> str:
    """A file name under ``.search`` as a question.

    :raises Refused: ENAMETOOLONG (over 255 bytes), EILSEQ (not UTF-8).
    """
    if len(name) > MAX_QUESTION_BYTES:
        raise Refused(errno.ENAMETOOLONG,
                      f"a question is at most {MAX_QUESTION_BYTES} bytes (a file name), "
                      f"not {len(name)}")
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(errno.EILSEQ, "a question must be UTF-8 text") from None


class Search:
    """The ``.search`` directory of one mount.

    :param tree: the mount's tree (its inode allocator).
    :param search: the store's ``search`` (:meth:`memfs.store.Store.search.in_store`, or a server's
        through :class:`memfs.client.Client`).
    :param call: runs a blocking store call in a worker thread
        (:meth:`memfs.fuse.core.Mount.in_thread`): a search may take long.
    :param display: a memory path as the agent sees it (the mount path before it).
    """

    def __init__(self, tree: Tree, search: Callable[..., Result], store_id: str, call: Call,
                 display: Callable[[str], str], session: SessionScope | None = None) -> None:
        self.tree = tree
        self._search = search
        self.store_id = store_id
        self._call = call
        self._display = display
        #: The mount's session (None: it belongs to none, and has no ``@session``).
        self.session = session
        self.nodes: dict[int, SNode] = {}
        self._root: SNode | None = None
        #: The nodes below ``.search`` by their display paths.
        self._files: dict[str, SNode] = {}
        #: Nodes holding an answer, least recently answered first.
        self._answered: OrderedDict[int, None] = OrderedDict()
        #: Searches made (for tests).
        self.searches = 0
        #: Bumped by every change the mount sees (:meth:`changed`).
        self._gen = 0
        #: Called at every change the mount sees (:class:`memfs.fuse.watch.WordsCatchUp`).
        self.on_change: Callable[[], None] | None = None

    @property
    def root(self) -> SNode:
        """``.search`` itself (made at first use: a session daemon renumbers the tree's inodes
        before it loads it)."""
        if self._root is None:
            self._root = SNode(self.tree.new_ino(), None, time.time_ns())
            self.nodes[self._root.ino] = self._root
        return self._root

    def entry(self, parent: SNode, name: bytes) -> SNode:
        """The node of ``name`` in the directory ``parent`` (:func:`parse`): an option's
        directory or a question's file, the same one while the kernel knows it.

        :raises Refused: what :func:`parse` refuses.
        """
        parsed = parse(name, parent.options, session=self.session is not None)
        display = parent.display + "/" + name.decode("utf-8")
        node = self._files.get(display)
        if node is None:
            question, options = ((None, parsed) if isinstance(parsed, Options)
                                 else (parsed, parent.options))
            node = SNode(self.tree.new_ino(), question, time.time_ns(), options=options,
                         display=display, parent=parent)
            self._files[display] = node
            self.nodes[node.ino] = node
        return node

    def file(self, question: str) -> SNode:
        """The node of a question right under ``.search``, as written there."""
        return self.entry(self.root, question.encode("utf-8"))

    def changed(self) -> None:
        """The mount saw a change of the store (its own, or from the change feed): no answer
        found before is :meth:`reusable` any more."""
        self._gen += 1
        if self.on_change is not None:
            self.on_change()

    @property
    def gen(self) -> int:
        """The changes the mount has seen (a count)."""
        return self._gen

    async def ask(self, node: SNode, pid: int = 0) -> Answer:
        """Search the store for the node's question now (``pid`` asks); the answer is kept on
        the node.

        :raises MemfsError: the store refused the question (``InvalidRequest``: no word, a
            control character), or failed.
        """
        assert node.question is not None
        self.searches += 1
        gen = self._gen
        kwargs = node.options.kwargs()
        result: Result
        if node.options.session:
            assert self.session is not None  # parse refuses @session otherwise
            result = await self._call(self.session.search, node.question, **kwargs)
            mounts = await self._call(self.session.mounts)
            mounts[self.store_id] = self._display("/")
            data, hits = render(result, self._display, mounts)
        else:
            result = await self._call(self._search, self.store_id, node.question, **kwargs)
            data, hits = render(result, self._display)
        answer = Answer(data, result, hits, time.time_ns(), time.monotonic(), pid, gen)
        node.answer = answer
        self._answered[node.ino] = None
        self._answered.move_to_end(node.ino)
        while len(self._answered) > ANSWERS_KEPT:
            old, _ = self._answered.popitem(last=False)
            dropped = self.nodes.get(old)
            if dropped is not None:
                dropped.answer = None
        return answer

    @staticmethod
    def recent(node: SNode) -> Answer | None:
        """The node's answer if a lookup found it just now (what the kernel was told)."""
        a = node.answer
        if a is not None and time.monotonic() - a.at < REUSE_SECONDS:
            return a
        return None

    def reusable(self, node: SNode, pid: int) -> Answer | None:
        """The answer a lookup of the same process found just now, if the mount has seen no
        change since (``ls -l`` looks a name up three times: one search)."""
        a = self.recent(node)
        if a is not None and a.pid == pid and a.gen == self._gen:
            return a
        return None

    def forget(self, ino: int, n: int) -> None:
        """The kernel forgot ``n`` lookups of ``ino``."""
        node = self.nodes.get(ino)
        if node is None:
            return
        node.lookups -= n
        self.release_if_unused(node)

    def release_if_unused(self, node: SNode) -> None:
        """Drop a question nobody refers to (asked again, it gets a new inode)."""
        if node.lookups > 0 or node.handles or node.parent is None:
            return
        self.nodes.pop(node.ino, None)
        self._answered.pop(node.ino, None)
        if self._files.get(node.display) is node:
            del self._files[node.display]
