# Sourced by scripts/*: make sure FUSE and the venv with memfs are installed.
need_apt=()
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
pkg-config --exists fuse3 2>/dev/null || need_apt+=(libfuse3-dev pkg-config)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "installing ${need_apt[*]} (Debian packages)..." >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq fuse3 libfuse3-dev pkg-config >&2
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
