# Sourced by scripts/*: make sure FUSE and the venv with memfs are installed.
. scripts/_packages.sh
# A .venv without a working python and pip is what an interrupted or failed `python3 -m venv`
# leaves (no ensurepip): made again from scratch rather than trusted.
if ! .venv/bin/python -I -c 'import pip' >/dev/null 2>&1; then
    if [ -e .venv ]; then
        echo "removing the incomplete .venv..." >&2
        rm -rf .venv
    fi
    echo "creating .venv..." >&2
    python3 -m venv .venv >&2 || { rm -rf .venv; echo "could not create .venv" >&2; exit 1; }
fi
# The stamp is written only after a complete install; memfs must also import from this clone
# (-I: not from the current directory).
stamp=.venv/.memfs-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] \
        || [ "$(.venv/bin/python -I -c 'import memfs, os; print(os.path.realpath(memfs.__path__[0]))' \
                2>/dev/null)" != "$(pwd -P)/memfs" ]; then
    echo "installing memfs and its test dependencies into .venv..." >&2
    rm -f "$stamp"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,mcp]' >&2
    touch "$stamp"
fi
