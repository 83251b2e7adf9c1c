"""A session's conversation as text people and models read (SPEC §9): its messages whole,
each tool call on one line, every other event left out.

One formatter for every reader of a transcript: ``transcript.md`` in a mount's ``.sessions/``,
the history block of a resumed session's prompt file, ``memfs session events``. Pure
functions of the events (which never change once recorded), so the same events always give
the same text: a prompt file re-rendered later is byte for byte what the model saw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..models import Event
from .common import MESSAGE_EVENT_TYPES

#: The most characters of a tool line's parts (a path, the error of a failed call): a tool
#: line is a hint of what the agent did, not a copy of its output.
TOOL_PART_CHARS = 160
#: What stands in the text of a message for a block that is not text.
_BLOCK_NAMES = {"redacted": "[redacted]", "image": "[image]", "document": "[document]"}

Role = Literal["user", "agent", "tool"]


def message_text(event_body: Mapping[str, Any]) -> str | None:
    """The text of a ``user.message`` or ``agent.message`` (its text blocks joined by a blank
    line; an image, a document or a redacted block as ``[image]``…); None for any other
    event. A body that does not hold the blocks it should (an old or hand-made event) gives
    what text it has, never an error."""
    if event_body.get("type") not in MESSAGE_EVENT_TYPES:
        return None
    content = event_body.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(kind, str):
            parts.append(_BLOCK_NAMES.get(kind, f"[{kind}]"))
    return "\n\n".join(parts)


def transcript_body(event_body: Mapping[str, Any]) -> dict[str, Any]:
    """What of ``event_body`` the transcript reads, and nothing else: a message's text blocks
    (its other blocks by their type), a tool use's name and path, a result's use and, when
    it failed, the line it shows. The same transcript comes of it; a reader that holds many
    events (a resumed session's history) keeps these, not an image's data or a file's text.
    """
    kind = event_body.get("type")
    slim: dict[str, Any] = {"type": kind}
    if kind in MESSAGE_EVENT_TYPES:
        content = event_body.get("content")
        if isinstance(content, list):
            content = [
                {"type": "text", "text": b["text"]}
                if b.get("type") == "text" and isinstance(b.get("text"), str)
                else {"type": b.get("type")}
                for b in content if isinstance(b, Mapping)
            ]
        slim["content"] = content
    elif kind == "agent.tool_use":
        inp = event_body.get("input")
        inp = inp if isinstance(inp, Mapping) else {}
        slim["name"] = event_body.get("name")
        slim["input"] = {k: inp[k] for k in ("operation", "file_path", "new_path") if k in inp}
    elif kind == "agent.tool_result":
        slim["tool_use_id"] = event_body.get("tool_use_id")
        slim["is_error"] = bool(event_body.get("is_error"))
        if slim["is_error"]:
            slim["content"] = [{"type": "text", "text": _outcome(event_body)[len("error: "):]}]
    return slim


def event_line(event: Event, result: Event | None = None) -> str | None:
    """One line for a tool call: its ``agent.tool_use`` and, when given, the
    ``agent.tool_result`` that answers it, condensed (``tool memory view /notes/a.md -> ok``,
    ``… -> error: No such file``). None for every other event, a result included (it is part
    of its use's line; :func:`transcript_entries` pairs them). No newline in it, whatever the
    event holds, and each part cut at :data:`TOOL_PART_CHARS`."""
    if event.type != "agent.tool_use":
        return None
    body = event.body
    inp = body.get("input")
    inp = inp if isinstance(inp, Mapping) else {}
    parts = ["tool", _one_line(body.get("name")) or "?"]
    for key in ("operation", "file_path"):
        if inp.get(key) is not None:
            parts.append(_one_line(inp[key]))
    if inp.get("new_path") is not None:
        parts += ["->", _one_line(inp["new_path"])]
    line = " ".join(p for p in parts if p)
    if result is not None:
        line += " -> " + _outcome(result.body)
    return line


@dataclass(frozen=True)
class Entry:
    """One entry of a transcript: a message (``user``, ``agent``) or a tool call (``tool``,
    one line). ``event_id`` is the message's event, or the tool call's ``agent.tool_use``."""

    role: Role
    time: str
    text: str
    event_id: str

    def markdown(self) -> str:
        """The entry as ``transcript.md`` writes it (without the blank line between
        entries): a message's header, a blank line and its text quoted (:func:`quote`)."""
        if self.role == "tool":
            return f"- {self.text}"
        return f"**{self.role}** ({_short_time(self.time)}):\n\n{quote(self.text)}"


def transcript_entries(events: Iterable[Event]) -> list[Entry]:
    """The transcript of ``events`` (in the order given, which is time order for a session's
    listing): each message an entry, each tool call one entry (its result joined to it, the
    entry at the use's place), every other event left out. A result whose use is not among
    ``events`` is left out too: it has nothing to say on its own."""
    entries: list[Entry] = []
    uses: dict[str, tuple[int, Event]] = {}  # a use's id -> its entry's index and the use,
    # until its result comes
    for e in events:
        text = message_text(e.body)
        if text is not None:
            role: Role = "user" if e.type == "user.message" else "agent"
            entries.append(Entry(role, e.processed_at, text, e.id))
        elif e.type == "agent.tool_use":
            line = event_line(e)
            assert line is not None
            uses[e.id] = (len(entries), e)
            entries.append(Entry("tool", e.processed_at, line, e.id))
        elif e.type == "agent.tool_result":
            pending = uses.pop(str(e.body.get("tool_use_id", "")), None)
            if pending is not None:
                at, use = pending
                joined = event_line(use, e)
                assert joined is not None
                entries[at] = Entry("tool", entries[at].time, joined, use.id)
    return entries


def transcript_markdown(events: Iterable[Event], *, title: str | None = None) -> str:
    """``transcript.md``: ``title`` as a heading when given, then each entry of
    :func:`transcript_entries` (messages as ``**user** (time):`` and their text, tool calls
    one line each), a blank line between. Ends with a newline; empty when there is nothing
    to show and no title."""
    blocks = [f"# {title}"] if title else []
    blocks += [entry.markdown() for entry in transcript_entries(events)]
    return "\n\n".join(blocks) + "\n" if blocks else ""


def quote(text: str) -> str:
    """``text`` as a Markdown quote: each of its lines (split at every line break a reader
    may see: ``\\r``, U+2028…) after ``> `` (a blank one ``>``), joined by ``\\n``. A
    message's words can then never start a line of the transcript: not a header
    (``**user** (time):``), not a tool line, so no message fakes another speaker's turn
    (review 43 #4)."""
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines() or [""])


def _outcome(body: Mapping[str, Any]) -> str:
    """``ok``, or ``error: `` and the first line of what the failed call said."""
    if not body.get("is_error"):
        return "ok"
    content = body.get("content")
    texts = [
        str(b.get("text", "")) for b in content if isinstance(b, Mapping)
    ] if isinstance(content, list) else [str(content or "")]
    first = next((line for t in texts for line in t.splitlines() if line.strip()), "")
    return f"error: {_one_line(first)}" if first else "error"


def _one_line(value: Any) -> str:
    """``value`` as text on one line (every run of white space one space), cut at
    :data:`TOOL_PART_CHARS` with an ellipsis."""
    text = " ".join(str(value if value is not None else "").split())
    if len(text) > TOOL_PART_CHARS:
        text = text[:TOOL_PART_CHARS - 1] + "…"
    return text


def _short_time(time: str) -> str:
    """A stored time (``2026-12-06T15:00:00.123456Z``) to the second, in UTC
    (``2026-12-06 15:00:00Z``); anything else as it is."""
    if len(time) >= 20 and time[10] == "T" and time.endswith("Z"):
        return f"{time[:10]} {time[11:19]}Z"
    return time
