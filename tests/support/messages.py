"""A scripted Messages API on a free local port, as the memory tool's and a dream's model:
:class:`ScriptedModel` answers each request with the next of its turns (as JSON or as a stream),
:class:`SlowModel` never answers. ``TURNS`` is a memory-tool conversation and
:func:`check_conversation` what it must leave behind; ``DREAM_TURNS`` a dream's."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from anthropic.lib.tools import ToolError

from memfs.models import Actor
from memfs.store import Store


def run(tool: Any, **input: Any) -> tuple[bool, str]:
    """(is_error, text) of one command, as the SDK's runner sees it."""
    try:
        return False, tool.call(input)
    except ToolError as e:
        return True, str(e.content)


def events(store: Store, store_id: str) -> list[dict[str, Any]]:
    rows = store.conn.execute(
        "SELECT body FROM events WHERE store_id = ? ORDER BY seq", (store_id,)).fetchall()
    return [json.loads(r[0]) for r in rows]


def tool_use(id: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "memory", "input": input}


#: The model's turns: each a list of content blocks. The last one ends the conversation.
TURNS: list[list[dict[str, Any]]] = [
    [{"type": "text", "text": "Let me check my memory."},
     tool_use("toolu_01", command="view", path="/memories")],
    [tool_use("toolu_02", command="create", path="/memories/prefs.md",
              file_text="# Preferences\n- coffee: black\n")],
    [tool_use("toolu_03", command="str_replace", path="/memories/prefs.md",
              old_str="black", new_str="with milk"),
     tool_use("toolu_04", command="insert", path="/memories/prefs.md", insert_line=1,
              insert_text="- tea: no")],
    [tool_use("toolu_05", command="rename", old_path="/memories/prefs.md",
              new_path="/memories/user/prefs.md")],
    [tool_use("toolu_06", command="str_replace", path="/memories/user/prefs.md",
              old_str="missing", new_str="x"),
     tool_use("toolu_07", command="create", path="/memories/../escape.md", file_text="x")],
    [tool_use("toolu_08", command="create", path="/memories/tmp.md", file_text="t"),
     tool_use("toolu_09", command="delete", path="/memories/tmp.md")],
    [tool_use("toolu_10", command="view", path="/memories/user/prefs.md")],
    [{"type": "text", "text": "Noted: coffee with milk, no tea."}],
]


def message(i: int, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"msg_{i:02d}", "type": "message", "role": "assistant", "model": "claude-test",
        "content": content, "stop_reason": "tool_use" if any(
            b["type"] == "tool_use" for b in content) else "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def sse(msg: dict[str, Any]) -> bytes:
    """The message as the Messages API streams it."""
    out: list[tuple[str, dict[str, Any]]] = []
    start = dict(msg, content=[], stop_reason=None)
    out.append(("message_start", {"type": "message_start", "message": start}))
    for i, block in enumerate(msg["content"]):
        if block["type"] == "text":
            out.append(("content_block_start", {"type": "content_block_start", "index": i,
                        "content_block": {"type": "text", "text": ""}}))
            out.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": block["text"]}}))
        else:
            out.append(("content_block_start", {"type": "content_block_start", "index": i,
                        "content_block": dict(block, input={})}))
            out.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta",
                                  "partial_json": json.dumps(block["input"])}}))
        out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": msg["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": 5}}))
    out.append(("message_stop", {"type": "message_stop"}))
    return b"".join(f"event: {k}\ndata: {json.dumps(v)}\n\n".encode() for k, v in out)


class ScriptedModel:
    """A Messages API on a free local port that answers each request with the next turn, as
    JSON or as a stream (as the request asks), and keeps every request body."""

    def __init__(self, turns: list[list[dict[str, Any]]]) -> None:
        self.turns = turns
        self.requests: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                model.requests.append(body)
                i = len(model.requests) - 1
                if self.path.split("?")[0] != "/v1/messages" or i >= len(model.turns):
                    self.send_response(400)
                    self.end_headers()
                    return
                msg = message(i, model.turns[i])
                if body.get("stream"):
                    data, kind = sse(msg), "text/event-stream"
                else:
                    data, kind = json.dumps(msg).encode(), "application/json"
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def results(self) -> dict[str, tuple[bool, str]]:
        """Every tool_result the SDK sent back: tool_use_id -> (is_error, text)."""
        out = {}
        for block in (b for r in self.requests for m in r["messages"] if m["role"] == "user"
                      and isinstance(m["content"], list) for b in m["content"]):
            if block.get("type") == "tool_result":
                content = block["content"]
                text = content if isinstance(content, str) else "".join(
                    c["text"] for c in content)
                out[block["tool_use_id"]] = (bool(block.get("is_error")), text)
        return out


