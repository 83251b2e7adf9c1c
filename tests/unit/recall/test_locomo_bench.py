"""The LoCoMo benchmark's loader, baselines and metrics (scripts/locomo.py, issue 39), on a
tiny conversation made up here in LoCoMo's shape (the real data is CC BY-NC: never in this
repository)."""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.repo import load_script

locomo = load_script("locomo")


def conversation() -> dict[str, Any]:
    """Two people, two sessions (and a third dated but empty, as the data has), questions
    with each shape of evidence the data has."""
    return {
        "speaker_a": "Ana", "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat named Pixel."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Look at my new kayak!",
             "img_url": ["https://example.invalid/k.jpg"], "blip_caption": "a red kayak on a lake",
             "query": "kayak"},
        ],
        "session_2_date_time": "10:00 am on 9 June, 2023",
        "session_2": [
            {"speaker": "Ana", "dia_id": "D2:1", "text": "Pixel broke a vase."},
            {"speaker": "Bo", "dia_id": "D2:2", "text": "I paddled across the lake."},
            {"speaker": "Ana", "dia_id": "D2:3", "text": "Brave!"},
        ],
        "session_3_date_time": "11:00 am on 1 July, 2023",
        "qa": [
            {"question": "What is Ana's cat called?", "answer": "Pixel", "evidence": ["D1:1"],
             "category": 4},
            {"question": "What did Bo buy and use?", "answer": "a kayak",
             "evidence": ["D1:2; D2:2"], "category": 1},
            {"question": "What did the cat do?", "answer": "broke a vase",
             "evidence": "D2:1", "category": 2},
            {"question": "Which pets does Ana have?", "answer": "a cat",
             "evidence": ["D:1:1", "D2:01"], "category": 3},
            {"question": "What is Bo's dog called?", "adversarial_answer": "Rex",
             "evidence": ["D1:2"], "category": 5},
            {"question": "No evidence at all?", "answer": "x", "evidence": [], "category": 4},
            {"question": "Evidence of no turn?", "answer": "x", "evidence": ["D9:9", "D"],
             "category": 4},
        ],
    }


def test_the_loader_reads_turns_sessions_and_evidence(tmp_path: Path) -> None:
    (tmp_path / "7.json").write_text(json.dumps(conversation()))
    [c] = locomo.load(tmp_path)
    assert c.id == "7"
    assert [s.number for s in c.sessions] == [1, 2]  # session 3 is dated, not held
    assert c.sessions[1].date == "10:00 am on 9 June, 2023"
    assert c.sessions[0].turns[1].caption == "a red kayak on a lake"
    assert c.sessions[0].turns[0].caption is None
    # empty evidence, and evidence naming no turn of the conversation: left out
    assert c.skipped == 2
    assert [(q.category, q.evidence) for q in c.questions] == [
        (4, ("D1:1",)), (1, ("D1:2", "D2:2")), (2, ("D2:1",)), (3, ("D1:1", "D2:1")),
        (5, ("D1:2",))]


