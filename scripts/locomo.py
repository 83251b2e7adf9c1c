"""LoCoMo for ``scripts/bench_recall --locomo PATH`` (issue 39): the loader, the memories and
labels of each protocol, the baselines (grep, BM25) and the metrics.

LoCoMo (Maharana et al., ACL 2024, "Evaluating Very Long-Term Conversational Memory of LLM
Agents"; snap-research/locomo, ``data/locomo10.zip``) holds 10 long conversations between two
people, in dated sessions, and questions labelled with the dialog turns that answer them. Its
licence is CC BY-NC 4.0: it is read from the path given, never copied into this repository.

- **turn level**: one memory per dialog turn, ``/session-07/D7-12.md``, holding
  ``<session date> — <speaker>: <text>`` (and `` [shares a photo: <caption>]`` when the turn
  shows one); a question's labelled memories are the turns of its evidence.
- **session level**: one memory per session, ``/session-07.md``: the date, then one line per
  turn ``<speaker>: <text>``; a question's labelled memories are the sessions of its evidence.
- With every conversation in one store (``--one-store``), paths begin with
  ``/conv-<id>``.

This module imports no part of memfs: the runner (:mod:`bench_recall`) asks the store; the
tests (tests/unit/recall/test_locomo_bench.py) check the loader, BM25 and the metrics on a
conversation made up for them.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LEVELS = ("turn", "session")
#: The questions of the main figure; category 5 (adversarial: the answer is not in the
#: conversation, or is about the other speaker) is reported apart.
MAIN_CATEGORIES = (1, 2, 3, 4)
ALL_CATEGORIES = (1, 2, 3, 4, 5)

_SESSION_KEY = re.compile(r"session_(\d+)")
#: A dialog id as the data writes it: ``D7:12``, and the odd ``D:11:26`` or ``D30:05``.
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True)
class Turn:
    dia_id: str  # "D7:12"
    speaker: str
    text: str
    caption: str | None  # the BLIP caption of the photo the turn shares


@dataclass(frozen=True)
class Session:
    number: int
    date: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    question: str
    category: int
    evidence: tuple[str, ...]  # dialog ids, normalized ("D8:6")


@dataclass(frozen=True)
class Conversation:
    id: str  # the file's name ("26"), or the sample's id without "conv-"
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    #: Questions left out: no evidence that names a turn of the conversation.
    skipped: int = 0


# -- loading -----------------------------------------------------------------------------------

def normalize_dia_id(token: str) -> str | None:
    """``D7:12`` as is; ``D:11:26`` -> ``D11:26``, ``D30:05`` -> ``D30:5``; else None."""
    m = _DIA_ID.fullmatch(token.strip())
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else None


def parse_evidence(raw: Any) -> list[str]:
    """A question's evidence as dialog ids: a list of ids, where an item may hold several
    (``"D8:6; D9:17"``), or one such string. Tokens that are no dialog id are dropped."""
    items = [raw] if isinstance(raw, str) else list(raw or [])
    out: list[str] = []
    for item in items:
        for token in re.split(r"[;,\s]+", str(item)):
            dia = normalize_dia_id(token) if token else None
            if dia is not None and dia not in out:
                out.append(dia)
    return out


def parse_conversation(cid: str, data: dict[str, Any]) -> Conversation:
    """One conversation: ``data`` holds ``session_N`` (lists of turns) and their
    ``session_N_date_time``, and ``qa``; or, as locomo10.json ships it, ``conversation``
    (those sessions) and ``qa``. Sessions without turns are left out (the data dates more
    sessions than it holds); so are questions whose evidence names no turn of the
    conversation."""
    conv = data.get("conversation", data)
    sessions = []
    for key, turns in conv.items():
        m = _SESSION_KEY.fullmatch(key)
        if m is None or not isinstance(turns, list) or not turns:
            continue
        n = int(m.group(1))
        sessions.append(Session(n, str(conv.get(f"session_{n}_date_time", "")).strip(), tuple(
            Turn(str(t["dia_id"]).strip(), str(t["speaker"]), str(t.get("text", "")),
                 (str(t["blip_caption"]).strip() or None) if t.get("blip_caption") else None)
            for t in turns)))
    sessions.sort(key=lambda s: s.number)
    known = {t.dia_id for s in sessions for t in s.turns}
    questions, skipped = [], 0
    for q in data.get("qa", conv.get("qa", [])):
        evidence = tuple(e for e in parse_evidence(q.get("evidence")) if e in known)
        if not evidence:
            skipped += 1
            continue
        questions.append(Question(str(q["question"]), int(q["category"]), evidence))
    return Conversation(cid, tuple(sessions), tuple(questions), skipped)


def _conversations_in(name: str, data: Any) -> list[tuple[str, dict[str, Any]]]:
    """(id, data) of the conversations a JSON file holds: one (named by the file), or a list
    of them (locomo10.json: each with its ``sample_id``, ``conv-26``)."""
    if isinstance(data, list):
        return [(str(d.get("sample_id", i)).removeprefix("conv-"), d)
                for i, d in enumerate(data)]
    return [(Path(name).stem.removeprefix("conv-"), data)]


def load(path: Path, only: Sequence[str] | None = None) -> list[Conversation]:
    """The conversations at ``path`` (the zip, the directory it unpacks to or any directory
    above the JSON files, or one JSON file), by id; only those of ``only`` if given, in that
    order.

    :raises SystemExit: a conversation asked for is not there, or nothing is.
    """
    raw: list[tuple[str, dict[str, Any]]] = []
    if path.is_dir():
        for f in sorted(path.rglob("*.json")):
            raw += _conversations_in(f.name, json.loads(f.read_text(encoding="utf-8")))
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            for name in sorted(z.namelist()):
                if name.endswith(".json"):
                    raw += _conversations_in(name, json.loads(z.read(name).decode("utf-8")))
    elif path.is_file():
        raw = _conversations_in(path.name, json.loads(path.read_text(encoding="utf-8")))
    else:
        raise SystemExit(f"--locomo: no such file or directory: {path}")
    found = {cid: d for cid, d in raw if isinstance(d, dict) and "qa" in d}
    if not found:
        raise SystemExit(f"--locomo: no LoCoMo conversation in {path}")
    ids = list(only) if only else sorted(found, key=lambda c: (len(c), c))
    missing = [c for c in ids if c not in found]
    if missing:
        raise SystemExit(f"--locomo: no conversation {', '.join(missing)} in {path} "
                         f"(there are {', '.join(sorted(found, key=lambda c: (len(c), c)))})")
    return [parse_conversation(c, found[c]) for c in ids]


# -- memories and labels -----------------------------------------------------------------------

def _prefix(conv: Conversation, one_store: bool) -> str:
    return f"/conv-{conv.id}" if one_store else ""


def _session_of(dia_id: str) -> int:
    return int(dia_id[1:].split(":")[0])


def turn_path(dia_id: str, prefix: str = "") -> str:
    """``D7:12`` -> ``/session-07/D7-12.md``."""
    return f"{prefix}/session-{_session_of(dia_id):02d}/{dia_id.replace(':', '-')}.md"


def session_path(number: int, prefix: str = "") -> str:
    return f"{prefix}/session-{number:02d}.md"


def _line(turn: Turn) -> str:
    photo = f" [shares a photo: {turn.caption}]" if turn.caption else ""
    return f"{turn.speaker}: {turn.text}{photo}"


def memories(conv: Conversation, level: str, one_store: bool = False) -> dict[str, str]:
    """The memories of ``conv`` at ``level``: path -> content."""
    pre = _prefix(conv, one_store)
    if level == "turn":
        return {turn_path(t.dia_id, pre): f"{s.date} — {_line(t)}\n"
                for s in conv.sessions for t in s.turns}
    return {session_path(s.number, pre): "\n".join([s.date, *(_line(t) for t in s.turns)]) + "\n"
            for s in conv.sessions}


def labels(conv: Conversation, q: Question, level: str, one_store: bool = False) -> list[str]:
    """The memories that answer ``q`` at ``level`` (each once, in evidence order)."""
    pre = _prefix(conv, one_store)
    paths = [turn_path(e, pre) if level == "turn" else session_path(_session_of(e), pre)
             for e in q.evidence]
    return list(dict.fromkeys(paths))


# -- baselines ---------------------------------------------------------------------------------

def tokens(text: str) -> list[str]:
    """BM25's tokens: the lower-cased words (letters, digits, underscore)."""
    return re.findall(r"\w+", text.lower())


