"""memfs/daemons/hypercorn_glue.py: memfs serve writes a response's head and body in one send
when its length is known; and what the glue takes of hypercorn's internals is still there, as
it was, in the installed hypercorn."""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.metadata
import inspect
import re
from pathlib import Path

import h11
import pytest

from memfs.daemons import hypercorn_glue


class _Protocol:
    """What ``_send_h11_event_coalesced`` uses of hypercorn's H11Protocol."""

    def __init__(self) -> None:
        self.connection = h11.Connection(h11.SERVER)
        self.connection.receive_data(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        assert isinstance(self.connection.next_event(), h11.Request)
        self.sent: list[bytes] = []

    async def send(self, event) -> None:
        self.sent.append(event.data)


async def test_a_sized_response_leaves_in_one_send():
    p = _Protocol()
    send = hypercorn_glue.send_h11_event_coalesced
    await send(p, h11.Response(status_code=200, headers=[("content-length", "2")]))
    assert p.sent == []
    await send(p, h11.Data(data=b"{}"))
    await send(p, h11.EndOfMessage())
    assert len(p.sent) == 1
    assert p.sent[0].startswith(b"HTTP/1.1 200 ") and p.sent[0].endswith(b"\r\n\r\n{}")


async def test_a_streamed_response_sends_its_head_at_once():
    p = _Protocol()
    send = hypercorn_glue.send_h11_event_coalesced
    await send(p, h11.Response(status_code=200, headers=[("transfer-encoding", "chunked")]))
    assert len(p.sent) == 1 and p.sent[0].startswith(b"HTTP/1.1 200 ")
    await send(p, h11.Data(data=b"event: ping\n\n"))
    await send(p, h11.EndOfMessage())
    assert len(p.sent) == 3 and p.sent[2] == b"0\r\n\r\n"


# -- what the glue needs of hypercorn, checked against the installed hypercorn ----------------
#
# memfs/daemons/hypercorn_glue.py copies, replaces or calls parts of hypercorn that are not its
# public API. An upgrade that changes one must fail here, not in production: each is looked up
# in hypercorn's source (not the live attribute, which the glue may have replaced in this
# process), with its parameters; what the glue copies or replaces also with a digest of its
# code, so that any change to it asks for the glue to be read again (then the digest updated).

#: (module, qualified name) -> its parameters, and the sha256 of its source for what the glue
#: copies (worker_serve) or replaces (the three H11Protocol methods), else None.
USED: dict[tuple[str, str], tuple[list[str], str | None]] = {
    ("hypercorn.trio.run", "worker_serve"): (
        ["app", "config", "sockets", "shutdown_trigger", "task_status"],
        "47dbf21919025cef4796ba39111fb9c9c612998caa6d00f86cb4916d1cf1610d"),
    ("hypercorn.protocol.h11", "H11Protocol._send_error_response"): (
        ["self", "status_code"],
        "68a7ecde02aa510259deac8ee62e52a3f5a5544ac5ee54f2556622176f6500f1"),
    ("hypercorn.protocol.h11", "H11Protocol._create_stream"): (
        ["self", "request"], "3a510f381035a80a11bb13473b33a7e895febe07485c71f03a5da6b35b986556"),
    ("hypercorn.protocol.h11", "H11Protocol._send_h11_event"): (
        ["self", "event"], "86c3cfb31ad840553856b777510d3bad8a67790897e63ae0cc1f7090b955f30d"),
    ("hypercorn.logging", "Logger.access"): (
        ["self", "request", "response", "request_time"], None),
    ("hypercorn.trio.lifespan", "Lifespan.__init__"): (["self", "app", "config", "state"], None),
    ("hypercorn.trio.lifespan", "Lifespan.handle_lifespan"): (["self", "task_status"], None),
    ("hypercorn.trio.lifespan", "Lifespan.wait_for_startup"): (["self"], None),
    ("hypercorn.trio.lifespan", "Lifespan.wait_for_shutdown"): (["self"], None),
    ("hypercorn.trio.tcp_server", "TCPServer.__init__"): (
        ["self", "app", "config", "context", "state", "stream"], None),
    ("hypercorn.trio.worker_context", "WorkerContext.__init__"): (
        ["self", "max_requests"], None),
    ("hypercorn.utils", "raise_shutdown"): (["shutdown_event"], None),
    ("hypercorn.utils", "repr_socket_addr"): (["family", "address"], None),
    ("hypercorn.utils", "wrap_app"): (["app", "wsgi_max_body_size", "mode"], None),
}

#: (module, class) -> the attributes the glue reads of its instances, set in its __init__.
ATTRIBUTES: dict[tuple[str, str], set[str]] = {
    ("hypercorn.protocol.h11", "H11Protocol"): {"config", "connection", "send"},
    ("hypercorn.trio.worker_context", "WorkerContext"): {"terminate", "terminated"},
    ("hypercorn.logging", "Logger"): {"access_logger"},
}


def _source(module: str) -> str:
    return Path(inspect.getsourcefile(importlib.import_module(module)) or "").read_text()


def _definition(module: str, qualname: str) -> tuple[ast.AST, str]:
    """The definition of ``module.qualname`` in hypercorn's source, and that source."""
    source = _source(module)
    node: ast.AST = ast.parse(source)
    for name in qualname.split("."):
        found = [n for n in ast.iter_child_nodes(node) if isinstance(
            n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name]
        assert found, f"hypercorn {hypercorn_version()}: {module}.{qualname} is gone"
        node = found[0]
    return node, source


def hypercorn_version() -> str:
    return importlib.metadata.version("hypercorn")


@pytest.mark.parametrize(("module", "qualname"), sorted(USED))
def test_what_the_glue_uses_of_hypercorn_is_there_as_it_was(module: str, qualname: str) -> None:
    params, digest = USED[module, qualname]
    node, source = _definition(module, qualname)
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    a = node.args
    have = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    assert have == params, (
        f"hypercorn {hypercorn_version()}: {module}.{qualname} takes {have}, not {params}: "
        "adapt memfs/daemons/hypercorn_glue.py")
    if digest is not None:
        code = ast.get_source_segment(source, node, padded=True) or ""
        now = hashlib.sha256(code.encode()).hexdigest()
        assert now == digest, (
            f"hypercorn {hypercorn_version()}: {module}.{qualname} changed; memfs's copy or "
            "replacement of it (memfs/daemons/hypercorn_glue.py) may be out of date: read the "
            "new code, adapt the glue, then put its digest here")


@pytest.mark.parametrize(("module", "cls"), sorted(ATTRIBUTES))
def test_the_attributes_the_glue_reads_are_set_by_hypercorn(module: str, cls: str) -> None:
    node, _ = _definition(module, f"{cls}.__init__")
    assigned = {t.attr for n in ast.walk(node) if isinstance(n, ast.Assign | ast.AnnAssign)
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                and t.value.id == "self"}
    missing = ATTRIBUTES[module, cls] - assigned
    assert not missing, f"hypercorn {hypercorn_version()}: {cls} no longer sets {missing}"


def test_the_names_the_glue_imports_and_the_config_it_reads_exist() -> None:
    from hypercorn.config import Config
    from hypercorn.events import Closed, RawData
    from hypercorn.typing import ConnectionState
    from hypercorn.utils import ShutdownError

    assert issubclass(ShutdownError, Exception) and ConnectionState and Closed()
    assert RawData(data=b"x").data == b"x"
    config = Config()
    for name in ("h11_max_incomplete_size", "wsgi_max_body_size", "graceful_timeout",
                 "keep_alive_timeout", "backlog", "logger_class", "workers"):
        assert hasattr(config, name), name
    assert callable(config.response_headers) and callable(config.create_sockets)


def test_the_pin_stops_below_a_version_nobody_checked() -> None:
    """pyproject.toml caps hypercorn below the next version not checked; the installed one is
    within it."""
    text = (Path(__file__).parents[3] / "pyproject.toml").read_text()
    (pin,) = re.findall(r'"hypercorn>=([0-9.]+),<([0-9.]+)"', text)

    def version(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))

    assert version(pin[0]) <= version(hypercorn_version()) < version(pin[1]), pin
