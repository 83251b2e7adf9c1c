"""The client of a ``memfs serve`` API (moving into a package: see memfs.client.ops)."""

from .ops import (
    DEFAULT_TIMEOUT,
    OPERATIONS,
    SESSION_HEADER,
    STREAM_READ_TIMEOUT,
    AsyncClient,
    Client,
    FeedEvent,
    Request,
    error_from_response,
    unix_socket,
)

__all__ = ["DEFAULT_TIMEOUT", "OPERATIONS", "SESSION_HEADER", "STREAM_READ_TIMEOUT",
           "AsyncClient", "Client", "FeedEvent", "Request", "error_from_response",
           "unix_socket"]
