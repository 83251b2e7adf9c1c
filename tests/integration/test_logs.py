"""``memfs --log-format json serve`` (issue 19): every line on stderr is a JSON object, the
server's announcements ("serving ...", a generated key) included; they were plain text.
"""

from __future__ import annotations

import json

import pytest

from tests.support.server import start_server, stop_server


@pytest.mark.parametrize("key", [True, False], ids=["key", "generated-key"])
def test_every_line_of_a_json_logging_server_is_json(tmp_path, key):
    s = start_server(tmp_path, "-v", "--log-format", "json",
                     *(["--api-key", "sk-logs"] if key else []))
    assert stop_server(s) == 0
    lines = s.stderr.read_text().splitlines()
    assert lines, "nothing on stderr"
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not JSON: {line!r} (in {lines})")
    assert any(r["message"].startswith("serving http://") for r in records), records
    first = records[0]
    assert {"time", "level", "logger", "message"} <= first.keys(), first
    if not key:
        assert "generated key" in first["message"], first
