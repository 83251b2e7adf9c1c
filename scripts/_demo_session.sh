# Runs inside the demo session (see scripts/demo): MEMFS_SESSION_ID, MEMFS_SYSTEM_PROMPT_FILE,
# MEMFS_URL and MEMFS_API_KEY (the session API and its token: `memfs` here sees the session's
# store only) come from `memfs run`, MEMFS_DEMO_STORE from scripts/demo.
set -euo pipefail
sid=$MEMFS_SESSION_ID
store=$MEMFS_DEMO_STORE
json() { python3 -c "import json, sys; d = json.load(sys.stdin); print($1)"; }
# The mount path is the session's to decide (slug of the store name under the root).
mnt=$(memfs --json session show "$sid" | json 'd["resources"][0]["mount_path"]')
file=$mnt/preferences/formatting.md
# Each command shown before it runs: in bold on a terminal, plain in a file or a pipe.
bold=""; plain=""
if [ -t 1 ]; then bold=$'\033[1m'; plain=$'\033[0m'; fi
show() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; eval "$@"; }

echo "session $sid: the store '$store' is mounted at $mnt"
show 'cat "$MEMFS_SYSTEM_PROMPT_FILE"'
show "ls -la $mnt $mnt/preferences"
show "cat $file"
show "echo '- Demo run on $(date -u +%Y-%m-%dT%H:%M:%SZ).' >> $file"
show "echo 'scratch: not kept' > $(dirname "$mnt")/scratch.txt"

# The version that write made, attributed to this session.
show "memfs versions list '$store' --session $sid"
version=$(memfs --json versions list "$store" --session "$sid" --limit 1 | json 'd[0]["id"]')
show "memfs versions diff '$store' $version"

# Tool events reach the database in batches (~0.25 s after the file is closed): wait for the
# result of the write, which names the version, before printing the timeline.
for _ in $(seq 100); do
    memfs --json session events "$sid" --type agent.tool_result | grep -q "$version" && break
    sleep 0.1
done
show "memfs session events $sid"

if [ -t 0 ] && [ -t 1 ]; then
    echo
    echo "You are in a shell inside session $sid: the store is at $mnt."
    echo "Files you write under $(dirname "$mnt")/ outside it are scratch. Exit to end the session."
    cd "$mnt"
    exec bash -i
fi