def test_evidence_is_split_and_normalized() -> None:
    assert locomo.parse_evidence(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert locomo.parse_evidence("D8:6; D9:17") == ["D8:6", "D9:17"]
    assert locomo.parse_evidence(["D8:6 D9:17", "D8:6"]) == ["D8:6", "D9:17"]
    assert locomo.parse_evidence(["D:11:26", "D30:05", "D", ""]) == ["D11:26", "D30:5"]
    assert locomo.parse_evidence([]) == [] and locomo.parse_evidence(None) == []


def test_turn_level_memories_and_labels(tmp_path: Path) -> None:
    (tmp_path / "7.json").write_text(json.dumps(conversation()))
    [c] = locomo.load(tmp_path)
    mem = locomo.memories(c, "turn")
    assert list(mem) == ["/session-01/D1-1.md", "/session-01/D1-2.md", "/session-02/D2-1.md",
                         "/session-02/D2-2.md", "/session-02/D2-3.md"]
    assert mem["/session-01/D1-1.md"] == \
        "1:56 pm on 8 May, 2023 — Ana: I adopted a cat named Pixel.\n"
    assert mem["/session-01/D1-2.md"] == ("1:56 pm on 8 May, 2023 — Bo: Look at my new kayak! "
                                          "[shares a photo: a red kayak on a lake]\n")
    q = c.questions[1]
    assert locomo.labels(c, q, "turn") == ["/session-01/D1-2.md", "/session-02/D2-2.md"]
    assert locomo.turn_path("D12:3") == "/session-12/D12-3.md"


def test_session_level_memories_and_labels(tmp_path: Path) -> None:
    (tmp_path / "7.json").write_text(json.dumps(conversation()))
    [c] = locomo.load(tmp_path)
    mem = locomo.memories(c, "session")
    assert list(mem) == ["/session-01.md", "/session-02.md"]
    assert mem["/session-02.md"] == ("10:00 am on 9 June, 2023\nAna: Pixel broke a vase.\n"
                                     "Bo: I paddled across the lake.\nAna: Brave!\n")
    assert "Bo: Look at my new kayak! [shares a photo: a red kayak on a lake]" \
        in mem["/session-01.md"]
    # the sessions of the evidence, each once
    assert locomo.labels(c, c.questions[1], "session") == ["/session-01.md", "/session-02.md"]
    assert locomo.labels(c, c.questions[2], "session") == ["/session-02.md"]
    # every conversation in one store: its id leads the paths
    one = locomo.memories(c, "session", one_store=True)
    assert list(one) == ["/conv-7/session-01.md", "/conv-7/session-02.md"]
    assert locomo.labels(c, c.questions[0], "turn", one_store=True) == \
        ["/conv-7/session-01/D1-1.md"]


def test_the_zip_and_a_list_of_conversations_load_alike(tmp_path: Path) -> None:
    other = conversation() | {"qa": conversation()["qa"][:1]}
    with zipfile.ZipFile(tmp_path / "l.zip", "w") as z:
        z.writestr("data/multimodal_dialog/locomo10_v2/7.json", json.dumps(conversation()))
        z.writestr("data/multimodal_dialog/locomo10_v2/12.json", json.dumps(other))
    zipped = locomo.load(tmp_path / "l.zip")
    assert [c.id for c in zipped] == ["7", "12"]  # by number
    assert [c.id for c in locomo.load(tmp_path / "l.zip", ["12"])] == ["12"]
    # locomo10.json: a list, each sample with its id and its sessions under "conversation"
    samples = [{"sample_id": f"conv-{cid}",
                "conversation": {k: v for k, v in d.items() if k != "qa"}, "qa": d["qa"]}
               for cid, d in (("7", conversation()), ("12", other))]
    (tmp_path / "locomo10.json").write_text(json.dumps(samples))
    listed = locomo.load(tmp_path / "locomo10.json", ["7", "12"])
    assert listed == zipped
    with pytest.raises(SystemExit, match="no conversation 99"):
        locomo.load(tmp_path / "l.zip", ["99"])


def test_hit_recall_and_mrr_on_a_ranking() -> None:
    ranked = ["/x", "/a", "/y", "/b", "/z", "/c", "/w"]
    s = locomo.score(ranked, ["/a", "/b", "/c"])
    assert (s.hit5, s.recall5, s.rr10) == (True, 2 / 3, 1 / 2)
    s = locomo.score(ranked, ["/w"])  # 7th: no hit@5, but in MRR@10
    assert (s.hit5, s.recall5, s.rr10) == (False, 0.0, 1 / 7)
    s = locomo.score(ranked, ["/nowhere"])
    assert (s.hit5, s.recall5, s.rr10) == (False, 0.0, 0.0)
    s = locomo.score([f"/{i}" for i in range(20)] + ["/late"], ["/late"])
    assert s.rr10 == 0.0  # beyond the 10th counts nothing
    summary = locomo.summary([locomo.Score(True, 1.0, 1.0), locomo.Score(False, 0.0, 0.25)])
    assert summary == {"n": 2, "hit@5": 0.5, "recall@5": 0.5, "mrr@10": 0.625}


def test_bm25_matches_the_okapi_formula_by_hand() -> None:
    # N=3, avgdl=2; "a" is in 2 of 3 documents: its idf, log(1.5) - log(2.5), is negative,
    # so it becomes epsilon times the mean idf; b, c, d: log(2.5) - log(1.5).
    bm = locomo.BM25Okapi([["a", "b"], ["a", "c", "c"], ["d"]])
    idf = math.log(2.5) - math.log(1.5)
    eps = 0.25 * (math.log(1.5) - math.log(2.5) + 3 * idf) / 4
    scores = bm.scores(["c"])
    assert scores[0] == 0 and scores[2] == 0
    assert scores[1] == pytest.approx(idf * 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 3 / 2)))
    scores = bm.scores(["a", "c"])
    assert scores[0] == pytest.approx(eps * 1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2 / 2)))
    assert scores[1] == pytest.approx(eps * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 3 / 2))
                                      + idf * 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 3 / 2)))
    assert bm.scores(["zzz"]) == [0.0, 0.0, 0.0]


