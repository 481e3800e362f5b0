#!/usr/bin/env bash
# Where the worker's CPU goes: a backlog of distinct signed, encrypted
# im.message.receive_v1 events (examples/loadgen.rs, each routed "observed") is stored
# through the webhook with the worker off, then drained by a release bridge with the
# worker on — under `perf record` when perf is at hand. Prints the drain's time, the
# bridge's CPU per event (user and system, from /proc), its peak memory (anonymous and
# file-backed, sampled when neither perf nor strace runs), its threads' context switches
# per event, and perf's summary by shared object and by symbol.
#
#   bash bench/profile.sh              # 20,000 events, SQLite
#   N=50000 PERF=0 bash bench/profile.sh
#   PG=postgres://postgres@127.0.0.1:5432 PERF=0 bash bench/profile.sh   # on Postgres
#   MENTION=1 N=5000 PERF=0 bash bench/profile.sh    # @-requests, each a turn
#
# Tunables: N (20000), PERF (1 when perf is installed), STRACE (1: count system calls
# with strace instead of perf), FREQ (perf's sampling rate, 997),
# TOP (symbols listed, 25), BRIDGE (a bridge binary to profile instead of this tree's
# release build: an earlier revision's, for a comparison in one sitting), PG (a Postgres
# server's URL without a database: the run creates a database of its own there, drops it
# at the end, and also prints the server's CPU per event, read from /proc when the server
# runs on this machine), MENTION (1: every event is a new topic that @-mentions the bot,
# so each becomes a turn of the echo agent whose answer is recorded, not sent (dry run);
# the drain then lasts until every turn has finished, and the CPU per event is a
# request's: routing, the turn, the agent call and the answer), BRIDGE_LOG (the draining
# bridge's RUST_LOG, warn: "warn,sqlx::query=debug" logs every statement), KEEP (1: keep
# the temporary directory, with the logs, and print where it is). Needs wrk (Debian package wrk) and curl, and psql with PG. Runs in a temporary
# directory, on 127.0.0.1 only; the bridge's Open API base is a closed port.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
N=${N:-20000}
FREQ=${FREQ:-997}
TOP=${TOP:-25}
if [[ -z ${PERF:-} ]]; then
    PERF=0
    command -v perf >/dev/null && PERF=1
