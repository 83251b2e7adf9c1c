"""memfs serve writes a response's head and body in one send when its length is known."""

from __future__ import annotations

import h11

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