def test_the_baselines_rank_memories() -> None:
    b = locomo.Baselines({"/1.md": "Pixel the cat broke a vase", "/2.md": "a red kayak",
                          "/3.md": "the cat sat", "/4.md": "nothing here",
                          "/5.md": "a kayak trip"})
    # grep: words of 4+ letters ("broke", "pixel"; not "cat"), by how many, then by path
    assert b.grep("Did the cat or Pixel break... broke a VASE?") == ["/1.md"]
    assert b.grep("kayak or vase") == ["/1.md", "/2.md", "/5.md"]
    assert b.bm25_rank("the cat") == ["/3.md", "/1.md"]  # the shorter one first
    assert b.bm25_rank("zzzz qqqq") == []


def _bench_recall() -> ModuleType:
    """scripts/bench_recall.py, which imports scripts/locomo.py as ``locomo``."""
    return load_script("bench_recall")


def test_the_benchmark_runs_end_to_end_and_reuses_its_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The whole of ``--locomo``, with the local model: every method at both levels, the
    unrelated questions, the JSON; a second run in the same --work embeds nothing again."""
    with zipfile.ZipFile(tmp_path / "l.zip", "w") as z:
        z.writestr("locomo10_v2/7.json", json.dumps(conversation()))
    bench = _bench_recall()
    argv = ["--locomo", str(tmp_path / "l.zip"), "--convs", "7", "--work", str(tmp_path / "w")]
    assert bench.main([*argv, "--json", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    out = capsys.readouterr().out
    assert "### LoCoMo, turn level: conversations 7 (one store each, 5 memories)" in out
    assert "### LoCoMo, session level: conversations 7 (one store each, 2 memories)" in out
    for level, memories in (("turn", 5), ("session", 2)):
        r = report["levels"][level]
        assert r["memories"] == memories and r["index"]["embedded"] == memories
        assert set(r["methods"]) == set(bench.LOCOMO_METHODS)
        for m in r["methods"].values():
            assert (m["main"]["n"], m["category_5"]["n"], m["all"]["n"]) == (4, 1, 5)
            assert 0 <= m["main"]["hit@5"] <= 1 and m["p99_ms"] >= m["p50_ms"] > 0
        assert r["defaults"]["unrelated_asked"] == len(locomo.UNRELATED)
        assert r["defaults"]["answerable"]["n"] == 4
        asked = {q["question"]: q for q in r["questions"]}
        assert asked["What did Bo buy and use?"]["labels"] == (
            ["/session-01/D1-2.md", "/session-02/D2-2.md"] if level == "turn"
            else ["/session-01.md", "/session-02.md"])
    # a store of 2 memories: every one is in the first 5 of whatever finds it
    assert report["levels"]["session"]["methods"]["meaning"]["main"]["hit@5"] == 1.0
    # again, words and memfs only, in the same work directory: nothing to embed
    assert bench.main([*argv, "--methods", "words,memfs", "--level", "turn",
                       "--json", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())["levels"]["turn"]
    assert again["index"]["embedded"] == 0 and set(again["methods"]) == {"words", "memfs"}
