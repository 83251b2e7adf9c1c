"""Export and import in the Console, in chromium: download an archive, upload it back as a
copy, upload a zip of files (with a bad entry: all or nothing, then partial)."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import anthropic


def test_download_an_export_and_upload_it_as_a_copy(signed_in: Any, sdk: anthropic.Anthropic,
                                                    tmp_path: Path) -> None:
    store = sdk.beta.memory_stores.create(name="Exported", metadata={"k": "v"})
    m = sdk.beta.memory_stores.memories.create(store.id, path="/a/one.md", content="first")
    sdk.beta.memory_stores.memories.update(m.id, memory_store_id=store.id, content="second")
    pg = signed_in
    pg.goto(f"/stores/{store.id}/settings")
    with pg.expect_download() as info:
        pg.get_by_role("link", name="Download with history").click()
    download = info.value
    assert download.suggested_filename == "exported-history.memfs.gz"
    archive = tmp_path / download.suggested_filename
    download.save_as(archive)
    lines = [json.loads(x) for x in gzip.decompress(archive.read_bytes()).splitlines()]
    assert lines[0]["format"] == "memfs-export" and lines[0]["store"]["id"] == store.id
    assert [x["type"] for x in lines[1:]] == ["version", "version", "memory", "end"]

    # The same ids are taken here: a plain restore is refused and says what to do.
    pg.goto("/import")
    pg.get_by_label("File").set_input_files(str(archive))
    pg.get_by_role("button", name="Import").click()
    assert "already exists in this database" in pg.get_by_role("alert").inner_text()
    pg.get_by_label("File").set_input_files(str(archive))
    pg.get_by_label("New store name").fill("Exported copy")
    pg.get_by_role("button", name="Import").click()
    result = pg.get_by_role("status", name="Import result")
    assert "1 memories and 2 versions" in result.inner_text()
    pg.get_by_role("link", name="Exported copy").click()
    copy_id = pg.url.rsplit("/", 1)[1]
    assert copy_id != store.id
    (copied,) = sdk.beta.memory_stores.memories.list(copy_id, path_prefix="/")
    got = sdk.beta.memory_stores.memories.retrieve(copied.id, memory_store_id=copy_id)
    assert (got.path, got.content) == ("/a/one.md", "second")
    versions = list(sdk.beta.memory_stores.memory_versions.list(copy_id))
    assert len(versions) == 2


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_upload_a_zip_of_files_all_or_nothing_then_partial(signed_in: Any,
                                                          sdk: anthropic.Anthropic,
                                                          tmp_path: Path) -> None:
    notes = tmp_path / "notes.zip"
    notes.write_bytes(_zip({"notes/todo.md": b"- tea", "notes/bad.md": b"\xff\xfe",
                            ".git/config": b"x", "<img src=x onerror=alert(1)>.md": b"ok"}))
    pg = signed_in
    pg.once("dialog", lambda d: (_ for _ in ()).throw(AssertionError(d.message)))
    pg.goto("/import")
    pg.get_by_label("File").set_input_files(str(notes))
    pg.get_by_label("New store name").fill("From zip")
    pg.get_by_role("button", name="Import").click()
    alert = pg.get_by_role("alert").inner_text()
    assert "/notes/bad.md" in alert and "Nothing was imported" in alert
    assert not [s for s in sdk.beta.memory_stores.list() if s.name == "From zip"]

    pg.get_by_label("File").set_input_files(str(notes))
    pg.get_by_label("Import what can be imported").check()
    pg.get_by_role("button", name="Import").click()
    result = pg.get_by_role("status", name="Import result").inner_text()
    assert "2 memories" in result and "/notes/bad.md" in result
    (made,) = [s for s in sdk.beta.memory_stores.list() if s.name == "From zip"]
    paths = sorted(m.path for m in sdk.beta.memory_stores.memories.list(made.id,
                                                                       path_prefix="/"))
    assert paths == ["/<img src=x onerror=alert(1)>.md", "/notes/todo.md"]
    versions = list(sdk.beta.memory_stores.memory_versions.list(made.id))
    assert {v.created_by.type for v in versions} == {"user_actor"}


def test_no_file_or_a_wrong_file_is_a_clear_error(signed_in: Any, tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not an archive")
    pg = signed_in
    pg.goto("/import")
    pg.get_by_label("File").set_input_files(str(text))
    pg.get_by_role("button", name="Import").click()
    assert "not a memfs archive" in pg.get_by_role("alert").inner_text()


def test_an_import_into_a_new_store_of_a_name_in_use_says_so(signed_in: Any,
                                                            sdk: anthropic.Anthropic,
                                                            tmp_path: Path) -> None:
    taken = sdk.beta.memory_stores.create(name="Imported Twice")
    z = tmp_path / "twice.zip"
    z.write_bytes(_zip({"a.md": b"alpha"}))
    pg = signed_in
    pg.goto("/import")
    pg.get_by_label("File").set_input_files(str(z))
    pg.get_by_label("New store name").fill("Imported Twice")
    pg.get_by_role("button", name="Import").click()
    result = pg.get_by_role("status", name="Import result").inner_text()
    assert "also named Imported Twice" in result and taken.id in result
    pg.goto("/import")
    pg.get_by_label("File").set_input_files(str(z))
    pg.get_by_label("New store name").fill("Imported Once")
    pg.get_by_role("button", name="Import").click()
    result = pg.get_by_role("status", name="Import result").inner_text()
    assert "also named" not in result