class BM25Okapi:
    """Okapi BM25 as rank_bm25's ``BM25Okapi`` computes it, with its defaults: a word's idf is
    ``log(N - n + 0.5) - log(n + 0.5)``, and a negative one is replaced by ``epsilon`` times
    the mean idf; a document scores the sum over the query's tokens (repeats count again) of
    ``idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len / avglen))``."""

    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75,
                 epsilon: float = 0.25) -> None:
        self.k1, self.b = k1, b
        self.freqs = [Counter(doc) for doc in corpus]
        self.lengths = [len(doc) for doc in corpus]
        self.avgdl = sum(self.lengths) / len(corpus)
        df: Counter[str] = Counter()
        for f in self.freqs:
            df.update(f.keys())
        n = len(corpus)
        self.idf = {w: math.log(n - c + 0.5) - math.log(c + 0.5) for w, c in df.items()}
        eps = epsilon * sum(self.idf.values()) / len(self.idf)
        for w, v in self.idf.items():
            if v < 0:
                self.idf[w] = eps

    def scores(self, query: Sequence[str]) -> list[float]:
        out = [0.0] * len(self.freqs)
        for q in query:
            idf = self.idf.get(q, 0.0)
            if not idf:
                continue
            for i, f in enumerate(self.freqs):
                tf = f.get(q, 0)
                if tf:
                    norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avgdl)
                    out[i] += idf * tf * (self.k1 + 1) / (tf + norm)
        return out


