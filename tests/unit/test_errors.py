"""The one table of errors (memfs.errors.WIRE) and the layers that read it: every class of
memfs.errors has a row of its own (a subclass defined elsewhere has its nearest ancestor's),
and an error goes out through the API's envelope and comes back through the client's
``error_from_response`` as the very class it was, with its fields, while the mount answers its
row's errno and the CLI exits with its row's code."""

from __future__ import annotations

import errno
import json

import click
import pytest
from click.testing import CliRunner

from memfs import errors
from memfs.api import error_body
from memfs.cli.base import MemfsGroup
from memfs.client import error_from_response
from memfs.fuse.kernel import errno_for

CLASSES = sorted((c for c in vars(errors).values()
                  if isinstance(c, type) and issubclass(c, errors.MemfsError)),
                 key=lambda c: c.__name__)


def example(cls: type[errors.MemfsError]) -> errors.MemfsError:
    """An instance of ``cls``, with its fields if it has some."""
    if issubclass(cls, errors.PathConflict):
        return cls("/a.md is taken", conflicting_memory_id="mem_1", conflicting_path="/a.md")
    if issubclass(cls, errors.ImportRejected):
        return cls("2 entries break a rule", entries=[{"path": "/x", "reason": "too long"}])
    return cls(f"a {cls.__name__}")


def fields(exc: BaseException) -> dict[str, object]:
    return {k: v for k, v in vars(exc).items() if not k.startswith("_")}


def exit_code(exc: errors.MemfsError) -> int:
    """What the ``memfs`` command exits with when a command raises ``exc``."""

    @click.group(cls=MemfsGroup)
    def group() -> None:
        pass

    @group.command()
    def fails() -> None:
        raise exc

    return CliRunner().invoke(group, ["fails"]).exit_code


def test_every_class_has_a_row_of_its_own() -> None:
    """Its own, not only an inherited one: else it could not come back out of the API as
    itself. The table holds classes of memfs.errors only."""
    assert set(errors.WIRE) == set(CLASSES)
    keys = [(w.type, w.code) for w in errors.WIRE.values()]
    assert len(set(keys)) == len(keys), "two rows with one (error.type, error_code)"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_an_error_goes_out_and_comes_back_as_itself(cls: type[errors.MemfsError]) -> None:
    row = errors.WIRE[cls]
    exc = example(cls)
    status, body, headers = error_body(exc, "req_1")
    assert (status, body["error"]["type"]) == (row.status, row.type)
    assert body["error"].get("details", {}).get("error_code") == row.code
    back = error_from_response(status, json.loads(json.dumps(body)))
    assert type(back) is cls
    if cls is errors.MemfsError:  # its row is also what any unknown answer becomes
        assert back.message == f"server error (HTTP 500): {exc.message}"
    else:
        assert back.message == exc.message
        assert fields(back) == fields(exc)
    assert errno_for(exc) == row.errno
    assert exit_code(exc) == row.exit


def test_a_subclass_from_elsewhere_has_its_ancestors_row() -> None:
    class ConnectionDropped(errors.StorageError):
        pass

    exc = ConnectionDropped("the connection dropped")
    assert errors.wire(exc) is errors.WIRE[errors.StorageError]
    status, body, _ = error_body(exc, "req_1")
    assert type(error_from_response(status, body)) is errors.StorageError
    assert errno_for(exc) == errno.EIO and exit_code(exc) == 8


def test_a_bug_is_a_500_that_keeps_its_message_back() -> None:
    status, body, headers = error_body(RuntimeError("secret internals"), "req_1")
    assert status == 500 and body["error"] == {"type": "api_error",
                                               "message": "internal server error"}
    back = error_from_response(status, body)
    assert type(back) is errors.MemfsError and "secret" not in back.message


def test_the_headers_of_the_envelope() -> None:
    def headers(exc: BaseException) -> dict[str, str]:
        return error_body(exc, "req_1")[2]

    assert headers(errors.NotFound("x")) == {"x-should-retry": "false"}
    assert headers(errors.RequestTimeout("x")) == {"connection": "close"}
    assert headers(errors.RequestTooLarge("x")) == {"x-should-retry": "false",
                                                    "connection": "close"}
    assert headers(errors.TooManyRequests("x")) == {"retry-after": "1", "connection": "close"}
    assert headers(errors.UploadsFull("x")) == {"retry-after": "1", "connection": "close"}
    assert headers(errors.Busy("x")) == {"retry-after": "1"}
    assert headers(errors.StorageError("x")) == {}


@pytest.mark.parametrize(
    ("status", "cls"),
    [(400, errors.InvalidRequest), (401, errors.Unauthorized), (403, errors.Forbidden),
     (404, errors.NotFound), (409, errors.Conflict), (413, errors.RequestTooLarge),
     (418, errors.InvalidRequest), (429, errors.TooManyRequests), (503, errors.Busy),
     (529, errors.Busy), (500, errors.MemfsError), (502, errors.MemfsError)],
)
def test_an_answer_without_the_envelope_is_read_by_its_status(
        status: int, cls: type[errors.MemfsError]) -> None:
    """A proxy's answer, say: the first (the most general) row of its status."""
    for body in (None, "<html>bad gateway</html>", {"error": "not ours"}):
        back = error_from_response(status, body)
        assert type(back) is cls
        if cls is errors.MemfsError:
            assert back.message == f"server error (HTTP {status}): HTTP {status}"


def test_a_code_this_memfs_does_not_know_is_read_by_its_type() -> None:
    err = {"type": "memory_path_conflict_error", "message": "taken",
           "details": {"error_code": "something_new"}, "conflicting_memory_id": "mem_2",
           "conflicting_path": "/b"}
    back = error_from_response(409, {"type": "error", "error": err})
    assert type(back) is errors.PathConflict
    assert (back.conflicting_memory_id, back.conflicting_path) == ("mem_2", "/b")
    for type_, status, cls in [("permission_error", 403, errors.Forbidden),
                               ("overloaded_error", 503, errors.Busy),
                               ("api_error", 503, errors.Busy),
                               ("api_error", 500, errors.MemfsError)]:
        err = {"type": type_, "message": "m", "details": {"error_code": "something_new"}}
        assert type(error_from_response(status, {"error": err})) is cls, type_


def test_a_hostile_envelope_is_an_error_not_a_crash() -> None:
    err = {"type": ["not", "a", "string"], "message": "m", "details": {"error_code": {}},
           "skipped": "not a list"}
    assert type(error_from_response(400, {"error": err})) is errors.InvalidRequest
    err = {"type": "invalid_request_error", "message": "m",
           "details": {"error_code": "import_rejected"}, "skipped": "not a list"}
    back = error_from_response(400, {"error": err})
    assert isinstance(back, errors.ImportRejected) and back.entries == []
