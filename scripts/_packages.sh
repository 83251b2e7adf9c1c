# Sourced by scripts/_setup.sh: install the Debian packages that are missing. Every script
# needs FUSE and what pip needs to build pyfuse3; what only the tests need is installed when
# setup_for_tests is set (scripts/test, scripts/pjdfstest).
need_apt=()
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
pkg-config --exists fuse3 2>/dev/null || need_apt+=(libfuse3-dev pkg-config)
# pyfuse3 is compiled against Python's headers; venv's ensurepip is packaged apart from
# python3 itself.
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)
python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    >/dev/null 2>&1 || need_apt+=(python3-dev)
python3 -c 'import ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ -n "${setup_for_tests:-}" ]; then
    # To build pjdfstest (tests/integration/test_pjdfstest.py, scripts/pjdfstest).
    command -v autoreconf >/dev/null 2>&1 || need_apt+=(autoconf automake)
    command -v make >/dev/null 2>&1 || need_apt+=(make)
    # The container recipe's test (tests/integration/test_sandbox.py).
    command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
    # PostgreSQL's server, for the tests that run every store rule on PostgreSQL too (the
    # fixtures start a throwaway cluster with its initdb and pg_ctl: tests/support/pgcluster.py).
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
    # The Console's browser tests (tests/browser: Playwright drives Debian's chromium).
    command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
    # Editors on a mount (tests/integration/test_editors.py): vim (or Debian's vim.tiny), and
    # nano, which the test drives in a terminal of tmux's.
    command -v vim >/dev/null 2>&1 || command -v vim.tiny >/dev/null 2>&1 || need_apt+=(vim-tiny)
    command -v nano >/dev/null 2>&1 || need_apt+=(nano)
    command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
fi

# apt-get, waiting for another apt that holds its locks (a fresh Ubuntu runs
# unattended-upgrades at boot) up to $MEMFS_APT_WAIT seconds (default 600). apt-get waits for
# dpkg's lock itself (DPkg::Lock::Timeout); for the package lists' lock (apt-get update) it
# does not, so a call that fails on a lock is made again.
memfs_apt_get() {
    local wait=${MEMFS_APT_WAIT:-600} start=$SECONDS said="" status out
    out=$(mktemp)
    while :; do
        # Shown as it goes, and kept to look for a lock error; the status is apt-get's.
        { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$wait" \
              "$@" 2>&1 && echo 0 > "$out.status" || echo $? > "$out.status"; } | tee "$out" >&2
        status=$(cat "$out.status")
        if [ "$status" -eq 0 ] || [ $((SECONDS - start)) -ge "$wait" ] \
                || ! grep -qE 'Could not get lock|Unable to lock|Unable to acquire' "$out"; then
            rm -f "$out" "$out.status"
            return "$status"
        fi
        if [ -z "$said" ]; then
            echo "waiting for another apt-get or dpkg to finish (up to $wait s)..." >&2
            said=1
        fi
        sleep 1
    done
}

if [ ${#need_apt[@]} -gt 0 ]; then
    echo "installing ${need_apt[*]} (Debian packages)..." >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    memfs_apt_get update -qq
    memfs_apt_get install -y -qq "${need_apt[@]}"
fi
