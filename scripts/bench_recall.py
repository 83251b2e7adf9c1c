#!/usr/bin/env python3
"""Measure recall: how well memfs finds a memory asked for in other words, and what it costs.

Run it through ``scripts/bench_recall`` (the mount phase needs root and FUSE).

1. **Quality**, on a labelled set (``--set``, default ``scripts/recall/everyday.json``:
   ``memories`` path -> content, ``questions`` [{"q", "a": [acceptable paths]}]), for
   ``grep`` (every word of 4+ letters of the question, ``grep -rilF`` over the memories as
   files, files ranked by how many words they hold, then by path), ``words`` (the store's
   text index alone), ``meaning`` (the local model alone), ``hybrid`` (both, as memfs ranks
   them: the calibrated relevance), each with threshold 0; ``hybrid, default threshold`` (the
   search as an agent gets it), and ``hybrid-rrf`` and ``hybrid-weighted`` (the fusions it is
   measured against). recall@5: the share of questions with an acceptable path in
   the first 5; MRR: the mean of 1/rank of the first acceptable path in the first 10 (0 when
   none). The same questions are asked again with the set's memories among --memories
   memories (the rest: generated 2 kB memories on other subjects).
2. **Speed** on that store of --memories memories of about 2 kB: the time a
   :class:`BackgroundIndexer` (what a mount daemon and ``memfs serve`` run) takes to embed them
   all with the local model; then the latency of --queries searches (p50, p99; the question's
   embedding included; words-only searches beside them).
3. **Memory**: the resident memory a process gains by loading the local model and embedding
   (a fresh interpreter, VmRSS before and after).
4. **A mount while the indexer works** (``--no-mount`` skips it): a store of --busy-memories
   unindexed memories of 2 kB mounted with ``MEMFS_EMBEDDINGS=none`` (alone, and beside busy
   loops at nice 19 on every core: an idle CPU wakes slowly, which alone made warm reads 2x
   slower) and with ``local`` (its daemon then indexes them in the background), in turns
   (--rounds each, a fresh copy of the database each time, the order turned every round); on
   each, --files files of 2 kB are created, read (warm), overwritten and unlinked. Ratios are
   speed ratios, indexing vs not (1.0: as fast). A round counts only if the indexer was still
   at work when it ended. The daemons' RSS is read at the end of each.

**LoCoMo** (``--locomo PATH``: the public benchmark of issue 39, read from the path given,
never copied here; :mod:`locomo` loads it) replaces all of the above: one store per
conversation (``--one-store``: one for all), at the turn and the session level, memfs's search
(``memfs``, and its ``words`` and ``meaning`` channels alone) against ``grep`` and ``bm25``
computed on the same memories: hit@5, full recall@5, MRR@10 and latency (p50, p99, medians of
--runs), for questions of categories 1-4, category 5 (adversarial) apart and all five
together; then questions about things no memory mentions (:data:`locomo.UNRELATED`), asked
with the search's defaults, scored by how many are answered with nothing. ``--work DIR`` keeps
the indexed databases there for the next run (only what changed is written and embedded
again). docs/recall.md gives the protocol and the figures.

Nothing here is a test: run it, read the figures, put them in docs/performance.md (LoCoMo:
docs/recall.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import locomo  # noqa: E402  (scripts/locomo.py, beside this script)

from memfs.recall.indexer import BackgroundIndexer, has_work  # noqa: E402
from memfs.rules import Limits  # noqa: E402
from memfs.store import Store  # noqa: E402

DEFAULT_SET = REPO / "scripts" / "recall" / "everyday.json"
MEMFS = Path(sys.executable).with_name("memfs")
METHODS = ("grep", "words", "meaning", "hybrid", "hybrid, default threshold", "hybrid-rrf",
           "hybrid-weighted")
#: Subjects of the generated memories: none of the labelled set's.
FILLER_TOPICS = (
    "warehouse inventory", "garden irrigation", "chess openings", "bird watching",
    "tax paperwork", "bicycle repair", "choir rehearsal", "aquarium chemistry",
    "pottery glazes", "kite design", "train timetables", "beekeeping", "sourdough starters",
    "telescope alignment", "knitting patterns", "orchestra seating", "mineral collecting",
    "sailing knots", "origami folds", "crossword clues",
)
FILLER_WORDS = (
    "inventory", "shelf", "pallet", "sprinkler", "valve", "pawn", "bishop", "gambit", "heron",
    "plumage", "receipt", "deduction", "spoke", "derailleur", "soprano", "tenor", "nitrate",
    "filter", "kiln", "glaze", "cobalt", "spar", "bridle", "platform", "departure", "hive",
    "queen", "nectar", "levain", "crumb", "eyepiece", "collimation", "purl", "cable", "viola",
    "cello", "quartz", "geode", "bowline", "cleat", "crease", "valley", "fold", "across",
    "down", "clue", "grid", "schedule", "weekly", "monthly", "batch", "count", "measure",
    "adjust", "replace", "order", "spare", "backup", "label", "drawer", "notebook", "sketch",
    "record", "compare", "season", "spring", "autumn", "winter", "summer", "morning", "evening",
)


def load_set(path: Path) -> tuple[dict[str, str], list[dict[str, Any]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return dict(data["memories"]), list(data["questions"])


def filler(i: int, size: int = 2000) -> tuple[str, str]:
    """A generated memory of about ``size`` bytes on a subject of :data:`FILLER_TOPICS`."""
    rnd = random.Random(i)
    topic = FILLER_TOPICS[i % len(FILLER_TOPICS)]
    lines = [f"# Notes on {topic} ({i})", ""]
    while sum(len(x) + 1 for x in lines) < size:
        words = rnd.choices(FILLER_WORDS, k=rnd.randint(8, 16))
        lines.append(f"- {topic}: " + " ".join(words) + ".")
    slug = topic.replace(" ", "-")
    return f"/archive/{slug}/note-{i:04d}.md", "\n".join(lines)[:size] + "\n"


# -- quality -----------------------------------------------------------------------------------

def grep_rank(root: Path, question: str) -> list[str]:
    """The generous grep of issue 20: files ranked by how many of the question's words of 4+
    letters they contain (case-insensitive, fixed strings), then by path."""
    words = {w for w in "".join(c if c.isalnum() else " " for c in question.lower()).split()
             if len(w) >= 4}
    counts: dict[str, int] = {}
    for w in sorted(words):
        out = subprocess.run(["grep", "-rilF", "--", w, "."], cwd=root, capture_output=True,
                             text=True, check=False).stdout
        for line in out.splitlines():
            p = "/" + line.removeprefix("./")
            counts[p] = counts.get(p, 0) + 1
    return sorted(counts, key=lambda p: (-counts[p], p))


def score(ranked: Sequence[str], answers: Sequence[str]) -> tuple[bool, float]:
    """(an answer in the first 5, 1/rank of the first answer in the first 10 or 0)."""
    for rank, p in enumerate(ranked[:10], 1):
        if p in answers:
            return rank <= 5, 1.0 / rank
    return False, 0.0


def quality(store: Store, sid: str, questions: list[dict[str, Any]],
            files: Path | None) -> dict[str, dict[str, Any]]:
    # The ranking with threshold 0 (what the methods find), and memfs's search as an agent
    # gets it (the default threshold: "hybrid, default threshold").
    runs: dict[str, Callable[[str], list[str]]] = {
        "words": lambda q: [h.path for h in store.search.in_store(sid, q, channels=("words",),
                                                         threshold=0).hits],
        "meaning": lambda q: [h.path for h in store.search.in_store(sid, q, channels=("meaning",),
                                                           threshold=0).hits],
        "hybrid": lambda q: [h.path for h in store.search.in_store(sid, q, threshold=0).hits],
        "hybrid, default threshold": lambda q: [h.path for h in store.search.in_store(sid, q).hits],
        "hybrid-rrf": lambda q: [h.path for h in
                                 store.search.in_store(sid, q, fusion="rrf", threshold=0).hits],
        "hybrid-weighted": lambda q: [h.path for h in
                                      store.search.in_store(sid, q, fusion="weighted",
                                                            threshold=0).hits],
    }
    if files is not None:
        runs = {"grep": lambda q: grep_rank(files, q), **runs}
    table: dict[str, dict[str, Any]] = {}
    for name, rank in runs.items():
        hits, rr, misses = 0, 0.0, []
        for q in questions:
            top5, r = score(rank(q["q"]), q["a"])
            hits += top5
            rr += r
            if not top5:
                misses.append(q["q"])
        table[name] = {"recall@5": hits / len(questions), "mrr": rr / len(questions),
                       "found": hits, "questions": len(questions), "missed": misses}
    return table


def fill(store: Store, sid: str, memories: dict[str, str]) -> None:
    for path, content in memories.items():
        store.memories.write_path(sid, path, content, actor=None)


def index_in_background(store: Store, sid: str, timeout: float,
                        whole: list[float] | None = None) -> float:
    """Seconds a BackgroundIndexer takes to index the whole store (every memory's first
    passage: every memory found by meaning); with ``whole``, it goes on until every passage
    of every memory is embedded, and appends the seconds that took."""
    t0 = time.monotonic()
    bg = BackgroundIndexer(store, store.search.embeddings, lambda: [sid]).start()  # type: ignore[arg-type]
    try:
        while (status := store.search.status(sid))["indexed"] < status["memories"]:
            if time.monotonic() - t0 > timeout:
                raise SystemExit(f"not indexed after {timeout:.0f} s: {status}")
            time.sleep(0.2)
        indexed = time.monotonic() - t0
        if whole is not None:
            model = store.search.embeddings.model  # type: ignore[union-attr]
            while has_work(store, sid, model):
                if time.monotonic() - t0 > timeout:
                    raise SystemExit(f"not read whole after {timeout:.0f} s")
                time.sleep(0.5)
            whole.append(time.monotonic() - t0)
        return indexed
    finally:
        bg.stop()


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def latencies(store: Store, sid: str, questions: list[str], n: int,
              channels: tuple[str, ...]) -> dict[str, float]:
    times = []
    for i in range(n):
        q = questions[i % len(questions)]
        t0 = time.perf_counter()
        store.search.in_store(sid, q, channels=channels)
        times.append(time.perf_counter() - t0)
    return {"p50_ms": percentile(times, 50) * 1000, "p99_ms": percentile(times, 99) * 1000,
            "n": n}


# -- memory ------------------------------------------------------------------------------------

_RSS_PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
from memfs.recall import embeddings
from memfs.store import Store
before = rss()
p = embeddings.local()
p.passages(['/notes/a.md\\nThe team meets on Tuesdays at ten.'])
p.query('when does the team meet', 2.0)
print(json.dumps({'before_kib': before, 'after_kib': rss()}))
"""


