"""Workspaces and API keys (issue 22): the keys kept in the database (made, listed, revoked;
only the SHA-256 of a secret is kept), the grant a presented key carries now, and which
workspace an object belongs to (:meth:`Keys.check_visible`: another workspace's object is
the same 404 as an unknown one)."""

from __future__ import annotations

import builtins
import json
import logging
import secrets
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from ..backends import Row
from ..backends.scopes import key_scope, store_scope
from ..errors import InvalidRequest, MemfsError, NotFound, Unauthorized, UnknownKey
from ..models import DEFAULT_WORKSPACE, ROLES, Actor, ApiKey, Grant
from ..rules import format_time, new_id, parse_duration, validate_text, validate_workspace
from .base import Part
from .common import id_chunks, key_refusal, no_session, no_store, sha256_hex, utc_now

log = logging.getLogger(__name__)

#: The start of every secret :meth:`Keys.create` makes (a session token's is
#: ``memfs_session_``).
KEY_PREFIX = "memfs_key_"
#: A key's ``last_used_at`` is written at most this often (seconds): a read must not write
#: on every request.
LAST_USED_EVERY = 60.0
#: Seconds a request waits at most for the write lock to note its key's use.
TOUCH_PATIENCE = 0.05
#: The most stores one key may be scoped to, and the longest name.
MAX_KEY_STORES = 100
MAX_KEY_NAME = 200

#: The tables whose rows carry a ``workspace_id``, by the path parameter that names one.
_OWNERS = {
    "memory_store_id": "stores",
    "session_id": "sessions",
    "dream_id": "dreams",
    "agent_id": "agents",
    "environment_id": "environments",
}


class KeyCheck(NamedTuple):
    """A stored key as the Console checks a sign-in made with it
    (:meth:`Keys.check`): the SHA-256 of its secret (hex), its grant now, or (grant
    None) why it is refused now."""

    secret_sha256: str
    grant: Grant | None
    refused: str


def _no_object(param: str, object_id: str) -> NotFound:
    """The 404 of an unknown object, by its path parameter: what another workspace's is."""
    if param == "memory_store_id":
        return no_store(object_id)
    if param == "session_id":
        if object_id.startswith("memrevert_"):
            return NotFound(f"revert {object_id!r} not found")
        return no_session(object_id)
    if param == "dream_id":
        return NotFound(f"no dream {object_id!r}")
    return NotFound(f"{param.removesuffix('_id')} {object_id!r} not found")


def _key(row: Row, secret: str | None = None) -> ApiKey:
    by = (Actor(row["created_by_type"], row["created_by_id"])
          if row["created_by_type"] else None)
    return ApiKey(row["id"], row["name"], row["workspace_id"], row["role"],
                  json.loads(row["store_ids"]) if row["store_ids"] is not None else None,
                  row["created_at"], row["expires_at"], row["last_used_at"],
                  row["revoked_at"], by, secret)


def _use_unnoted(row: Row, now: str) -> bool:
    """Is the key of ``row`` due to have its use noted (:data:`LAST_USED_EVERY`)?"""
    last = row["last_used_at"]
    return last is None or (datetime.fromisoformat(now) - datetime.fromisoformat(last)
                            ).total_seconds() >= LAST_USED_EVERY


