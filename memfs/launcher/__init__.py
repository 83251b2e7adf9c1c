"""The session launcher (``memfs run``): attach stores to a session, mount them, run the agent's
command in them as its own user with its own credential, and always clean up.

The package owns a session's life on this host: the plan it is given, the agent's user,
environment and credential, the scratch root and the private mount namespace, the mount daemons
it starts (:mod:`memfs.daemons.mount`, :mod:`memfs.daemons.sessionfs`, run as ``python -m``),
the session API of a local database, the agent's memory prompt, and the end of sessions whose
launcher died. It is a composition root: it may import the layers it composes
(:mod:`memfs.store`, :mod:`memfs.client`, and for the session API :mod:`memfs.api` and
:mod:`memfs.daemons.server`), :mod:`memfs.linux`, :mod:`memfs.backends` and what is below them;
nothing imports it but :mod:`memfs.spec`, :mod:`memfs.dreams` and the CLI.

The modules, each building only on those before it:

- :mod:`~memfs.launcher.pidinit` (the init of the agent's PID namespace: a script of the
  standard library, run by ``python -I -S``), :mod:`~memfs.launcher.prompt` (the memory section
  of the agent's system prompt, over :mod:`memfs.models` only), :mod:`~.plan`
  (:class:`~.plan.Launch`, the stores to attach, :class:`~.plan.LaunchError`), :mod:`~.agent`
  (the user CMD runs as, its environment, what it must not get), :mod:`~.procs` (preexec
  functions, children, a process's identity), :mod:`~.sandbox` (the scratch root, the namespace,
  unmounts), :mod:`~.reap` (sessions whose launcher died), :mod:`~.sessionapi` (the API of a
  local session, on a unix socket);
- the parts of :class:`~memfs.launcher.runner.Launcher`, one class each, each a subclass of
  the one before: :mod:`~.base` (its state), :mod:`~.setup` (root, session, scratch),
  :mod:`~.credential` (the agent's token and the session API), :mod:`~.mounts` (the mount
  daemons), :mod:`~.command` (CMD, its signals and leftovers) and :mod:`~.runner`
  (:class:`~.runner.Launcher`, the clean-up, :func:`~.runner.run`).

Nothing is imported here: the CLI reads the prompt (``memfs session prompt``) without loading
the launcher.
"""