def check_conversation(model: ScriptedModel, store: Store, ms: str, final: Any,
                       session_id: str | None = None) -> None:
    assert final.content[0].text == "Noted: coffee with milk, no tea."
    assert len(model.requests) == len(TURNS)
    assert model.requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    r = model.results()
    assert r["toolu_01"] == (False, "Here're the files and directories up to 2 levels deep in "
                             "/memories, excluding hidden items:\n4K\t/memories")
    assert r["toolu_02"] == (False, "File created successfully at: /memories/prefs.md")
    assert r["toolu_03"] == (False, "The memory file has been edited. Here is the snippet "
                             "showing the change (with line numbers):\n     1\t# Preferences\n"
                             "     2\t- coffee: with milk\n     3\t")
    assert r["toolu_04"] == (False, "The file /memories/prefs.md has been edited.")
    assert r["toolu_05"] == (False, "Successfully renamed /memories/prefs.md to "
                             "/memories/user/prefs.md")
    assert r["toolu_06"] == (True, "No replacement was performed, old_str `missing` did not "
                             "appear verbatim in /memories/user/prefs.md.")
    assert r["toolu_07"] == (True, "Path /memories/../escape.md would escape /memories "
                             "directory")
    assert r["toolu_08"] == (False, "File created successfully at: /memories/tmp.md")
    assert r["toolu_09"] == (False, "Successfully deleted /memories/tmp.md")
    assert r["toolu_10"] == (False, "Here's the content of /memories/user/prefs.md with line "
                             "numbers:\n     1\t# Preferences\n     2\t- tea: no\n"
                             "     3\t- coffee: with milk\n     4\t")
    # The store: the memory and its whole history, by whoever the tool acts for.
    [memory] = store.memories.tree(ms)
    assert memory.path == "/user/prefs.md"
    versions = store.versions.list(ms, limit=100).data
    assert sorted(v.operation for v in versions) == [
        "created", "created", "deleted", "modified", "modified", "modified"]
    if session_id is not None:
        assert {v.created_by for v in versions} == {Actor.session(session_id)}
    evs = events(store, ms)
    assert len(evs) == 2 * 10
    assert [e["input"]["command"] for e in evs[0::2]] == [
        "view", "create", "str_replace", "insert", "rename", "str_replace", "create", "create",
        "delete", "view"]
    assert [e["is_error"] for e in evs[1::2]] == [False] * 5 + [True, True] + [False] * 3
    if session_id is not None:
        assert len(store.events.list(session_id, limit=100).data) == 20


#: A dream's turns: the model reads, merges the two memories into one, deletes them, and
#: edits /memories/a.md (which the INPUT store holds too) before the merge.
DREAM_TURNS: list[list[dict[str, Any]]] = [
    [{"type": "text", "text": "Reading the store."},
     tool_use("toolu_01", command="view", path="/memories")],
    [tool_use("toolu_02", command="str_replace", path="/memories/a.md", old_str="alpha",
              new_str="ALPHA"),
     tool_use("toolu_03", command="create", path="/memories/../escape.md", file_text="x")],
    [tool_use("toolu_04", command="create", path="/memories/all.md",
              file_text="ALPHA\nbeta\ncoffee: black\n"),
     tool_use("toolu_05", command="delete", path="/memories/a.md"),
     tool_use("toolu_06", command="delete", path="/memories/d")],
    [{"type": "text", "text": "Merged everything into /all.md."}],
]


class SlowModel:
    """A Messages API that never answers (until shut down): a dream waits on its call."""

    def __init__(self) -> None:
        self.hold = threading.Event()
        self.calls = 0
        slow = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["content-length"]))
                slow.calls += 1
                slow.hold.wait(30)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()