class Keys(Part):
    """The store's API keys and workspaces (a part of :class:`memfs.store.Store`)."""

    def create(
        self,
        name: str,
        *,
        workspace: str = DEFAULT_WORKSPACE,
        role: str = "read_write",
        store_ids: Sequence[str] | None = None,
        expires_in: Any = None,
        created_by: Actor | None = None,
    ) -> ApiKey:
        """Make an API key of ``workspace`` with ``role`` (:data:`memfs.models.ROLES`),
        opening only ``store_ids`` if given (each a store of that workspace), for
        ``expires_in`` (seconds, or a duration such as ``30d``; None: until revoked). The
        secret is in the result this once.

        :raises InvalidRequest: a bad name, workspace, role, duration or store list.
        :raises NotFound: a store that is not one of the workspace's.
        """
        validate_text([name, workspace, role, store_ids, expires_in], "the key")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_KEY_NAME:
            raise InvalidRequest(f"a key's name is 1 to {MAX_KEY_NAME} characters")
        if any(ord(ch) < 32 for ch in name):
            raise InvalidRequest("a key's name has no control characters")
        workspace = validate_workspace(workspace)
        if role not in ROLES:
            raise InvalidRequest(f"role must be one of {', '.join(ROLES)} (not {role!r})")
        if store_ids is not None:
            if (not isinstance(store_ids, list | tuple)
                    or not all(isinstance(s, str) for s in store_ids)):
                raise InvalidRequest("memory_store_ids must be a list of memory store ids")
            if not store_ids or len(store_ids) > MAX_KEY_STORES:
                raise InvalidRequest(f"a key is scoped to 1 to {MAX_KEY_STORES} memory stores")
            store_ids = list(dict.fromkeys(store_ids))
        created = datetime.now(UTC)
        expires = None
        if expires_in is not None:
            seconds = parse_duration(expires_in)
            expires = format_time(created + timedelta(seconds=seconds))
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        key_id = new_id("apikey")
        now = format_time(created)
        # The new key's own scope, and its stores' (each must stay one of the workspace's
        # until it commits: deleting a store holds its scope); no rule spans keys.
        with self.core.write(key_scope(key_id), *map(store_scope, store_ids or ())) as c:
            for sid in store_ids or ():
                self.check_visible(workspace, "memory_store_id", sid, c=c)
            c.execute(
                "INSERT INTO api_keys (id, name, workspace_id, role, store_ids, secret_sha256, "
                "created_at, expires_at, created_by_type, created_by_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key_id, name, workspace, role,
                 json.dumps(store_ids) if store_ids is not None else None,
                 sha256_hex(secret.encode()), now, expires,
                 created_by.type if created_by else None, created_by.id if created_by else None))
            row = c.execute("SELECT * FROM api_keys WHERE id = ?", (key_id,)).fetchone()
        log.info("made API key %s (%s) of workspace %s, role %s", key_id, name, workspace, role)
        return _key(row, secret)

    def list(self, *, workspace: str | None = None) -> builtins.list[ApiKey]:
        """The keys (of ``workspace``; None: every workspace's), newest first; never a
        secret."""
        if workspace is None:
            rows = self.core.all("SELECT * FROM api_keys ORDER BY created_at DESC, id DESC", ())
        else:
            rows = self.core.all("SELECT * FROM api_keys WHERE workspace_id = ? "
                             "ORDER BY created_at DESC, id DESC", (workspace,))
        return [_key(r) for r in rows]

    def get(self, key_id: str, *, workspace: str | None = None) -> ApiKey:
        """:raises NotFound: no such key (in ``workspace``)."""
        row = self.core.one("SELECT * FROM api_keys WHERE id = ?", (key_id,))
        if row is None or (workspace is not None and row["workspace_id"] != workspace):
            raise NotFound(f"API key {key_id} not found")
        return _key(row)

    def revoke(self, key_id: str, *, workspace: str | None = None) -> ApiKey:
        """Revoke a key, for good (a revoked key is returned unchanged): its next request is
        refused by every server on this database, and the streams it opened end.

        :raises NotFound: no such key (in ``workspace``).
        """
        with self.core.write(key_scope(key_id)) as c:
            row = c.execute("SELECT * FROM api_keys WHERE id = ?", (key_id,)).fetchone()
            if row is None or (workspace is not None and row["workspace_id"] != workspace):
                raise NotFound(f"API key {key_id} not found")
            if row["revoked_at"] is None:
                c.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ?", (utc_now(), key_id))
                log.info("revoked API key %s (%s)", key_id, row["name"])
        return self.get(key_id)

    def has_live_admin(self) -> bool:
        """Does the database hold an admin key of the default workspace that is neither
        revoked nor expired? Then someone can manage a server of it without a server key
        (``memfs serve`` on a non-loopback address). Another workspace's admin does not count
        (issue 38: a team-a admin key left a server with no key that saw the default
        workspace)."""
        return self.core.one(
            "SELECT 1 FROM api_keys WHERE role = 'admin' AND workspace_id = ? "
            "AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) LIMIT 1",
            (DEFAULT_WORKSPACE, utc_now())) is not None

    def grant(self, secret: str) -> Grant:
        """What the key ``secret`` may do now.

        :raises UnknownKey: not a key of this database. :raises Unauthorized: revoked, or
            expired.
        """
        row = self.core.one("SELECT * FROM api_keys WHERE secret_sha256 = ?",
                        (sha256_hex(secret.encode()),))
        if row is None:
            raise UnknownKey("invalid API key: not one of this server's keys (the memfs CLI "
                               "sends --api-key or $MEMFS_API_KEY)")
        return self._grant_now(row)

    def check(self, key_id: str) -> KeyCheck | None:
        """The key ``key_id`` as the Console checks a sign-in made with it, on every page:
        the SHA-256 of its secret (what the sign-in's cookie is signed under: the cookie never
        holds the secret) and what it may do now, or why it is refused now (revoked,
        expired). One look-up by primary key. None: no such key.

        :raises StorageError: the database could not tell.
        """
        row = self.core.one("SELECT * FROM api_keys WHERE id = ?", (key_id,))
        if row is None:
            return None
        try:
            return KeyCheck(row["secret_sha256"], self._grant_now(row), "")
        except Unauthorized as e:
            return KeyCheck(row["secret_sha256"], None, e.message)

    def record_signin(self, signin: str, key_id: str, expires_at: int) -> None:
        """Record a Console sign-in made with the stored key ``key_id`` (``signin``: the
        SHA-256 of its cookie's nonce) until ``expires_at`` (Unix seconds); sign-ins past
        their expiry are forgotten at the same time."""
        with self.core.write(f"signin:{signin}") as c:
            c.execute("DELETE FROM console_signins WHERE expires_at < ?",
                      (int(datetime.now(UTC).timestamp()),))
            c.execute("INSERT INTO console_signins (signin, key_id, expires_at) "
                      "VALUES (?, ?, ?)", (signin, key_id, expires_at))

    def signin_recorded(self, signin: str, key_id: str) -> bool:
        """Was the Console sign-in ``signin`` made with the stored key ``key_id``
        (:meth:`record_signin`)? A cookie whose sign-in is not recorded was not made here."""
        return self.core.one("SELECT 1 FROM console_signins WHERE signin = ? AND key_id = ?",
                         (signin, key_id)) is not None

    def ended_signins(self, signins: Collection[str], *,
                      recorded: Collection[str] = ()) -> set[str]:
        """Which of the Console sign-ins ``signins`` (digests of their cookies' nonces) have
        ended: signed out (:meth:`revoke_signin`) and, of those also in ``recorded`` (made
        with a stored key), no longer recorded (:meth:`record_signin`). What the Console's
        open live pages ask again and again (:class:`memfs.api.grants.GrantWatch`), in one query
        however many pages.

        :raises StorageError: the database could not tell.
        """
        asked = set(signins) | set(recorded)
        out: set[str] = set()
        seen: set[str] = set()
        for ids in id_chunks(asked):
            kept = [s for s in ids if s in recorded]
            sql = ("SELECT signin, 1 AS signed_out FROM console_signouts WHERE signin IN "
                   f"({','.join('?' * len(ids))})")
            if kept:
                sql += (" UNION ALL SELECT signin, 0 AS signed_out FROM console_signins "
                        f"WHERE signin IN ({','.join('?' * len(kept))})")
            for r in self.core.all(sql, [*ids, *kept]):
                (out if r["signed_out"] else seen).add(r["signin"])
        return out | {s for s in recorded if s not in seen}

    def _grant_now(self, row: Row) -> Grant:
        """What the key of ``row`` may do now (its use noted).

        :raises Unauthorized: revoked or expired.
        """
        now = utc_now()
        why = key_refusal(row["id"], row["revoked_at"], row["expires_at"], now)
        if why is not None:
            raise Unauthorized(why)
        if _use_unnoted(row, now):
            self._touch_keys([row["id"]], now)
        access = None
        if row["store_ids"] is not None:
            mode = "read_only" if row["role"] == "read_only" else "read_write"
            access = dict.fromkeys(json.loads(row["store_ids"]), mode)
        return Grant(row["id"], row["workspace_id"], row["role"], access, None, row["name"],
                     row["expires_at"])

    def _touch_keys(self, key_ids: Sequence[str], now: str) -> None:
        """Note the keys' use (best effort: a request neither waits long for the write lock
        nor is refused for it; the next request a minute on tries again)."""
        marks = ",".join("?" * len(key_ids))
        try:
            with self.core.patience(TOUCH_PATIENCE), \
                    self.core.write(*map(key_scope, key_ids)) as c:
                c.execute(f"UPDATE api_keys SET last_used_at = ? WHERE id IN ({marks})",
                          (now, *key_ids))
        except MemfsError as e:  # busy, or a read-only database: the use goes unnoted
            log.info("could not note the use of API key %s: %s", ", ".join(key_ids),
                     e.message)

    def refused(self, key_ids: Collection[str]) -> dict[str, str]:
        """Which of the stored keys ``key_ids`` are refused now, and why (revoked, expired,
        gone): what the live streams opened with them ask again and again
        (:class:`memfs.api.grants.GrantWatch`), in one query however many streams and keys (up
        to :data:`~memfs.store.common.IDS_PER_QUERY` keys). The use of the others is noted,
        as a request's is (at most every :data:`LAST_USED_EVERY` seconds each): a key that
        only holds a stream open is in use.

        :raises StorageError: the database could not tell.
        """
        refused: dict[str, str] = {}
        unnoted: builtins.list[str] = []
        now = utc_now()
        for ids in id_chunks(key_ids):
            found = {r["id"]: r for r in self.core.all(
                "SELECT id, revoked_at, expires_at, last_used_at FROM api_keys "
                f"WHERE id IN ({','.join('?' * len(ids))})", ids)}
            for key_id in ids:
                row = found.get(key_id)
                why = (f"API key {key_id} is gone" if row is None else
                       key_refusal(key_id, row["revoked_at"], row["expires_at"], now))
                if why is not None:
                    refused[key_id] = why
                elif row is not None and _use_unnoted(row, now):
                    unnoted.append(key_id)
        if unnoted:
            self._touch_keys(unnoted, now)
        return refused

    def names(self, key_ids: Sequence[str], *,
                  workspace: str | None = None) -> dict[str, str]:
        """The names of the keys ``key_ids`` (those that exist; of ``workspace`` only, if
        given: a version imported from elsewhere names no other workspace's key): what the
        Console shows for an ``api_actor``."""
        if not key_ids:
            return {}
        marks = ",".join("?" * len(key_ids))
        return {r["id"]: r["name"] for r in self.core.all(
            f"SELECT id, name, workspace_id FROM api_keys WHERE id IN ({marks})",
            list(key_ids)) if workspace is None or r["workspace_id"] == workspace}

    def check_visible(self, workspace: str, param: str, object_id: str, *,
                      c: Any = None, gone_ok: bool = False) -> None:
        """Is the object named by the path parameter ``param`` (``memory_store_id``,
        ``session_id``, ``dream_id``, ``agent_id``, ``environment_id``) one of
        ``workspace``'s? One look-up by primary key whether it exists or not, so that
        another workspace's object and an unknown id cost the same. ``gone_ok``: a store deleted
        from ``workspace`` passes too (its change feed still says it was deleted), in the same
        one look-up.

        :raises NotFound: unknown, or another workspace's: the same error.
        """
        table = _OWNERS[param]
        oid = object_id
        if param == "session_id" and oid.startswith("memrevert_"):
            # A revert stands for its session (undoing a revert): it is where it was made.
            look = "SELECT target_type, target_id, version_ids FROM reverts WHERE id = ?"
            row = self._look(c, look, oid)
            seen = 0
            while row is not None and str(row["target_id"]).startswith("memrevert_") \
                    and seen < 100:
                seen += 1
                row = self._look(c, look, row["target_id"])
            if row is not None and row["target_type"] not in ("session", "revert"):
                # Deletions of no session (a type cleared, an expiry sweep): where the
                # stores of their versions are.
                self._check_batch_visible(c, workspace, row["version_ids"], object_id)
                return
            oid = row["target_id"] if row is not None else oid
        sql = f"SELECT workspace_id FROM {table} WHERE id = ?"
        if gone_ok and table == "stores":
            sql = ("SELECT workspace_id FROM stores WHERE id = ? UNION ALL "
                   "SELECT workspace_id FROM deleted_stores WHERE id = ?")
            found = (c.execute(sql, (oid, oid)).fetchall() if c is not None
                     else self.core.all(sql, (oid, oid)))
            row = found[0] if found else None
        else:
            row = self._look(c, sql, oid)
        if row is None or row["workspace_id"] != workspace:
            raise _no_object(param, object_id)

    def _check_batch_visible(self, c: Any, workspace: str, version_ids: str,
                             object_id: str) -> None:
        """:raises NotFound: a version of the batch (JSON ``version_ids``) is of a store of
        another workspace (an expiry sweep of a whole server may span them), or of none."""
        ids = [str(v) for v in json.loads(version_ids)][:10_000]
        found: list[Row] = []
        if ids:
            marks = ",".join("?" * len(ids))
            sql = (f"SELECT DISTINCT s.workspace_id FROM versions v JOIN stores s "
                   f"ON s.id = v.store_id WHERE v.id IN ({marks})")
            found = c.execute(sql, ids).fetchall() if c is not None else self.core.all(sql, ids)
        if {r["workspace_id"] for r in found} != {workspace}:
            raise _no_object("session_id", object_id)

    def _look(self, c: Any, sql: str, arg: str) -> Row | None:
        if c is not None:
            found: Row | None = c.execute(sql, (arg,)).fetchone()
            return found
        return self.core.one(sql, (arg,))

    def revoke_signin(self, signin: str, expires_at: int) -> None:
        """Record that the Console sign-in ``signin`` (a digest of its cookie's nonce) was
        signed out, until ``expires_at`` (Unix seconds, its cookie's expiry); sign-outs past
        their expiry are forgotten at the same time."""
        with self.core.write(f"signin:{signin}") as c:
            c.execute("DELETE FROM console_signouts WHERE expires_at < ?",
                      (int(datetime.now(UTC).timestamp()),))
            c.execute("INSERT INTO console_signouts (signin, expires_at) VALUES (?, ?) "
                      "ON CONFLICT (signin) DO NOTHING", (signin, expires_at))

    def signin_revoked(self, signin: str) -> bool:
        """Whether the Console sign-in ``signin`` was signed out (:meth:`revoke_signin`)."""
        return self.core.one("SELECT 1 FROM console_signouts WHERE signin = ?",
                         (signin,)) is not None