def model_rss() -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _RSS_PROBE, str(REPO)], capture_output=True,
                         text=True, check=True).stdout
    r = json.loads(out)
    return {"before_mib": r["before_kib"] / 1024, "after_mib": r["after_kib"] / 1024,
            "added_mib": (r["after_kib"] - r["before_kib"]) / 1024}


# -- a mount while the indexer works -------------------------------------------------------------

def _vmrss_mib(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


@contextlib.contextmanager
def mounted(db: Path, store: str, root: Path, embeddings: str, log: Path) -> Iterator[int]:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMFS_URL", "MEMFS_API_KEY")}
    env.update(MEMFS_DB=str(db), MEMFS_EMBEDDINGS=embeddings)
    root.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(MEMFS), "mount", store, str(root)], env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not os.path.ismount(root):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"memfs mount did not mount: {log.read_text()[-2000:]}")
            time.sleep(0.02)
        yield proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if os.path.ismount(root):
            subprocess.run(["fusermount3", "-uz", str(root)], check=False)


def workload(root: Path, files: int) -> dict[str, float]:
    """ops/s of create+write+close, warm read, overwrite and unlink of ``files`` 2 kB files."""
    d = root / "bench"
    d.mkdir()
    data = [(f"line {i} " * 250)[:2000].encode() for i in range(files)]
    rates: dict[str, float] = {}

    def timed(name: str, op: Callable[[int], None]) -> None:
        t0 = time.perf_counter()
        for i in range(files):
            op(i)
        rates[name] = files / (time.perf_counter() - t0)

    def write(i: int) -> None:
        fd = os.open(d / f"f{i:04d}.md", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data[i])
        finally:
            os.close(fd)

    def read(i: int) -> None:
        fd = os.open(d / f"f{i:04d}.md", os.O_RDONLY)
        try:
            os.read(fd, 65536)
        finally:
            os.close(fd)

    timed("create", write)
    timed("warm read", read)
    data = [b[::-1] for b in data]
    timed("overwrite", write)
    timed("unlink", lambda i: os.unlink(d / f"f{i:04d}.md"))
    d.rmdir()
    return rates


