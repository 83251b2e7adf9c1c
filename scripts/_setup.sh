# Sourced by scripts/*: make sure FUSE and the venv with memfs are installed.
need_apt=()
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
pkg-config --exists fuse3 2>/dev/null || need_apt+=(libfuse3-dev pkg-config)
# To build pjdfstest (tests/integration/test_pjdfstest.py, scripts/pjdfstest).
command -v autoreconf >/dev/null 2>&1 || need_apt+=(autoconf automake)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)
command -v make >/dev/null 2>&1 || need_apt+=(make)
# The container recipe's test (tests/integration/test_sandbox.py).
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
# PostgreSQL's server, for the tests that run every store rule on PostgreSQL too (the
# fixtures start a throwaway cluster with its initdb and pg_ctl: tests/pgcluster.py).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
# Python's headers (pyfuse3 is compiled against them) and venv's ensurepip, which Debian
# packages apart from python3 itself.
python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    >/dev/null 2>&1 || need_apt+=(python3-dev)
python3 -c 'import ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
# The Console's browser tests (tests/browser: Playwright drives Debian's chromium); only
# scripts/test asks for it (setup_for_tests=1).
if [ -n "${setup_for_tests:-}" ]; then
    command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "installing ${need_apt[*]} (Debian packages)..." >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >&2
fi
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
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' >&2
    touch "$stamp"
fi
