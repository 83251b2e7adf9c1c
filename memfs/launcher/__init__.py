"""The session launcher (``memfs run``): attach stores to a session, mount them, run the agent's
command in them, and always clean up.

- :mod:`~memfs.launcher.prompt`: the memory section of the agent's system prompt (over
  :mod:`memfs.models` only);
- :mod:`~memfs.launcher.sessionapi`: the API of a local session, on a unix socket;
- :mod:`~memfs.launcher.runner`: the launcher.

Nothing is imported here: the CLI reads the prompt (``memfs session prompt``) without loading
the launcher.
"""
