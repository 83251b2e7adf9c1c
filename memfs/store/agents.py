"""The API's agents and environments (API.md §4): named configurations that sessions snapshot."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..errors import InvalidRequest, NotFound
from ..models import DEFAULT_WORKSPACE
from ..rules import (
    dict_list,
    new_id,
    validate_metadata,
    validate_name,
    validate_text,
)
from .base import Core, Part
from .common import utc_now

if TYPE_CHECKING:
    from .sessions import Sessions

class Agents(Part):
    """The store's agents and environments (a part of :class:`memfs.store.Store`)."""

    def __init__(self, core: Core, sessions: Sessions) -> None:
        super().__init__(core)
        self.sessions = sessions

    def create(
        self,
        *,
        name: Any,
        model: Any,
        description: Any = None,
        system: Any = None,
        tools: Any = None,
        skills: Any = None,
        mcp_servers: Any = None,
        metadata: Any = None,
        execution_identity: Any = None,
        multiagent: Any = None,
        workspace: str = DEFAULT_WORKSPACE,
    ) -> dict[str, Any]:
        """Create an agent (version 1) and return its wire object (``BetaManagedAgentsAgent``).

        memfs runs no model: an agent is a named configuration that sessions snapshot.
        ``model`` is a model id or ``{"id", ...}``; ``tools`` entries are dicts with a ``type``
        (the agent toolset gets its default config filled in).

        :raises InvalidRequest: a missing or ill-typed field.
        """
        lim = self.limits
        name = validate_name(name, lim)
        if isinstance(model, str) and model:
            model_cfg: dict[str, Any] = {"id": model, "speed": "standard"}
        elif isinstance(model, dict) and isinstance(model.get("id"), str) and model["id"]:
            model_cfg = {"speed": "standard", **model}
        else:
            raise InvalidRequest("model must be a model id or an object with an 'id'")
        for what, value in (("description", description), ("system", system)):
            if value is not None and not isinstance(value, str):
                raise InvalidRequest(f"{what} must be a string")
        resolved_tools = []
        for tool in dict_list(tools, "tools"):
            if not isinstance(tool.get("type"), str):
                raise InvalidRequest("every tool needs a string 'type'")
            if tool["type"] == "agent_toolset_20260401":
                tool = {
                    "configs": [],
                    "default_config": {
                        "enabled": True,
                        "permission_policy": {"type": "always_allow"},
                    },
                    **tool,
                }
            resolved_tools.append(tool)
        if execution_identity is None:
            execution_identity = {"type": "service_account"}
        elif not isinstance(execution_identity, dict) or not isinstance(
            execution_identity.get("type"), str
        ):
            raise InvalidRequest("execution_identity must be an object with a 'type'")
        if multiagent is not None and not isinstance(multiagent, dict):
            raise InvalidRequest("multiagent must be an object")
        now = utc_now()
        body = {
            "type": "agent",
            "id": new_id("agent"),
            "version": 1,
            "name": name,
            "description": description,
            "model": model_cfg,
            "system": system,
            "tools": resolved_tools,
            "skills": dict_list(skills, "skills"),
            "mcp_servers": dict_list(mcp_servers, "mcp_servers"),
            "metadata": validate_metadata({} if metadata is None else metadata, lim),
            "execution_identity": execution_identity,
            "multiagent": multiagent,
            "created_at": now,
            "updated_at": now,
            "archived_at": None,
        }
        validate_text(body, "agent")
        with self.core.write(f"agent:{body['id']}") as c:  # a new row: no rule spans agents
            c.execute(
                "INSERT INTO agents (id, body, created_at, workspace_id) VALUES (?, ?, ?, ?)",
                (body["id"], json.dumps(body), now, workspace),
            )
        return body

    def get(self, agent_id: str, *, version: int | None = None) -> dict[str, Any]:
        """The agent's wire object. :raises NotFound: unknown id, or a version it lacks."""
        row = self.core.one("SELECT body FROM agents WHERE id = ?", (agent_id,))
        if row is None:
            raise NotFound(f"agent {agent_id!r} not found")
        body: dict[str, Any] = json.loads(row["body"])
        if version is not None and version != body["version"]:
            raise NotFound(f"agent {agent_id} has no version {version}")
        return body

    def snapshot(self, agent: Any, *, workspace: str | None = None) -> dict[str, Any]:
        """The session's copy of an agent (``BetaManagedAgentsSessionAgent``) from what
        ``sessions.create`` received: an id, or ``{"type": "agent", "id", "version"?}``.

        An id this database does not know is kept as an opaque reference ``{type, id,
        version}``: API.md accepts agent ids as opaque strings (agents may live elsewhere);
        so is another ``workspace``'s agent (its existence does not leak).

        :raises InvalidRequest: any other shape. :raises NotFound: a known agent's missing
            version.
        """
        version = None
        if isinstance(agent, dict):
            if agent.get("type") != "agent":
                raise InvalidRequest("agent must be an id or {'type': 'agent', 'id': ...}")
            version = agent.get("version")
            if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
                raise InvalidRequest("agent version must be an integer")
            agent = agent.get("id")
        if not isinstance(agent, str) or not agent:
            raise InvalidRequest("agent must be an agent id")
        validate_text(agent, "agent")
        opaque = {"type": "agent", "id": agent, "version": version}
        owner = self.core.one("SELECT workspace_id FROM agents WHERE id = ?", (agent,))
        if owner is None or (workspace is not None and owner["workspace_id"] != workspace):
            return opaque
        body = self.get(agent, version=version)
        keys = ("type", "id", "version", "name", "description", "model", "system", "tools",
                "skills", "mcp_servers", "execution_identity", "multiagent")
        return {k: body[k] for k in keys}

    def create_environment(
        self,
        *,
        name: Any,
        config: Any = None,
        description: Any = None,
        metadata: Any = None,
        scope: Any = None,
        workspace: str = DEFAULT_WORKSPACE,
    ) -> dict[str, Any]:
        """Create an environment and return its wire object (``BetaEnvironment``). ``config``
        defaults to ``{"type": "self_hosted"}``: memfs runs the agent's tools itself.

        :raises InvalidRequest:
        """
        lim = self.limits
        name = validate_name(name, lim)
        if config is None:
            config = {"type": "self_hosted"}
        if not isinstance(config, dict) or config.get("type") not in ("cloud", "self_hosted"):
            raise InvalidRequest("config must be {'type': 'cloud' | 'self_hosted', ...}")
        if config["type"] == "cloud":
            packages: dict[str, list[str]] = {
                k: [] for k in ("apt", "cargo", "gem", "go", "npm", "pip")}
            config = {"networking": {"type": "unrestricted"}, "packages": packages, **config}
        if description is not None and not isinstance(description, str):
            raise InvalidRequest("description must be a string")
        if scope not in (None, "organization", "account"):
            raise InvalidRequest("scope must be 'organization' or 'account'")
        now = utc_now()
        body = {
            "type": "environment",
            "id": new_id("env"),
            "name": name,
            "description": description,
            "config": config,
            "metadata": validate_metadata({} if metadata is None else metadata, lim),
            "scope": scope or "organization",
            "created_at": now,
            "updated_at": now,
            "archived_at": None,
        }
        validate_text(body, "environment")
        with self.core.write(f"environment:{body['id']}") as c:  # a new row, as an agent
            c.execute(
                "INSERT INTO environments (id, body, created_at, workspace_id) "
                "VALUES (?, ?, ?, ?)", (body["id"], json.dumps(body), now, workspace),
            )
        return body

    def get_environment(self, environment_id: str) -> dict[str, Any]:
        """:raises NotFound:"""
        row = self.core.one("SELECT body FROM environments WHERE id = ?", (environment_id,))
        if row is None:
            raise NotFound(f"environment {environment_id!r} not found")
        body: dict[str, Any] = json.loads(row["body"])
        return body

