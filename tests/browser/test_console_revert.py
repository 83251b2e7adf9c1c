"""The Console's "Revert this session": the dry run's plan and conflicts, the confirm (with
force), the result with its revert id, and undoing that revert, in chromium against a real
``memfs serve``."""

from __future__ import annotations

import uuid
from typing import Any

from memfs import Actor
from memfs.store import Store

OTHER = Actor.user("user_bob")


def test_revert_a_session_from_its_page(signed_in: Any, console_server: Any) -> None:
    pg = signed_in
    store = Store(console_server.db)
    try:
        sid = store.stores.create(f"Revert {uuid.uuid4().hex[:8]}").id
        ses = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}],
                                   title="Agent run").id
        S = Actor.session(ses)
        store.memories.write_path(sid, "/keep.md", "before\n", actor=OTHER)
        store.memories.write_path(sid, "/shared.md", "before\n", actor=OTHER)
        store.memories.write_path(sid, "/keep.md", "agent\n", actor=S)
        store.memories.write_path(sid, "/shared.md", "agent\n", actor=S)
        store.memories.write_path(sid, "/new.md", "agent\n", actor=S)
        store.memories.write_path(sid, "/shared.md", "bob\n", actor=OTHER)  # a conflict

        def contents() -> dict[str, str]:
            return {m.path: store.memories.get(sid, m.id).content or ""
                    for m in store.memories.tree(sid)}

        pg.goto(f"/sessions/{ses}")
        pg.get_by_role("link", name="Revert this session…").click()
        pg.wait_for_url(f"**/sessions/{ses}/revert")
        rows = pg.locator("table.revert-actions tbody tr")
        assert rows.count() == 2
        assert sorted(rows.all_inner_texts()) == [
            f"delete\t/new.md\t{store.stores.get(sid).name}",
            f"restore\t/keep.md\t{store.stores.get(sid).name}"]
        conflict = pg.locator("li.conflict")
        assert conflict.count() == 1
        text = conflict.inner_text()
        assert "/shared.md" in text and "changed" in text and "user_bob" in text
        assert "-agent" in text and "+bob" in text
        assert contents()["/new.md"] == "agent\n"  # the preview wrote nothing

        pg.get_by_label("Force: also overwrite").check()
        pg.get_by_role("button", name="Revert now").click()
        status = pg.get_by_role("status")
        assert "3 memories reverted, 0 conflicts left" in status.inner_text()
        revert_id = pg.locator("code.revert-id").inner_text()
        assert revert_id.startswith("memrevert_")
        assert contents() == {"/keep.md": "before\n", "/shared.md": "before\n"}

        pg.get_by_role("link", name="Undo this revert…").click()
        pg.wait_for_url(f"**/sessions/{revert_id}/revert")
        assert pg.locator("table.revert-actions tbody tr").count() == 3
        pg.get_by_role("button", name="Revert now").click()
        assert "3 memories reverted" in pg.get_by_role("status").inner_text()
        # back to the state just before the revert (bob's edit included)
        assert contents() == {"/keep.md": "agent\n", "/shared.md": "bob\n",
                              "/new.md": "agent\n"}
    finally:
        store.close()