@contextlib.contextmanager
def cpu_load(on: bool) -> Iterator[None]:
    """A busy loop at nice 19 on every core while the block runs (if ``on``)."""
    procs = [subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"])
             for _ in range(os.cpu_count() or 1)] if on else []
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


#: The mounts compared: the indexer off, the indexer off beside busy loops at nice 19 (an idle
#: CPU wakes slowly: with the cores busy, a mount's warm reads ran 2x faster, indexer or not),
#: and the indexer at work.
MOUNTS = ("none", "none+load", "local")


def mount_while_indexing(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    seed = work / "busy.db"
    s = Store(seed)
    sid = s.stores.create("busy").id
    fill(s, sid, dict(filler(i) for i in range(args.busy_memories)))
    s.close()
    rows: dict[str, list[dict[str, float]]] = {k: [] for k in MOUNTS}
    rss: dict[str, list[float]] = {k: [] for k in MOUNTS}
    valid = 0
    for rnd in range(args.rounds):
        # in turns, the order turned every round (the first mount of a round ran slower)
        for kind in MOUNTS[rnd % 3:] + MOUNTS[:rnd % 3]:
            setting = kind.split("+")[0]
            db = work / f"round-{rnd}-{setting}.db"
            shutil.copyfile(seed, db)
            root = work / f"mnt-{rnd}-{kind}"
            with mounted(db, "busy", root, setting, work / f"mount-{rnd}-{kind}.log") as pid:
                check = Store(db)
                check.search.use_embeddings(setting)
                if setting == "local":  # the indexer at work before the workload starts
                    deadline = time.monotonic() + 60
                    while check.search.status(sid)["indexed"] == 0:
                        if time.monotonic() > deadline:
                            raise SystemExit("the mount's indexer did not start in 60 s")
                        time.sleep(0.1)
                with cpu_load(kind == "none+load"):
                    rows[kind].append(workload(root, args.files))
                rss[kind].append(_vmrss_mib(pid))
                if setting == "local":
                    st = check.search.status(sid)
                    busy = st["indexed"] < st["memories"]
                    valid += busy
                    print(f"  round {rnd + 1}: the indexer had embedded {st['indexed']} of "
                          f"{st['memories']} at the end of the workload"
                          + ("" if busy else " (done: this round does not count)"),
                          file=sys.stderr)
                check.close()
    ops = rows["none"][0].keys()
    med = {k: {op: statistics.median(r[op] for r in v) for op in ops} for k, v in rows.items()}
    return {"rounds": args.rounds, "valid_rounds": valid, "files": args.files,
            "busy_memories": args.busy_memories, "ops_per_s": med,
            "ratio": {op: med["local"][op] / med["none"][op] for op in ops},
            "ratio_loaded": {op: med["local"][op] / med["none+load"][op] for op in ops},
            "daemon_rss_mib": {k: statistics.median(v) for k, v in rss.items()}}


# -- LoCoMo (issue 39) -------------------------------------------------------------------------

#: ``memfs`` is the search as it ranks (fusion "calibrated"); ``memfs-rrf`` and
#: ``memfs-weighted`` the two fusions it is measured against (memfs.recall.search).
LOCOMO_METHODS = ("grep", "bm25", "words", "meaning", "memfs", "memfs-rrf", "memfs-weighted")


@dataclasses.dataclass
class Target:
    """A store of the benchmark: its conversations' memories and questions (with labels)."""

    name: str
    sid: str
    texts: dict[str, str]
    questions: list[tuple[str, locomo.Question, list[str]]]  # (conversation id, q, labels)
    baselines: locomo.Baselines


def _all_paths(store: Store, sid: str) -> set[str]:
    paths: set[str] = set()
    page: str | None = None
    while True:
        got = store.memories.list(sid, limit=100, page=page)
        paths.update(m.path for m in got.data)
        if not (page := got.next_page):
            return paths


def locomo_stores(work: Path, level: str, convs: list[locomo.Conversation],
                  one_store: bool) -> tuple[Store, list[Target], dict[str, Any]]:
    """The database of ``level`` under ``work`` with a store per conversation (or one for all),
    made or brought up to date: memories written again only if they changed (an unchanged
    write is no new version, and keeps its vectors), those no longer in the set deleted."""
    groups = [("all", convs)] if one_store else [(c.id, [c]) for c in convs]
    texts = {name: {p: t for c in cs for p, t in locomo.memories(c, level, one_store).items()}
             for name, cs in groups}
    most = max(len(t) for t in texts.values())
    db = work / f"locomo-{level}{'-one-store' if one_store else ''}.db"
    t0 = time.monotonic()
    store = Store(db, limits=dataclasses.replace(Limits(), max_memories=max(2000, most)),
                  synchronous="NORMAL")
    store.search.use_embeddings("local")
    existing = {s.name: s.id for s in store.stores.list(limit=100).data}
    targets = []
    for name, cs in groups:
        sname = f"locomo-{name}"
        sid = existing[sname] if sname in existing else store.stores.create(sname).id
        for gone in _all_paths(store, sid) - texts[name].keys():
            store.memories.delete_path(sid, gone, actor=None)
        fill(store, sid, texts[name])
        qs = [(c.id, q, locomo.labels(c, q, level, one_store)) for c in cs for q in c.questions]
        targets.append(Target(sname, sid, texts[name], qs, locomo.Baselines(texts[name])))
    return store, targets, {"db": str(db), "written_seconds": time.monotonic() - t0}


def index_all(store: Store, sids: list[str], timeout: float) -> dict[str, Any]:
    """Embed every memory of ``sids`` (in this process, at its priority): seconds, and how
    many were embedded now (the rest were indexed already, by an earlier run in --work)."""
    t0 = time.monotonic()
    pending = sum(store.search.status(s)["memories"] - store.search.status(s)["indexed"]
                  for s in sids)
    for sid in sids:
        while (st := store.search.status(sid))["indexed"] < st["memories"]:
            if time.monotonic() - t0 > timeout:
                raise SystemExit(f"not indexed after {timeout:.0f} s: {st}")
            progress = store.search.index(sid, seconds=30)
            why = getattr(progress, "reason", None)
            if why and not getattr(progress, "embedded", 0):
                raise SystemExit(f"cannot index by meaning: {why}")
    return {"seconds": time.monotonic() - t0, "embedded": pending}


def _threshold_kwargs(store: Store) -> dict[str, Any]:
    """``threshold=0.0`` if the search has a threshold (issue 39 gives it one, 0.7 by
    default, that hides weak hits): the ranking figures measure the ranking, not the cut."""
    params = inspect.signature(store.search.in_store).parameters
    return {"threshold": 0.0} if "threshold" in params else {}


def _rankers(store: Store, t: Target, kw: dict[str, Any]) -> dict[str, Callable[[str], list[str]]]:
    def search(channels: tuple[str, ...], **fusion: str) -> Callable[[str], list[str]]:
        def ranked(q: str) -> list[str]:
            result = store.search.in_store(t.sid, q, limit=10, channels=channels, **fusion, **kw)
            if "meaning" in channels and not result.meaning:
                raise SystemExit(f"meaning did not rank ({result.note}): the figures would "
                                 "be words alone")
            return [h.path for h in result.hits]
        return ranked
    return {"grep": t.baselines.grep, "bm25": t.baselines.bm25_rank,
            "words": search(("words",)), "meaning": search(("meaning",)),
            "memfs": search(("words", "meaning")),
            "memfs-rrf": search(("words", "meaning"), fusion="rrf"),
            "memfs-weighted": search(("words", "meaning"), fusion="weighted")}


def locomo_measure(store: Store, targets: list[Target], methods: Sequence[str],
                   runs: int) -> dict[str, Any]:
    """Every question of every category asked of its store by each method, --runs times
    (the methods in turns, so that none always goes first): the scores of the first run
    (rankings do not change between runs), latencies' p50 and p99 of each run."""
    kw = _threshold_kwargs(store)
    rankers = {t.name: _rankers(store, t, kw) for t in targets}
    scores: dict[str, list[locomo.Score]] = {m: [] for m in methods}
    p50: dict[str, list[float]] = {m: [] for m in methods}
    p99: dict[str, list[float]] = {m: [] for m in methods}
    for run in range(runs):
        for m in methods[run % len(methods):] + methods[:run % len(methods)]:
            times = []
            for t in targets:
                rank = rankers[t.name][m]
                for _, q, lab in t.questions:
                    t0 = time.perf_counter()
                    ranked = rank(q.question)
                    times.append(time.perf_counter() - t0)
                    if run == 0:
                        scores[m].append(locomo.score(ranked, lab))
            p50[m].append(locomo.percentile(times, 50) * 1000)
            p99[m].append(locomo.percentile(times, 99) * 1000)
    asked = [(t.name, cid, q, lab) for t in targets for cid, q, lab in t.questions]
    out: dict[str, Any] = {"methods": {}, "threshold_kwargs": kw}
    for m in methods:
        by = {c: [s for s, (_, _, q, _) in zip(scores[m], asked, strict=True) if q.category == c]
              for c in locomo.ALL_CATEGORIES}
        out["methods"][m] = {
            "main": locomo.summary([s for c in locomo.MAIN_CATEGORIES for s in by[c]]),
            "category_5": locomo.summary(by[5]),
            "all": locomo.summary(scores[m]),
            "by_category": {c: locomo.summary(by[c]) for c in locomo.ALL_CATEGORIES},
            "p50_ms": statistics.median(p50[m]), "p99_ms": statistics.median(p99[m]),
            "p50_ms_runs": p50[m], "p99_ms_runs": p99[m]}
    out["questions"] = [
        {"store": name, "conversation": cid, "question": q.question, "category": q.category,
         "labels": lab, **{m: dataclasses.asdict(scores[m][i]) for m in methods}}
        for i, (name, cid, q, lab) in enumerate(asked)]
    return out


def locomo_defaults(store: Store, targets: list[Target]) -> dict[str, Any]:
    """The search as an agent gets it (its default threshold and limit): hit@5 on the
    answerable questions (categories 1-4), and how many :data:`locomo.UNRELATED` questions
    each store answers with nothing."""
    answerable, empty, asked = [], 0, 0
    for t in targets:
        for _, q, lab in t.questions:
            if q.category in locomo.MAIN_CATEGORIES:
                answerable.append(locomo.score(
                    [h.path for h in store.search.in_store(t.sid, q.question).hits], lab))
        for uq in locomo.UNRELATED:
            asked += 1
            empty += not store.search.in_store(t.sid, uq).hits
    return {"answerable": locomo.summary(answerable), "unrelated_asked": asked,
            "unrelated_empty": empty, "threshold": "threshold" in _threshold_kwargs(store)}


def _f(x: float) -> str:
    return "-" if x != x else f"{x:.3f}"  # nan: no such question


def render_locomo(level: str, convs: list[locomo.Conversation], one_store: bool,
                  r: dict[str, Any]) -> list[str]:
    ms = r["methods"]
    first = next(iter(ms.values()))
    where = "all in one store" if one_store else "one store each"
    lines = [f"### LoCoMo, {level} level: conversations {', '.join(c.id for c in convs)} "
             f"({where}, {r['memories']:,} memories)", "",
             f"- {first['main']['n']} questions of categories 1-4, "
             f"{first['category_5']['n']} of category 5 (adversarial); "
             f"{sum(c.skipped for c in convs)} left out (no evidence)",
             f"- indexed by meaning in {r['index']['seconds']:.1f} s "
             f"({r['index']['embedded']} memories embedded now; written in "
             f"{r['written_seconds']:.1f} s)",
             f"- latency: medians over {len(first['p50_ms_runs'])} run(s); grep and bm25 in "
             "Python over texts in memory; the others are store.search.in_store(limit=10)"
             + (" with threshold=0" if r["threshold_kwargs"] else ""), "",
             "| method | hit@5 | recall@5 | MRR@10 | p50 ms | p99 ms |",
             "|---|---|---|---|---|---|"]
    for m, v in ms.items():
        s = v["main"]
        lines.append(f"| {m} | {_f(s['hit@5'])} | {_f(s['recall@5'])} | {_f(s['mrr@10'])} "
                     f"| {v['p50_ms']:.1f} | {v['p99_ms']:.1f} |")
    lines += ["", "| method | cat 1 hit@5 | cat 2 | cat 3 | cat 4 | cat 5 (adversarial) hit@5 "
              "| cat 5 recall@5 | cats 1-5 hit@5 | cats 1-5 recall@5 |",
              "|---|---|---|---|---|---|---|---|---|"]
    for m, v in ms.items():
        by = v["by_category"]
        lines.append(f"| {m} | " + " | ".join(_f(by[c]["hit@5"]) for c in (1, 2, 3, 4))
                     + f" | {_f(by[5]['hit@5'])} | {_f(by[5]['recall@5'])} "
                     f"| {_f(v['all']['hit@5'])} | {_f(v['all']['recall@5'])} |")
    d = r.get("defaults")
    if d:
        memfs = ms.get("memfs", {}).get("main", {}).get("hit@5", math.nan)
        share = d["unrelated_empty"] / d["unrelated_asked"]
        lines += ["", f"- unrelated questions ({len(locomo.UNRELATED)} a store, "
                  f"{d['unrelated_asked']} asked), memfs's default search: "
                  f"{d['unrelated_empty']} answered empty ({share:.1%}); answerable hit@5 at "
                  f"the default threshold {_f(d['answerable']['hit@5'])} (threshold 0: "
                  f"{_f(memfs)})" + ("" if d["threshold"] else
                                     " (the search has no threshold yet)")]
    return [*lines, ""]


def run_locomo(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    convs = locomo.load(args.locomo, [c.strip() for c in args.convs.split(",") if c.strip()])
    levels = locomo.LEVELS if args.level == "both" else (args.level,)
    report: dict[str, Any] = {"locomo": str(args.locomo), "conversations": [c.id for c in convs],
                              "one_store": args.one_store, "runs": args.runs, "levels": {}}
    print(f"# LoCoMo recall, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs\n",
          flush=True)
    for level in levels:
        store, targets, r = locomo_stores(work, level, convs, args.one_store)
        try:
            r["memories"] = sum(len(t.texts) for t in targets)
            r["index"] = (index_all(store, [t.sid for t in targets], 3600)
                          if {"meaning", "memfs"} & set(args.methods)
                          else {"seconds": 0.0, "embedded": 0})
            r.update(locomo_measure(store, targets, args.methods, args.runs))
            if "memfs" in args.methods:
                r["defaults"] = locomo_defaults(store, targets)
        finally:
            store.close()
        report["levels"][level] = r
        print("\n".join(render_locomo(level, convs, args.one_store, r)), flush=True)
    return report


# -- the run -----------------------------------------------------------------------------------

def render_quality(title: str, table: dict[str, dict[str, Any]]) -> list[str]:
    out = [f"### {title}", "", "| method | recall@5 | MRR |", "|---|---|---|"]
    for name in METHODS:
        if name in table:
            r = table[name]
            out.append(f"| {name} | {r['recall@5']:.3f} ({r['found']}/{r['questions']}) "
                       f"| {r['mrr']:.3f} |")
    return [*out, ""]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", type=Path, default=DEFAULT_SET, help="the labelled set (JSON)")
    ap.add_argument("--memories", type=int, default=2000, help="memories of the big store")
    ap.add_argument("--queries", type=int, default=200, help="searches timed")
    ap.add_argument("--busy-memories", type=int, default=1500,
                    help="unindexed memories of the mounted store")
    ap.add_argument("--files", type=int, default=300, help="files of the mount workload")
    ap.add_argument("--rounds", type=int, default=3, help="turns of each mount")
    ap.add_argument("--quality-only", action="store_true", help="only the labelled set")
    ap.add_argument("--no-mount", action="store_true", help="skip the mount phase")
    ap.add_argument("--json", type=Path, help="write the figures to this file too")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    lo = ap.add_argument_group("LoCoMo (instead of all of the above)")
    lo.add_argument("--locomo", type=Path, metavar="PATH",
                    help="locomo10.zip, the directory it unpacks to, or locomo10.json")
    lo.add_argument("--convs", default="26,30,41",
                    help="conversations, by id (default: 26,30,41, the tuning ones)")
    lo.add_argument("--level", choices=("turn", "session", "both"), default="both",
                    help="a memory per dialog turn, per session, or both in turn")
    lo.add_argument("--one-store", action="store_true",
                    help="every conversation in one store (paths under /conv-ID)")
    lo.add_argument("--methods", default=",".join(LOCOMO_METHODS),
                    help=f"a comma-separated subset of {','.join(LOCOMO_METHODS)}")
    lo.add_argument("--runs", type=int, default=1, help="runs (latencies: their medians)")
    lo.add_argument("--work", type=Path, metavar="DIR",
                    help="keep the databases here and reuse them (what is indexed already "
                    "is not embedded again)")
    args = ap.parse_args(argv)
    if args.locomo is not None:
        args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        if not args.methods or set(args.methods) - set(LOCOMO_METHODS):
            ap.error(f"--methods: a subset of {','.join(LOCOMO_METHODS)}")
        if args.runs < 1:
            ap.error("--runs must be at least 1")
        return _locomo_main(args)
    if args.work is not None:
        ap.error("--work is for --locomo")
    memories, questions = load_set(args.set)
    if args.memories < len(memories):
        ap.error(f"--memories must be at least the set's {len(memories)}")
    report: dict[str, Any] = {"set": str(args.set), "memories": len(memories),
                              "questions": len(questions)}
    lines = [f"# Recall, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs", "",
             f"Labelled set: {args.set.name}, {len(memories)} memories, "
             f"{len(questions)} questions.", ""]
    work = Path(tempfile.mkdtemp(prefix="memfs-bench-recall-"))
    try:
        files = work / "files"
        for path, content in memories.items():
            (files / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (files / path.lstrip("/")).write_text(content, encoding="utf-8")
        store = Store(work / "set.db")
        store.search.use_embeddings("local")
        sid = store.stores.create("set").id
        fill(store, sid, memories)
        index_in_background(store, sid, 600)
        report["quality"] = quality(store, sid, questions, files)
        lines += render_quality(f"The labelled set alone ({len(memories)} memories)",
                                report["quality"])
        store.close()
        print("\n".join(lines), flush=True)
        lines = []
        if not args.quality_only:
            big = Store(work / "big.db")
            big.search.use_embeddings("local")
            bid = big.stores.create("big").id
            fill(big, bid, memories)
            fill(big, bid, dict(filler(i) for i in range(args.memories - len(memories))))
            whole: list[float] = []
            secs = index_in_background(big, bid, 3600, whole)
            report["index_seconds"], report["read_whole_seconds"] = secs, whole[0]
            report["big_quality"] = quality(big, bid, questions, None)
            qs = [q["q"] for q in questions]
            report["latency"] = {"hybrid": latencies(big, bid, qs, args.queries,
                                                     ("words", "meaning")),
                                 "words": latencies(big, bid, qs, args.queries, ("words",))}
            big.close()
            report["model_rss"] = model_rss()
            lat = report["latency"]
            lines += render_quality(f"Among {args.memories} memories", report["big_quality"])
            lines += [f"### Speed at {args.memories} memories of ~2 kB", "",
                      f"- indexed by meaning in the background in {secs:.0f} s "
                      f"({secs / 60:.1f} min, {secs / args.memories * 1000:.0f} ms a memory: "
                      "every memory's first passage), read whole in "
                      f"{whole[0]:.0f} s ({whole[0] / 60:.1f} min)",
                      f"- search, hybrid (question embedded): p50 "
                      f"{lat['hybrid']['p50_ms']:.1f} ms, p99 {lat['hybrid']['p99_ms']:.1f} ms "
                      f"({args.queries} searches)",
                      f"- search, words only: p50 {lat['words']['p50_ms']:.1f} ms, p99 "
                      f"{lat['words']['p99_ms']:.1f} ms",
                      f"- the local model adds {report['model_rss']['added_mib']:.0f} MiB of "
                      f"RSS to a process ({report['model_rss']['before_mib']:.0f} -> "
                      f"{report['model_rss']['after_mib']:.0f} MiB)", ""]
            print("\n".join(lines), flush=True)
            lines = []
            if not args.no_mount:
                m = mount_while_indexing(work, args)
                report["mount"] = m
                lines += [f"### A mount while its daemon indexes {m['busy_memories']} memories "
                          f"({m['files']} files, median of {m['rounds']} rounds, "
                          f"{m['valid_rounds']} with the indexer at work throughout)", "",
                          "| operation | indexer off | off, cores busy at nice 19 | indexing "
                          "| ratio to off | ratio to off, cores busy |",
                          "|---|---|---|---|---|---|"]
                ops_s = m["ops_per_s"]
                for op, r in m["ratio"].items():
                    lines.append(f"| {op} | {ops_s['none'][op]:.0f}/s | "
                                 f"{ops_s['none+load'][op]:.0f}/s | {ops_s['local'][op]:.0f}/s "
                                 f"| {r:.2f} | {m['ratio_loaded'][op]:.2f} |")
                lines += ["", f"- the daemon's RSS: {m['daemon_rss_mib']['none']:.0f} MiB "
                          f"indexer off, {m['daemon_rss_mib']['local']:.0f} MiB indexing", ""]
                print("\n".join(lines), flush=True)
        if args.json:
            args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        return 0
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def _locomo_main(args: argparse.Namespace) -> int:
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="memfs-bench-locomo-"))
    try:
        report = run_locomo(args, work)
        if args.json:
            args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        return 0
    finally:
        if args.work is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work} (--work {work} reuses it)", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
