"""The PostgreSQL seam's own pieces (memfs/pgdatabase.py, memfs/database.py): placeholder
translation, text escaping, URLs and how an unreachable database is reported."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from memfs.cli import cli
from memfs.database import is_url, redact_url


def test_placeholders_become_psycopgs_and_literals_stay():
    from memfs.pgdatabase import translate_sql

    assert translate_sql("SELECT * FROM t WHERE a = ? AND b = ?") == \
        "SELECT * FROM t WHERE a = %s AND b = %s"
    assert translate_sql("x LIKE :p ESCAPE '\\' AND y = :q") == \
        "x LIKE %(p)s ESCAPE '\\' AND y = %(q)s"
    # '?', ':name' and '%' inside a string literal are text; '::' is a cast; '%' doubled
    assert translate_sql("SELECT '?:x%', a::text, 5 % 2 FROM t WHERE c = ?") == \
        "SELECT '?:x%%', a::text, 5 %% 2 FROM t WHERE c = %s"
    assert translate_sql("SELECT 'it''s ?', ?") == "SELECT 'it''s ?', %s"


def test_text_escaping_round_trips():
    from memfs.pgdatabase import _escape, _unescape

    for s in ["", "plain", "\x00", "\uffff", "\uffff0", "a\x00\uffff1\x00\uffff", "\uffff\uffff"]:
        e = _escape(s)
        assert "\x00" not in e and _unescape(e) == s


def test_urls():
    assert is_url("postgresql://u@h/db") and is_url("postgres://h/db")
    assert not is_url("/tmp/memfs.db") and not is_url("postgresql.db")
    assert redact_url("postgresql://u:secret@h:5432/db?x=1") == "postgresql://u:***@h:5432/db?x=1"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_url("/tmp/a:b@c.db") == "/tmp/a:b@c.db"


@pytest.mark.parametrize("url", [
    "postgresql://u:secret@127.0.0.1:1/nope",
    "postgresql://u@%2Fnonexistent%2Fdir:5432/nope",
    "postgresql://u@h:notaport/db",
])
def test_an_unreachable_database_is_one_line_without_the_password(url):
    r = CliRunner().invoke(cli, ["--db", url, "stores", "list"])
    assert r.exit_code != 0
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfs: cannot open the database"), r.output
    assert "secret" not in r.output and "Traceback" not in r.output
