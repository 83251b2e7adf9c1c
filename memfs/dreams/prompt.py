"""What a dream's model reads: its system prompt, and a first message with the dream's
instructions, the input store and the sessions' transcripts, within a budget of characters (a
dream run by a command gets the same first message as a file)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..models import Dream
    from ..store import Store

#: How much of the input store and of the transcripts the first message holds (characters);
#: the rest of the store the model reads through the tool (the output starts as its copy).
STORE_CHARS = 120_000
TRANSCRIPT_CHARS = 120_000
EVENT_CHARS = 2_000

SYSTEM = """\
You are dreaming: consolidating a memory store that agents use as long-term memory.
The memory directory /memories is the dream's OUTPUT store. {start}
Read the memories and the session transcripts below, then reorganise /memories with the \
memory tool: merge fragmented and duplicate memories, fix contradictions in favour of the \
newest information, drop what is obsolete, keep every durable fact, keep files small and \
well named. Use only the memory tool. When the store is consolidated, reply with a short \
summary of what you changed and stop."""


def _text(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def _event_line(body: dict[str, Any]) -> str:
    kind = body.get("type", "?")
    parts = []
    content = body.get("content")
    if isinstance(content, list):
        parts.append("".join(b.get("text", "") for b in content if isinstance(b, dict)))
    elif isinstance(content, str):
        parts.append(content)
    for key in ("name", "input", "is_error"):
        if key in body:
            parts.append(f"{key}={_text(body[key], EVENT_CHARS)}")
    return f"[{kind}] " + _text(" ".join(p for p in parts if p), EVENT_CHARS)


def build_prompt(store: Store, dream: Dream, root: str = "/memories") -> str:
    """The first message: the instructions, the input store (its paths under ``root``) and
    the sessions' transcripts."""
    out: list[str] = []
    if dream.instructions:
        out.append(f"<instructions>\n{dream.instructions}\n</instructions>")
    budget = STORE_CHARS
    files = []
    for m in store.memories.tree(dream.memory_store_id):
        full = store.memories.get(dream.memory_store_id, m.id)
        text = full.content or ""
        if budget <= 0:
            files.append(f'<memory path="{root}{m.path}" omitted="read it there"/>')
            continue
        shown = text[:budget]
        budget -= len(shown)
        files.append(f'<memory path="{root}{m.path}">\n{shown}\n</memory>')
    out.append("<input_store>\n" + ("\n".join(files) or "(empty)") + "\n</input_store>")
    budget = TRANSCRIPT_CHARS
    for sid in dream.session_ids:
        lines: list[str] = []
        page = None
        while budget > 0:
            p = store.events.list(sid, limit=1000, page=page)
            for e in p.data:
                line = _event_line(e.body)
                lines.append(line[:budget])
                budget -= len(lines[-1])
                if budget <= 0:
                    lines.append("… [the transcripts go on; cut here]")
                    break
            if p.next_page is None:
                break
            page = p.next_page
        out.append(f'<session id="{sid}">\n' + "\n".join(lines) + "\n</session>")
    return "\n\n".join(out)
