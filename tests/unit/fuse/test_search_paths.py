"""memfs.fuse.search's names alone (issue 39 item 5): any question as a file name (``%2F`` for
``/``), and the ``@`` option directories above it. No pyfuse3, no store."""

from __future__ import annotations

import errno

import pytest

from memfs.fuse.search import Options, Refused, parse, unescape


def test_a_slash_is_written_percent_2f() -> None:
    assert parse(b"What musical artists%2Fbands has Melanie seen?") == (
        "What musical artists/bands has Melanie seen?")
    assert unescape("a%2fb %25 %40x %41 100% %2") == "a/b % @x %41 100% %2"
    assert parse(b"%40dana's schedule") == "@dana's schedule"  # a question beginning with @
    assert parse("où%2Fquand ?".encode()) == "où/quand ?"
    assert parse(b"plain question") == "plain question"


def test_options_are_directories_and_chain() -> None:
    o = parse(b"@limit=3")
    assert o == Options(limit=3)
    o = parse(b"@threshold=0.5", o)  # type: ignore[arg-type]
    o = parse(b"@prefix=people", o)  # type: ignore[arg-type]
    o = parse(b"@words", o)  # type: ignore[arg-type]
    assert o == Options(limit=3, threshold=0.5, prefix="/people", words=True)
    assert o.kwargs() == {"limit": 3, "threshold": 0.5, "path_prefix": "/people",
                          "channels": ("words",)}
    assert Options().kwargs() == {"limit": None, "threshold": None, "path_prefix": None}
    # The question under options is still a question.
    assert parse(b"who is on call", o) == "who is on call"  # type: ignore[arg-type]
    # A prefix's slashes: %2F, with or without the leading one.
    assert parse(b"@prefix=people%2Fteam%2F") == Options(prefix="/people/team/")
    assert parse(b"@prefix=%2Fpeople") == Options(prefix="/people")
    assert parse(b"@threshold=0") == Options(threshold=0.0)
    assert parse(b"@threshold=1e-1") == Options(threshold=0.1)
    assert parse(b"@session", session=True) == Options(session=True)


def test_a_type_is_an_option_passed_only_when_given() -> None:
    """SPEC §7: options "limit, threshold, prefix, type" are reachable from a path."""
    o = parse(b"@type=context")
    assert o == Options(type="context")
    o = parse(b"@limit=2", o)  # type: ignore[arg-type]
    assert o.kwargs() == {"limit": 2, "threshold": None, "path_prefix": None,  # type: ignore[union-attr]
                          "memory_type": "context"}
    assert "memory_type" not in Options(limit=2).kwargs()
    assert parse(b"@type=a%2Fb") == Options(type="a/b")


@pytest.mark.parametrize(("name", "code", "why"), [
    (b"@limt=3", errno.ENOENT, "no search option '@limt=3'"),
    (b"@dana", errno.ENOENT, "written %40"),
    (b"@session", errno.ENOENT, "no search option"),  # not a session's mount
    (b"@limit=x", errno.EINVAL, "@limit takes a number"),
    (b"@limit=-1", errno.EINVAL, "@limit takes a number"),
    (b"@limit=\xd9\xa3", errno.EINVAL, "@limit takes a number"),  # an Arabic-Indic digit
    (b"@limit", errno.EINVAL, "needs a value"),
    (b"@limit=", errno.EINVAL, "needs a value"),
    (b"@threshold=high", errno.EINVAL, "@threshold takes a number"),
    (b"@threshold=nan", errno.EINVAL, "@threshold takes a number"),
    (b"@threshold=inf", errno.EINVAL, "@threshold takes a number"),
    (b"@prefix=", errno.EINVAL, "needs a value"),
    (b"@type=", errno.EINVAL, "needs a value"),
    (b"@type", errno.EINVAL, "needs a value"),
    (b"@words=yes", errno.EINVAL, "takes no value"),
    (b"@caf\xe9", errno.EILSEQ, "UTF-8"),
    (b"x" * 256, errno.ENAMETOOLONG, "255 bytes"),
])
def test_refusals_are_errnos(name: bytes, code: int, why: str) -> None:
    with pytest.raises(Refused) as e:
        parse(name)
    assert e.value.errno == code and why in e.value.why


def test_an_option_given_twice_is_einval() -> None:
    for first, again in ((b"@limit=3", b"@limit=4"), (b"@words", b"@words"),
                         (b"@prefix=a", b"@prefix=b"), (b"@type=a", b"@type=b"),
                         (b"@threshold=0", b"@threshold=0.9")):  # 0 is given, not unset
        o = parse(first)
        assert isinstance(o, Options)
        with pytest.raises(Refused) as e:
            parse(again, o)
        assert e.value.errno == errno.EINVAL and "twice" in e.value.why
