"""Scope (issue 41 item 4, SPEC §8): general or workflow is a property of a session's
attachment. ``--store "NAME:workflow"`` and a spec's ``scope:`` ask for it, the store keeps it
with the resource (``memfs_scope`` on the wire, which SDK clients ignore), the API's
``resources[]`` take it, and the prompt note says which store is which."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from memfs import errors
from memfs.api import create_app
from memfs.launcher.plan import Attachment
from memfs.launcher.prompt import render_memory_prompt
from memfs.launcher.spec import parse
from memfs.models import Session, SessionResource
from memfs.store import Store


def res(store_id: str, **kw: str) -> dict[str, str]:
    return {"type": "memory_store", "memory_store_id": store_id, **kw}


# -- --store REF[:ACCESS][:SCOPE] -------------------------------------------------------------


@pytest.mark.parametrize("spec,ref,access,scope", [
    ("Sprint 12", "Sprint 12", "read_write", "general"),
    ("Sprint 12:workflow", "Sprint 12", "read_write", "workflow"),
    ("Sprint 12:general", "Sprint 12", "read_write", "general"),
    ("Sprint 12:read_only:workflow", "Sprint 12", "read_only", "workflow"),
    ("Sprint 12:workflow:ro", "Sprint 12", "read_only", "workflow"),
    ("a:b:rw:workflow", "a:b", "read_write", "workflow"),
    ("notes@2026-12-01T09:00:00Z:workflow", "notes@2026-12-01T09:00:00Z", "read_write",
     "workflow"),
    # One of each at most: a second one is part of the name.
    ("x:workflow:general", "x:workflow", "read_write", "general"),
    ("x:ro:rw", "x:ro", "read_write", "general"),
])
def test_store_flag_takes_a_scope(spec: str, ref: str, access: str, scope: str) -> None:
    a = Attachment.parse(spec)
    assert (a.ref, a.access, a.scope) == (ref, access, scope)


def test_a_store_whose_name_ends_in_a_scope_is_still_found(store: Store) -> None:
    """A store named ``Plan:workflow`` (made before scopes) is what ``--store
    "Plan:workflow"`` attached; it still is, when no store is named ``Plan``."""
    named = store.stores.create("Plan:workflow")
    a = Attachment.parse("Plan:workflow")
    assert a.resolve(store).id == named.id
    assert (a.ref, a.scope) == ("Plan:workflow", "general")
    b = Attachment.parse("Plan:workflow:ro")
    assert b.resolve(store).id == named.id and b.access == "read_only"
    # With a store named Plan too, the suffix is the scope; the other store is reachable
    # with an explicit scope after its name.
    plan = store.stores.create("Plan")
    c = Attachment.parse("Plan:workflow")
    assert c.resolve(store).id == plan.id and c.scope == "workflow"
    d = Attachment.parse("Plan:workflow:general")
    assert d.resolve(store).id == named.id and d.scope == "general"


def test_a_mistyped_scope_names_the_valid_ones(store: Store) -> None:
    store.stores.create("Docs")
    with pytest.raises(errors.InvalidRequest, match="':workflow'") as e:
        Attachment.parse("Docs:workfow").resolve(store)
    assert "'workfow'" in e.value.message and "':read_only'" in e.value.message


# -- the spec's scope: ------------------------------------------------------------------------


def test_a_spec_entry_takes_a_scope() -> None:
    spec = parse("resources:\n"
                 "  - {type: memory_store, memory_store: Sprint 12, scope: workflow}\n"
                 "  - {type: memory_store, memory_store: Prefs, access: read_only}\n")
    assert [a.scope for a in spec.attachments] == ["workflow", "general"]
    assert spec.attachments[0] == Attachment.parse("Sprint 12:workflow")
    assert spec.resources()[0]["memfs_scope"] == "workflow"
    # The wire shape pasted as is works too.
    wire = parse("resources:\n"
                 "  - {type: memory_store, memory_store_id: m, memfs_scope: workflow}\n")
    assert wire.attachments[0].scope == "workflow"


@pytest.mark.parametrize("body,message", [
    ("scope: sprint", "scope must be 'general' or 'workflow'"),
    ("scope: workflow, memfs_scope: workflow", "give scope or memfs_scope, not both"),
])
def test_a_bad_spec_scope_is_refused(body: str, message: str) -> None:
    with pytest.raises(errors.InvalidRequest) as e:
        parse(f"resources:\n  - {{type: memory_store, memory_store: m, {body}}}\n", "s.yaml")
    assert e.value.message.startswith("s.yaml: resources[0]: ") and message in e.value.message


# -- the store keeps it with the resource ---------------------------------------------------


def test_the_store_keeps_the_scope(store: Store) -> None:
    a, b = store.stores.create("Sprint 12").id, store.stores.create("Prefs").id
    sess = store.sessions.create([res(a, memfs_scope="workflow"), res(b)])
    assert [r.memfs_scope for r in sess.resources] == ["workflow", "general"]
    assert store.sessions.get(sess.id).resources == sess.resources
    wire = sess.to_dict()["resources"]
    assert [r["memfs_scope"] for r in wire] == ["workflow", "general"]
    assert SessionResource.from_dict(wire[0], session_id=sess.id) == sess.resources[0]
    with pytest.raises(errors.InvalidRequest, match="memfs_scope must be 'general' or"):
        store.sessions.create([res(a, memfs_scope="team")])


def test_the_sdk_reads_a_resource_with_a_scope(store: Store) -> None:
    """The extension field is one the SDK's model keeps as an extra: it parses the rest."""
    from anthropic.types.beta.sessions import BetaManagedAgentsMemoryStoreResource

    a = store.stores.create("Sprint 12").id
    wire = store.sessions.create([res(a, memfs_scope="workflow")]).to_dict()["resources"][0]
    parsed = BetaManagedAgentsMemoryStoreResource.model_validate(wire)
    assert parsed.memory_store_id == a and parsed.access == "read_write"