fi
command -v wrk >/dev/null || { echo "profile.sh: needs wrk (apt-get install wrk)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/feishu-bridge-profile.XXXXXX")
PID=""
DBNAME=feishu_bridge_profile_$$
cleanup() {
    [[ -n $PID ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    [[ -n ${PG:-} ]] && psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DBNAME" >/dev/null 2>&1
    if [[ -n ${KEEP:-} ]]; then
        echo "profile.sh: kept $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

if [[ -n ${BRIDGE:-} ]]; then
    (cd "$ROOT" && cargo build --release --quiet --example loadgen)
else
    (cd "$ROOT" && cargo build --release --quiet --bin feishu-bridge --example loadgen)
    BRIDGE=$TARGET/release/feishu-bridge
fi
KEY=profile-encrypt-key
TOKEN=profile-verification-token
BOT=ou_bench_bot
MENTION_ARGS=()
[[ ${MENTION:-0} == 1 ]] && MENTION_ARGS=(--mention-bot "$BOT")
"$TARGET/release/examples/loadgen" --encrypt-key "$KEY" --token "$TOKEN" --app-id cli_bench \
    --count "$N" --out "$WORK/backlog.tsv" "${MENTION_ARGS[@]}" >&2

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# config NAME PORT WORKER
config() {
    cat >"$WORK/$1.toml" <<EOF
[server]
listen = "127.0.0.1:$2"
timestamp_tolerance_secs = 0
[database]
url = "$DB_URL"
[worker]
enabled = $3
[[profiles]]
name = "bench"
app_id = "cli_bench"
verification_token = "$TOKEN"
encrypt_key = "$KEY"
bot_open_id = "$BOT"
dry_run = true
api_base = "http://127.0.0.1:9"
[profiles.agent]
kind = "echo"
EOF
}

# status PORT: GET /status, one line without spaces.
status() {
    curl -fsS --max-time 5 "http://127.0.0.1:$1/status" | tr -d ' \n'
}

# inbox PORT: "pending processing" from GET /status.
inbox() {
    status "$1" | sed -n 's/.*"inbox":{"pending":\([0-9]*\),"processing":\([0-9]*\).*/\1 \2/p'
}

# drained PORT: the inbox is empty and, with MENTION=1, no turn is queued or running
# (one read of GET /status).
drained() {
    local body
    body=$(status "$1") || return 1
    [[ $body == *'"inbox":{"pending":0,"processing":0'* ]] || return 1
    [[ ${MENTION:-0} == 1 ]] || return 0
    [[ $body == *'"turns":{"queued":0,"running":0'* ]]
}

wait_healthy() {
    for _ in $(seq 1 150); do
        curl -fs -o /dev/null "http://127.0.0.1:$1/healthz" && return 0
        sleep 0.1
    done
    echo "profile.sh: the bridge did not start" >&2
    exit 1
}

DB_URL="sqlite://$WORK/bench.db"
if [[ -n ${PG:-} ]]; then
    psql -q "$PG/postgres" -c "CREATE DATABASE $DBNAME" >/dev/null
    DB_URL="$PG/$DBNAME"
fi

# The CPU ticks (user + system) of every process of the local Postgres server, or 0.
postgres_ticks() {
    local total=0 pid
    for pid in $(pgrep -x postgres 2>/dev/null); do
        total=$((total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    echo "$total"
}

port=$(free_port)
config fill "$port" false
RUST_LOG=warn "$BRIDGE" --config "$WORK/fill.toml" serve >"$WORK/fill.log" 2>&1 &
PID=$!
wait_healthy "$port"
echo "storing $N events (worker off)" >&2
timeout 300 wrk -t2 -c64 -d300s --timeout 5s -s "$ROOT/bench/wrk-events.lua" \
    "http://127.0.0.1:$port/webhook/bench/event" -- file="$WORK/backlog.tsv" threads=2 \
    >"$WORK/fill.wrk" 2>&1 &
WRK=$!
until counts=$(inbox "$port") && [[ ${counts%% *} -ge $N ]]; do sleep 0.2; done
kill -INT "$WRK" 2>/dev/null || true
wait "$WRK" 2>/dev/null || true
kill "$PID"
wait "$PID" 2>/dev/null || true

port=$(free_port)
config drain "$port" true
if [[ ${STRACE:-0} == 1 ]]; then
    PERF=0
    RUST_LOG=${BRIDGE_LOG:-warn} strace -f -c -o "$WORK/strace.txt" \
        "$BRIDGE" --config "$WORK/drain.toml" serve >"$WORK/drain.log" 2>&1 &
elif [[ $PERF == 1 ]]; then
    RUST_LOG=${BRIDGE_LOG:-warn} perf record -q -F "$FREQ" -g --call-graph dwarf,16384 -o "$WORK/perf.data" -- \
        "$BRIDGE" --config "$WORK/drain.toml" serve >"$WORK/drain.log" 2>&1 &
else
    RUST_LOG=${BRIDGE_LOG:-warn} "$BRIDGE" --config "$WORK/drain.toml" serve >"$WORK/drain.log" 2>&1 &
fi
PID=$!
wait_healthy "$port"
pg_start=$(postgres_ticks)
start=$(date +%s%N)
# The anonymous and file-backed shares of the bridge's memory, sampled through the drain.
anon_peak=0
file_peak=0
sample_memory() {
    local anon file
    read -r anon file < <(awk '$1 == "RssAnon:" { a = $2 } $1 == "RssFile:" { f = $2 }
        END { print a + 0, f + 0 }' "/proc/$1/status" 2>/dev/null || echo "0 0")
    ((anon > anon_peak)) && anon_peak=$anon
    ((file > file_peak)) && file_peak=$file
    return 0
}
until drained "$port"; do
    [[ $PERF == 1 || ${STRACE:-0} == 1 ]] || sample_memory "$PID"
    sleep 0.1
done
end=$(date +%s%N)
pg_end=$(postgres_ticks)
bridge=$PID
[[ $PERF == 1 || ${STRACE:-0} == 1 ]] && bridge=$(pgrep -P "$PID" | head -n1)
read -r utime stime < <(awk '{ print $14, $15 }' "/proc/$bridge/stat")
peak=$(awk '$1 == "VmHWM:" { printf "%.1f", $2 / 1024 }' "/proc/$bridge/status")
# Context switches of the bridge's threads alive at the end (its runtime's workers and
# each database connection's thread; short-lived blocking threads are not counted).
read -r vol invol threads < <(cat /proc/"$bridge"/task/*/status 2>/dev/null | awk '
    $1 == "voluntary_ctxt_switches:" { v += $2; n++ }
    $1 == "nonvoluntary_ctxt_switches:" { i += $2 }
    END { print v + 0, i + 0, n + 0 }')
tick=$(getconf CLK_TCK)
kill -TERM "$bridge"
wait "$PID" 2>/dev/null || true
PID=""

ms=$(((end - start) / 1000000))
echo "drained $N events in $ms ms ($((N * 1000 / (ms > 0 ? ms : 1))) events/s)"
awk -v u="$utime" -v s="$stime" -v t="$tick" -v n="$N" 'BEGIN {
    printf "bridge CPU per event (its whole life, start-up included): %.0f µs (user %.0f, system %.0f)\n",
        (u + s) * 1e6 / t / n, u * 1e6 / t / n, s * 1e6 / t / n
}'
echo "bridge peak RSS (VmHWM): $peak MiB"
awk -v v="$vol" -v i="$invol" -v t="$threads" -v n="$N" 'BEGIN {
    printf "context switches per event (%d threads alive at the end): %.1f voluntary, %.1f involuntary\n",
        t, v / n, i / n
}'
if [[ -n ${PG:-} ]] && ((pg_end > pg_start)); then
    awk -v d="$((pg_end - pg_start))" -v t="$tick" -v n="$N" 'BEGIN {
        printf "Postgres server CPU per event (its processes on this machine, during the drain): %.0f µs\n", d * 1e6 / t / n
    }'
fi
if ((anon_peak > 0)); then
    awk -v a="$anon_peak" -v f="$file_peak" 'BEGIN {
        printf "of which, sampled every 100 ms: anonymous %.1f MiB, file-backed (code, libraries) %.1f MiB (peaks)\n", a / 1024, f / 1024
    }'
fi
if [[ ${STRACE:-0} == 1 ]]; then
    echo "== system calls during the drain (strace -c; per event: calls / $N)"
    head -n 20 "$WORK/strace.txt"
fi
if [[ $PERF == 1 ]]; then
    echo "== by shared object (perf, samples of the bridge)"
    perf report -i "$WORK/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -n 5
    echo "== top $TOP symbols"
    perf report -i "$WORK/perf.data" --no-children --sort sym --stdio -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -n "$TOP"
fi
