"""Agents and environments: just enough for ``sessions.create``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec import array, either, obj, string

if TYPE_CHECKING:
    from .call import Call


AGENT_FIELDS = (either("model!", "string", "object"), string("name!"), string("description"),
                 obj("execution_identity"), array("mcp_servers"), obj("metadata"),
                 obj("multiagent"), array("skills"), string("system"), array("tools"))
ENVIRONMENT_FIELDS = (string("name!"), obj("config"), string("description"), obj("metadata"),
                       string("scope", enum=("organization", "account")))


async def create_agent(c: Call) -> Any:
    return await c.run(c.store.agents.create, **{f.name: c.body.get(f.name)
                                                 for f in AGENT_FIELDS}, workspace=c.workspace)


async def retrieve_agent(c: Call) -> Any:
    return await c.run(c.store.agents.get, c.p["agent_id"], version=c.q.integer("version", None))


async def create_environment(c: Call) -> Any:
    return await c.run(c.store.agents.create_environment, **{f.name: c.body.get(f.name)
                                                       for f in ENVIRONMENT_FIELDS},
                       workspace=c.workspace)


async def retrieve_environment(c: Call) -> Any:
    return await c.run(c.store.agents.get_environment, c.p["environment_id"])
