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
# The Console's browser tests (tests/browser, Playwright drives Debian's chromium).
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "installing ${need_apt[*]} (Debian packages)..." >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >&2
fi
if [ ! -x .venv/bin/python ]; then
    echo "creating .venv..." >&2
    python3 -m venv .venv >&2
fi
stamp=.venv/.memfs-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "installing memfs and its test dependencies into .venv..." >&2
    .venv/bin/pip install -q --disable-pip-version-check -e '.[test]' >&2
    touch "$stamp"
fi
