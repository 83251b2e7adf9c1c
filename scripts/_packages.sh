# Sourced by scripts/_setup.sh: install the Debian packages that are missing.
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