class Baselines:
    """grep and BM25 over a store's memories, computed here on the same texts."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.paths = sorted(texts)
        self.lower = [texts[p].lower() for p in self.paths]
        self.bm25 = BM25Okapi([tokens(texts[p]) for p in self.paths])

    def grep(self, question: str) -> list[str]:
        """The generous grep of issue 20 (bench_recall's ``grep_rank``, done in memory):
        memories ranked by how many of the question's words of 4+ letters they contain
        (case-insensitive substrings), then by path; those holding none are left out."""
        words = {w for w in "".join(c if c.isalnum() else " " for c in question.lower()).split()
                 if len(w) >= 4}
        counts = [(sum(w in text for w in words), p)
                  for p, text in zip(self.paths, self.lower, strict=True)]
        return [p for n, p in sorted((-n, p) for n, p in counts if n)]

    def bm25_rank(self, question: str) -> list[str]:
        """Memories by BM25 score (then path); those scoring 0 (no word of the question) are
        left out."""
        scored = zip(self.bm25.scores(tokens(question)), self.paths, strict=True)
        return [p for s, p in sorted((-s, p) for s, p in scored if s > 0)]


# -- metrics -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Score:
    hit5: bool  # a labelled memory in the first 5
    recall5: float  # the share of the labelled memories in the first 5
    rr10: float  # 1/rank of the first labelled memory in the first 10, else 0


def score(ranked: Sequence[str], labelled: Iterable[str]) -> Score:
    want = set(labelled)
    top5 = set(ranked[:5]) & want
    rr = next((1.0 / r for r, p in enumerate(ranked[:10], 1) if p in want), 0.0)
    return Score(bool(top5), len(top5) / len(want) if want else 0.0, rr)


def summary(scores: Sequence[Score]) -> dict[str, float]:
    """hit@5, recall@5 and MRR@10 over ``scores`` (their means), and how many."""
    n = len(scores)
    if not n:
        return {"n": 0, "hit@5": math.nan, "recall@5": math.nan, "mrr@10": math.nan}
    return {"n": n, "hit@5": sum(s.hit5 for s in scores) / n,
            "recall@5": sum(s.recall5 for s in scores) / n,
            "mrr@10": sum(s.rr10 for s in scores) / n}


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


#: Questions about things no LoCoMo memory mentions (none is about two friends' lives):
#: facts, a team's systems, keyboard noise, other languages. A search should answer them
#: with nothing.
UNRELATED = (
    "What is the boiling point of mercury?",
    "Which firmware does my router run?",
    "zzzz qqqq",
    "What port does the staging PostgreSQL server listen on?",
    "How do I rotate the TLS certificate on the load balancer?",
    "What is the half-life of carbon-14?",
    "Who won the 1966 FIFA World Cup final?",
    "What's the VAT number of the Luxembourg subsidiary?",
    "kubectl rollout undo deployment",
    "Quelle est la capitale de l'Australie ?",
    "Wie hoch ist die Zugspitze?",
    "Which Debian release first shipped Python 3.11?",
    "What is the SHA of the last release tag?",
    "invoice 4471 overdue",
    "What's the torque spec for the M8 bolts on the gearbox?",
    "How many moons does Neptune have?",
    "asdf jkl; qwerty uiop",
    "What is the atomic number of tungsten?",
    "Which cron job purges the audit log?",
    "What is the default MTU of a VXLAN interface?",
    "Who signed the 1648 Peace of Westphalia?",
    "what's our S3 bucket's lifecycle rule",
    "How is the Fourier transform of a Gaussian computed?",
    "Which SSH key is authorized on the bastion host?",
    "¿Cuál es la fórmula química del ácido sulfúrico?",
    "What was the closing price of the Nikkei 225 yesterday?",
    "Which ISO standard covers information security management?",
    "lorem ipsum dolor sit amet",
    "How long is the warranty on the dishwasher's pump?",
    "What is the speed of sound in seawater?",
    "Which Kafka topic holds the payment events?",
    "What's the refractive index of diamond?",
    "Who maintains the Terraform module for the VPC?",
    "Quel est le taux de TVA sur les livres en France ?",
    "What is the cache eviction policy of the CDN?",
    "How many bytes are in an IPv6 address?",
    "xkcd 927 standards",
    "Which register holds the return value on x86-64?",
    "What was decided about the Q3 budget for the data centre?",
    "What is the melting point of tungsten carbide?",
)
