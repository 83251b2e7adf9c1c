"""The session launcher (``memfs run``): attach stores to a session, mount them, run the agent's
command in them as its own user with its own credential, and always clean up.

The package owns a session's life on this host: the plan it is given, the agent's user,
environment and credential, the scratch root and the private mount namespace, the mount daemons
it starts (:mod:`memfs.daemons.mount`, :mod:`memfs.daemons.sessionfs`, run as ``python -m``),
the session API of a local database, the agent's memory prompt, and the end of sessions whose
launcher died. It is a composition root: it may import the layers it composes
(:mod:`memfs.store`, :mod:`memfs.client`, and for the session API :mod:`memfs.api` and
:mod:`memfs.daemons.server`), :mod:`memfs.linux`, :mod:`memfs.backends` and what is below them;
nothing imports it but :mod:`memfs.dreams` and the CLI.

The modules, each building only on those before it:

- :mod:`~memfs.launcher.pidinit` (the init of the agent's PID namespace: a script of the
  standard library, run by ``python -I -S``), :mod:`~memfs.launcher.prompt` (the memory section
  of the agent's system prompt, over :mod:`memfs.models` only), :mod:`~.plan`
  (:class:`~.plan.Launch`, the stores to attach, :class:`~.plan.LaunchError`), :mod:`~.spec`
  (session spec files, ``--spec``: their stores as the plan's attachments), :mod:`~.agent`
  (the user CMD runs as, its environment, what it must not get), :mod:`~.procs` (preexec
  functions, children, a process's identity), :mod:`~.sandbox` (the scratch root, the namespace,
  unmounts), :mod:`~.reap` (sessions whose launcher died), :mod:`~.sessionapi` (the API of a
  local session, on a unix socket);
- a launch: :mod:`~.state` (:class:`~.state.LaunchState`, what one launch holds, from its
  start to its clean-up), then the functions over it, one module per concern, each taking
  the state: :mod:`~.setup` (root, session, scratch), :mod:`~.credential` (the agent's
  token and the session API), :mod:`~.mounts` (the mount daemons), :mod:`~.command` (CMD,
  its signals and leftovers), and :mod:`~.runner` (:class:`~.runner.Launcher`, which calls
  them in order and always cleans up, the :class:`~.runner.Hooks` a caller adds, and
  :func:`~.runner.run`). No class inherits from another: a launch is followed through named
  functions.

A leading ``_`` marks what one module uses alone; what the modules share is public.

Nothing is imported here: the CLI reads the prompt (``memfs session prompt``) without loading
the launcher.
"""