def test_the_api_takes_and_returns_the_scope(store: Store) -> None:
    a = store.stores.create("Sprint 12").id
    with TestClient(create_app(store, ["k"]), headers={"x-api-key": "k"}) as client:
        r = client.post("/v1/sessions", json={"resources": [res(a, memfs_scope="workflow")]})
        assert r.status_code == 200, r.text
        [resource] = r.json()["resources"]
        assert resource["memfs_scope"] == "workflow"
        sid = r.json()["id"]
        got = client.get(f"/v1/sessions/{sid}/resources/{resource['id']}").json()
        assert got["memfs_scope"] == "workflow"
        bad = client.post("/v1/sessions", json={"resources": [res(a, memfs_scope=3)]})
        assert bad.status_code == 400 and "memfs_scope" in bad.json()["error"]["message"]


# -- the prompt says which store is which --------------------------------------------------


def _resource(name: str, scope: str) -> SessionResource:
    return SessionResource("sesrsc_1", "sesn_1", "memstore_1", "read_write", None, name, "",
                           f"/mnt/memory/{name.lower()}", scope)  # type: ignore[arg-type]


def test_the_prompt_says_which_store_is_which() -> None:
    text = render_memory_prompt(Session(
        "sesn_1", "idle", (_resource("Prefs", "general"), _resource("Sprint", "workflow")),
        None, None, {}, None, "t", "t", None))
    prefs, sprint = text.split("## ")[1:]
    assert "- Scope: general (memories for every task)" in prefs
    assert "- Scope: workflow (memories of this piece of work)" in sprint
    preamble = text.split("## ")[0]
    for directory in ("/preferences/", "/context/", "/knowledge/", "/decisions/"):
        assert directory in preamble
    assert "7 days" in preamble and "front matter" in preamble
    for key in ("type", "importance", "expires", "tags", "description"):
        assert key in preamble


def test_memfs_run_store_flags_reach_the_session(store: Store, tmp_path, monkeypatch) -> None:
    """``memfs run --store "Sprint 12:read_only:workflow"``: the launcher's session has the
    store attached read_only, as workflow (the launch stopped before any mount)."""
    from click.testing import CliRunner

    from memfs.cli import cli
    from memfs.launcher import runner, setup
    from memfs.launcher.state import LaunchState

    sprint, prefs = store.stores.create("Sprint 12").id, store.stores.create("Prefs").id
    made = []

    def session_only(launch):  # what runner.run does first, and nothing after
        st = LaunchState(launch, None, store)
        st.root = str(tmp_path / "root")
        made.append(setup.create_session(st))
        return 0

    monkeypatch.setattr(runner, "run", session_only)
    result = CliRunner().invoke(cli, ["run", "--store", "Sprint 12:read_only:workflow",
                                      "--store", "Prefs", "--", "true"])
    assert result.exit_code == 0, (result.output, result.exception)
    [sess] = made
    assert [(r.memory_store_id, r.access, r.memfs_scope) for r in sess.resources] == [
        (sprint, "read_only", "workflow"), (prefs, "read_write", "general")]
    assert "- Scope: workflow" in render_memory_prompt(sess)
