#!/usr/bin/env bash
# Load test of feishu-bridge as production runs it (the inbox worker on), on SQLite and on
# Postgres, beside three references measured by the same wrk commands in the same run:
#
#   * bare axum (examples/bare_axum.rs): reads the body and answers 200, the ceiling;
#   * the durable floor (examples/durable_floor.rs): signature check + AES decrypt + a
#     group-committed insert into a one-table SQLite database (WAL, synchronous = FULL),
#     then 200: the least an acknowledged event needs;
#   * the official Node SDK (@larksuiteoapi/node-sdk, version NODE_SDK_VERSION below) as
#     its README shows it, in bench/node_sdk_handler.js: one Node process, a plain http
#     server handing each request to the SDK's EventDispatcher (signature check, decrypt,
#     dispatch) with an im.message.receive_v1 handler that stores nothing, then 200. The
#     script installs it with npm into $FEISHU_BRIDGE_BENCH_CACHE/node (default
#     ~/.cache/feishu-bridge-bench/node, outside the repository), reused when it holds the
#     pinned version. The handler counts the events it was really handed (decrypted, with
#     the profile's token), and the script matches that count against the 200s, since the
#     SDK answers 200 even to a request it rejects.
#
# For every system the server process's CPU time (utime + stime from /proc/PID/stat) is
# taken before and after each saturation run and divided by the 200s: CPU per event. For
# the bridge with the worker on, the drain run's CPU (the whole process, from its spawn
# until the inbox is empty) divided by the events drained is the worker's CPU per event.
# The table gives each system's events/s relative to the Node SDK and to the floor.
#
#   bash bench/load.sh            # from anywhere; results in bench/out/results.md
#   QUICK=1 bash bench/load.sh    # smoke run: 3 s runs, 5,000-event backlog
#
# First the two references, then per backend, each run on a fresh database:
#   1. saturation with the worker on, at each concurrency (CONCURRENCIES, "16 64"):
#      events/s and p99 ack latency; every stored row is matched against the 200s;
#   2. drain rate: BACKLOG events stored with the worker off, the server restarted with
#      the worker on, and the time from its start until GET /status shows an empty inbox;
#      every event must have been routed "observed";
#   3. ack latency at a fixed RATE events/s for DURATION s, started as soon as a server
#      with the worker on answers, over a fresh BACKLOG-event backlog;
#   4. during that run, REQUESTS @-mentions of the bot in a quiet chat of their own, sent
#      with curl: the time from each one's acknowledgement to its queued turn
#      (turns.queued_at - inbox_events.received_at, both stamped by the bridge);
#   5. the saturation runs again with the worker off (ingress only; WORKER_OFF=0 skips
#      them);
#   6. idle RSS and peak RSS (VmHWM) of the bridge (the peak over its worker-on runs).
#
# Needs wrk, curl, awk, sed, sqlite3 or python3, psql for Postgres, and node with npm
# for the Node SDK baseline (NODE_SDK=0 leaves it out); npm reaches its registry only
# when the cache holds no copy of the pinned version.
#
# The script exits 1 when a run is not valid (an acknowledged event not stored, the
# event file too short, a backlog not drained or not routed as expected, an @-request
# without a turn). Errors the service answered under load are reported as findings.
#
# Saturation events are im.message.receive_v1 group replies that mention another bot and
# a person, never this bridge's bot (bot_open_id = ou_bench_bot), so each is routed
# "observed" and recorded. Every request carries a distinct event, generated beforehand
# by examples/loadgen.rs and replayed by bench/wrk-events.lua; a saturation run always
# starts on a fresh database, so one event file serves them all. The bridge runs with the
# echo agent and dry_run, its Open API base on a closed loopback port: nothing leaves
# 127.0.0.1.
#
# Tunables (environment): QUICK (0), WORKER_BATCH (worker.batch; the config's default),
# DURATION (s; 10, QUICK 3), CONCURRENCIES ("16 64"),
# THREADS (2), RATE (500), RATE_CONNECTIONS (16), BACKLOG (50000, QUICK 5000),
# REQUESTS (5), EVENTS (events per saturation run, 50000 x DURATION), BACKENDS
# ("sqlite postgres"), WORKER_OFF (1), FILL_CONNECTIONS (64), DRAIN_TIMEOUT (s, 900),
# PGHOST (127.0.0.1), PGPORT (5432), PGUSER (postgres), PG_ADMIN_DB (test; where
# CREATE/DROP DATABASE runs), NODE_SDK (1; 0 skips the Node SDK baseline),
# NODE_AUTO_CHALLENGE (1: the SDK adapter's autoChallenge on, as a deployment needs it
# to pass Feishu's request-URL check; it decrypts each event a second time),
# FEISHU_BRIDGE_BENCH_CACHE (~/.cache/feishu-bridge-bench; where npm installs the SDK),
# BRIDGE (a bridge binary to measure instead of this tree's release build: an earlier
# revision's, for a comparison in one sitting).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

TUNABLES="BRIDGE QUICK WORKER_BATCH DURATION CONCURRENCIES THREADS RATE RATE_CONNECTIONS BACKLOG REQUESTS EVENTS BACKENDS WORKER_OFF FILL_CONNECTIONS DRAIN_TIMEOUT PGHOST PGPORT PGUSER PG_ADMIN_DB NODE_SDK NODE_AUTO_CHALLENGE"
# The command that reproduces this run: the tunables that were set, then the script.
REPRODUCE=""
for v in $TUNABLES; do
    if [[ ${!v:-} =~ ^[A-Za-z0-9_./:-]+$ ]]; then
        REPRODUCE+="$v=${!v} "
    elif [[ -n ${!v:-} ]]; then
        REPRODUCE+="$v=${!v@Q} "
    fi
done
REPRODUCE+="bash bench/load.sh"

QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
    DURATION=${DURATION:-3}
    BACKLOG=${BACKLOG:-5000}
fi
DURATION=${DURATION:-10}
BACKLOG=${BACKLOG:-50000}
CONCURRENCIES=${CONCURRENCIES:-16 64}
THREADS=${THREADS:-2}
RATE=${RATE:-500}
RATE_CONNECTIONS=${RATE_CONNECTIONS:-16}
REQUESTS=${REQUESTS:-5}
EVENTS=${EVENTS:-$((50000 * DURATION))}
BACKENDS=${BACKENDS:-sqlite postgres}
WORKER_OFF=${WORKER_OFF:-1}
FILL_CONNECTIONS=${FILL_CONNECTIONS:-64}
DRAIN_TIMEOUT=${DRAIN_TIMEOUT:-900}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
PG_ADMIN_DB=${PG_ADMIN_DB:-test}
NODE_SDK=${NODE_SDK:-1}
NODE_AUTO_CHALLENGE=${NODE_AUTO_CHALLENGE:-1}
# The Node SDK release measured (pinned: a new one is a deliberate change of baseline).
NODE_SDK_VERSION=1.74.0
NODE_DIR=${FEISHU_BRIDGE_BENCH_CACHE:-$HOME/.cache/feishu-bridge-bench}/node
export PGCONNECT_TIMEOUT=5
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT_DIR=$ROOT/bench/out
LUA=$ROOT/bench/wrk-events.lua

ENCRYPT_KEY="bench-encrypt-key-$$"
TOKEN="bench-verification-token-$$"
BOT=ou_bench_bot
QUIET_CHAT=oc_bench_quiet_chat
PG_DB="fb_bench_$$"
PG_CREATED=0
SERVER_PID=""
CLIENT_PID=""
WORK=$(mktemp -d "${TMPDIR:-/tmp}/feishu-bridge-load.XXXXXX")

log() { printf '==> %s\n' "$*" >&2; }
die() {
    printf 'load.sh: %s\n' "$*" >&2
    exit 1
}

psql_admin() {
    psql -X -q -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$PG_ADMIN_DB" "$@"
}

# stop_pid PID: SIGTERM, up to 10 s, then SIGKILL; reaps it.
stop_pid() {
    local pid=$1 _
    [[ -n $pid ]] || return 0
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "process $pid did not stop after SIGTERM; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || true
}

stop_server() {
    stop_pid "$SERVER_PID"
    SERVER_PID=""
}

drop_pg() {
    if [[ $PG_CREATED == 1 ]]; then
        psql_admin -c "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null 2>&1 ||
            log "could not drop database $PG_DB"
        PG_CREATED=0
    fi
}

cleanup() {
    local rc=$?
    stop_pid "$CLIENT_PID"
    stop_server
    drop_pg
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now_ms() {
    local t=${EPOCHREALTIME/[.,]/}
    echo $((t / 1000))
}

# A port nothing listens on (a refused connection means free).
free_port() {
    local p _
    for _ in $(seq 1 100); do
        p=$((20000 + RANDOM % 30000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    die "no free port found"
}

# wait_http PID CURL-ARGS...: polls (bounded, 15 s) until the URL answers 2xx.
wait_http() {
    local pid=$1 _
    shift
    for _ in $(seq 1 150); do
        if curl -fsS -o /dev/null --max-time 1 "$@" 2>/dev/null; then
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# wait_port PID PORT: polls (bounded, 15 s) until the port accepts connections.
wait_port() {
    local _
    for _ in $(seq 1 150); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then
            return 0
        fi
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

mib() { # field of /proc/PID/status (kB) in MiB
    awk -v f="$2:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$1/status"
}

CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)

# cpu_ticks PID: the process's CPU time so far (utime + stime over all its threads), in
# clock ticks. The fields are counted after the command name, which may hold spaces:
# utime and stime are then the 12th and 13th.
cpu_ticks() {
    awk '{ sub(/^.*\) /, ""); split($0, f, " "); print f[12] + f[13] }' "/proc/$1/stat"
}

# cpu_us_per TICKS EVENTS: CPU µs per event ("?" without events).
cpu_us_per() {
    awk -v t="$1" -v n="$2" -v hz="$CLK_TCK" \
        'BEGIN { if (n > 0) printf "%.0f", t * 1e6 / hz / n; else print "?" }'
}

max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 > b + 0 ? a : b) }'; }

# fmt_ms MS: a latency for the table: ms with two significant decimals, s above 1 s.
fmt_ms() {
    awk -v v="$1" 'BEGIN {
        if (v == "") print "?"
        else if (v >= 1000) printf "%.1f s", v / 1000
        else if (v >= 100) printf "%.0f ms", v
        else if (v >= 10) printf "%.1f ms", v
        else printf "%.2f ms", v
    }'
}

# ratio A B: A / B as "0.42×".
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "?" }'; }

# median and max of the numbers on stdin, as "MAX MEDIAN".
max_median() {
    sort -n | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "? ?"; exit }
        m = (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)
        print v[NR], m
    }'
}

# kv LINE KEY: the value of KEY=... in a wrk-events RESULT line.
kv() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }

# start_wrk NAME ARGS...: starts wrk with the event script in the background (bounded),
# its pid in CLIENT_PID.
start_wrk() {
    local name=$1
    shift
    timeout $((DURATION + 180)) wrk "$@" >"$WORK/$name.wrk" 2>&1 &
    CLIENT_PID=$!
}

# wrk_result NAME: waits for the wrk started by start_wrk (in this shell: not from a
# command substitution), keeps its output, and sets WRK_LINE to its RESULT line.
WRK_LINE=""
wrk_result() {
    local name=$1 out=$WORK/$1.wrk line
    if ! wait "$CLIENT_PID"; then
        CLIENT_PID=""
        cat "$out" >&2
        die "wrk failed ($name)"
    fi
    CLIENT_PID=""
    cp "$out" "$OUT_DIR/$name.wrk.txt"
    line=$(grep '^wrk-events: RESULT' "$out" || true)
    [[ -n $line ]] || {
        cat "$out" >&2
        die "no result line from wrk ($name)"
    }
    # (Wrapping is expected for the bare ceiling run; running out is not.)
    grep 'WARNING: the event file ran out' "$out" >&2 || true
    WRK_LINE=$line
}

# saturate NAME URL CONNECTIONS FILE [SCRIPT-ARGS...]: one saturation run against
# SERVER_PID (WRK_LINE; SAT_TICKS: the server's CPU ticks during the run).
SAT_TICKS=0
saturate() {
    local name=$1 url=$2 conns=$3 file=$4 cpu0
    shift 4
    cpu0=$(cpu_ticks "$SERVER_PID")
    start_wrk "$name" -t"$THREADS" -c"$conns" -d"${DURATION}s" --timeout 5s --latency \
        -s "$LUA" "$url" -- file="$file" threads="$THREADS" "$@"
    wrk_result "$name"
    SAT_TICKS=$(($(cpu_ticks "$SERVER_PID") - cpu0))
}

# cpu_busy: percentage of all CPUs busy over one second. Client, server and database
# share this machine, so anything else running skews the results; this is sampled while
# none of them runs.
cpu_busy() {
    local a b
    a=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    sleep 1
    b=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    awk -v a="$a" -v b="$b" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        busy = y[1] - x[1]; idle = y[2] - x[2]
        printf "%.0f", (busy + idle > 0 ? 100 * busy / (busy + idle) : 0)
    }'
}

note_busy() {
    local who=$1 busy
    busy=$(cpu_busy)
    DETAILS+=("- $who: CPU busy before its runs (other processes): ${busy}%")
    ((busy < 20)) || log "[$who] WARNING: the machine is already ${busy}% busy; results will be low"
}

# --- databases ---------------------------------------------------------------------------

DB_BACKEND=""
DB_FILE=""
DB_URL=""

# fresh_db BACKEND TAG: a new empty database for one run (DB_URL, DB_FILE).
fresh_db() {
    DB_BACKEND=$1
    case $1 in
    sqlite)
        mkdir -p "$WORK/$2"
        DB_FILE=$WORK/$2/bench.db
        rm -f "$DB_FILE" "$DB_FILE-wal" "$DB_FILE-shm"
        DB_URL="sqlite://$DB_FILE"
        ;;
    postgres)
        drop_pg
        psql_admin -c "CREATE DATABASE $PG_DB" >/dev/null || die "cannot create database $PG_DB"
        PG_CREATED=1
        DB_URL="postgres://$PGUSER@$PGHOST:$PGPORT/$PG_DB"
        ;;
    *) die "unknown backend $1" ;;
    esac
}

# sql QUERY: rows of the current run's database, columns separated by "|".
sql() {
    if [[ $DB_BACKEND == postgres ]]; then
        psql -X -At -F '|' -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" \
            -d "$PG_DB" -c "$1"
    else
        sqlite_query "$DB_FILE" "$1"
    fi
}

# sqlite_query FILE QUERY: read-only, beside the running server (WAL readers never block).
sqlite_query() {
    if command -v sqlite3 >/dev/null; then
        sqlite3 -batch -noheader -cmd '.timeout 5000' "$1" "$2"
    else
        python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=5)
for r in c.execute(sys.argv[2]):
    print("|".join(str(x) for x in r))' "$1" "$2"
    fi
}

# --- the bridge --------------------------------------------------------------------------

PORT=""
START_MS=0

# start_bridge TAG WORKER(true|false): serves the current database; START_MS is the
# spawn time.
start_bridge() {
    local tag=$1 worker=$2
    PORT=$(free_port)
    local cfg=$WORK/$tag.toml
    cat >"$cfg" <<EOF
# Written by bench/load.sh. The freshness check is off so pre-generated events stay
# valid however long generation and loading take.
[server]
listen = "127.0.0.1:$PORT"
timestamp_tolerance_secs = 0

[database]
url = "$DB_URL"

[worker]
enabled = $worker
${WORKER_BATCH:+batch = $WORKER_BATCH}

[[profiles]]
name = "bench"
app_id = "cli_bench"
verification_token = "$TOKEN"
encrypt_key = "$ENCRYPT_KEY"
# Known bot identity (no bot-info call). Replies are recorded, not sent, and the API base
# points at a closed loopback port.
bot_open_id = "$BOT"
dry_run = true
api_base = "http://127.0.0.1:9"

[profiles.agent]
kind = "echo"
EOF
    local logf=$WORK/$tag.log
    START_MS=$(now_ms)
    RUST_LOG=warn "$BRIDGE" --config "$cfg" serve >>"$logf" 2>&1 &
    SERVER_PID=$!
    if ! wait_http "$SERVER_PID" "http://127.0.0.1:$PORT/healthz"; then
        cat "$logf" >&2
        die "[$tag] feishu-bridge did not become healthy"
    fi
}

# stop_bridge TAG: stops it, keeps its log, notes errors in it.
stop_bridge() {
    local tag=$1
    stop_server
    local logf=$WORK/$tag.log n
    n=$(grep -Ec ' ERROR |panicked' "$logf" || true)
    if ((n > 0)); then
        log "[$tag] the server log has $n error lines, e.g.:"
        grep -E ' ERROR |panicked' "$logf" | head -n 5 >&2
        FINDINGS+=("$tag: $n error lines in the server log (bench/out/$tag.server.log)")
    fi
    cp "$logf" "$OUT_DIR/$tag.server.log"
}

webhook_url() { echo "http://127.0.0.1:$PORT/webhook/bench/event"; }

# inbox_counts: "pending processing failed" from GET /status (empty if unknown).
inbox_counts() {
    curl -fsS --max-time 5 "http://127.0.0.1:$PORT/status" 2>/dev/null | tr -d ' \n' |
        sed -n 's/.*"inbox":{"pending":\([0-9]*\),"processing":\([0-9]*\),"retrying":[0-9]*,"failed":\([0-9]*\).*/\1 \2 \3/p' ||
        true
}

# check LABEL RESULT-LINE STORED CONNECTIONS [WHAT]: stored rows (or WHAT, e.g. "handled
# events", whatever stands for an event taken in) against 2xx answers. It must
# never be lower (an acknowledged event that was not stored: a PROBLEM). It may be higher
# by the requests in flight when wrk stops (stored, never counted by wrk: at most one per
# connection) plus the requests answered with an error whose event was stored after all
# (the sender retries those, and the duplicate is absorbed). CHECK_BAD is the number of
# answers that were not 2xx (non-2xx, socket errors, timeouts): what the service refused
# under this load, a FINDING.
CHECK_BAD=0
check() {
    local label=$1 line=$2 stored=$3 conns=$4 what=${5:-stored rows}
    local ok extra verdict non2xx errors
    ok=$(kv "$line" ok)
    non2xx=$(kv "$line" non2xx)
    errors=$(($(kv "$line" connect_err) + $(kv "$line" read_err) + $(kv "$line" write_err) + $(kv "$line" timeouts)))
    CHECK_BAD=$((non2xx + errors))
    extra=$((stored - ok))
    if ((extra == 0)); then
        verdict="ok"
    elif ((extra > 0 && extra <= conns)); then
        verdict="ok (+$extra in flight at cutoff)"
    elif ((extra > 0 && extra <= conns + CHECK_BAD)); then
        verdict="ok (+$extra in flight at cutoff or refused but stored)"
    else
        verdict="MISMATCH ($stored $what vs $ok 2xx)"
        PROBLEMS+=("$label: $verdict")
    fi
    if ((CHECK_BAD > 0)); then
        FINDINGS+=("$label: $non2xx non-2xx answers, $errors socket errors or timeouts (see the server log)")
    fi
    if (($(kv "$line" exhausted) > 0)); then
        PROBLEMS+=("$label: the event file ran out; rerun with a larger EVENTS")
    fi
    DETAILS+=("- $label: $(printf '%.0f' "$(kv "$line" ok_per_s)") events/s, p50 $(kv "$line" p50_ms) ms, p99 $(kv "$line" p99_ms) ms, max $(kv "$line" max_ms) ms; 2xx = $ok, $what = $stored: $verdict")
}

declare -A R=()
# PROBLEMS make a run invalid (exit 1); FINDINGS are what the service did under load.
declare -a DETAILS=() PROBLEMS=() FINDINGS=()

# record LABEL C LINE: keeps a saturation result for the table (after check and
# saturate: CHECK_BAD, SAT_TICKS).
record() {
    local ok
    ok=$(kv "$3" ok)
    R["$1|eps|$2"]=$(printf '%.0f' "$(kv "$3" ok_per_s)")
    R["$1|p99|$2"]=$(kv "$3" p99_ms)
    R["$1|bad|$2"]=$CHECK_BAD
    R["$1|cpu|$2"]=$(cpu_us_per "$SAT_TICKS" "$ok")
    DETAILS+=("- $1, c$2: server CPU $(awk -v t="$SAT_TICKS" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }') s (utime + stime) for $ok 2xx: ${R[$1|cpu|$2]} µs per event")
}

# bridge_saturation BACKEND WORKER LABEL: fresh database and server per concurrency.
bridge_saturation() {
    local backend=$1 worker=$2 label=$3 c line tag stored
    for c in $CONCURRENCIES; do
        tag="$backend-worker-$([[ $worker == true ]] && echo on || echo off)-c$c"
        fresh_db "$backend" "$tag"
        start_bridge "$tag" "$worker"
        if [[ -z ${R[$label|idle]:-} ]]; then
            sleep 0.5
            R["$label|idle"]=$(mib "$SERVER_PID" VmRSS)
        fi
        log "[$label] saturation: wrk -t$THREADS -c$c -d${DURATION}s"
        saturate "$tag" "$(webhook_url)" "$c" "$WORK/saturation.tsv"
        line=$WRK_LINE
        sleep 1
        stored=$(sql 'SELECT count(*) FROM inbox_events')
        check "$label, c$c" "$line" "$stored" "$c"
        record "$label" "$c" "$line"
        R["$label|peak"]=$(max "${R[$label|peak]:-0}" "$(mib "$SERVER_PID" VmHWM)")
        stop_bridge "$tag"
    done
}

# fill TAG: stores the BACKLOG events through the webhook (worker off), then stops wrk.
fill() {
    local tag=$1 counts pending=0 deadline
    log "[$tag] storing a backlog of $BACKLOG events (worker off)"
    wrk -t"$THREADS" -c"$FILL_CONNECTIONS" -d300s --timeout 5s -s "$LUA" "$(webhook_url)" -- \
        file="$WORK/backlog.tsv" threads="$THREADS" >"$WORK/$tag-fill.wrk" 2>&1 &
    CLIENT_PID=$!
    deadline=$(($(now_ms) + 300000))
    local last=-1 moved
    moved=$(now_ms)
    while (($(now_ms) < deadline)); do
        counts=$(inbox_counts)
        pending=${counts%% *}
        if [[ -n $pending ]]; then
            ((pending >= BACKLOG)) && break
            if ((pending != last)); then
                last=$pending
                moved=$(now_ms)
            fi
        fi
        # Stalled (a lost event would keep it short forever), or wrk is gone.
        (($(now_ms) - moved < 15000)) || break
        kill -0 "$CLIENT_PID" 2>/dev/null || break
        sleep 0.2
    done
    # wrk stops early, cleanly, on SIGINT (the slices are spent: it only sends to a 404
    # path by now).
    kill -INT "$CLIENT_PID" 2>/dev/null || true
    local _
    for _ in $(seq 1 100); do
        kill -0 "$CLIENT_PID" 2>/dev/null || break
        sleep 0.1
    done
    stop_pid "$CLIENT_PID"
    CLIENT_PID=""
    [[ ${pending:-0} == "$BACKLOG" ]] ||
        die "[$tag] backlog: $pending pending events, expected $BACKLOG (see $WORK/$tag-fill.wrk)"
}

# wait_drained TAG: polls GET /status (bounded) until nothing is pending or processing;
# sets DRAIN_MS to the ms since the server's spawn. (Not run in a command substitution,
# so a signal stops the script within one poll.)
DRAIN_MS=0
wait_drained() {
    local tag=$1 counts pending processing deadline
    deadline=$(($(now_ms) + DRAIN_TIMEOUT * 1000))
    while (($(now_ms) < deadline)); do
        counts=$(inbox_counts)
        if [[ -n $counts ]]; then
            read -r pending processing _ <<<"$counts"
            if ((pending == 0 && processing == 0)); then
                DRAIN_MS=$(($(now_ms) - START_MS))
                return 0
            fi
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || die "[$tag] feishu-bridge exited while draining"
        sleep 0.1
    done
    die "[$tag] the inbox did not drain within ${DRAIN_TIMEOUT}s (last: $counts)"
}

# bridge_drain BACKEND LABEL: drain rate of a stored backlog.
bridge_drain() {
    local backend=$1 label=$2 tag=$1-drain ms ticks counts failed observed recorded
    fresh_db "$backend" "$tag"
    start_bridge "$tag-fill" false
    fill "$tag"
    stop_bridge "$tag-fill"
    log "[$label] draining $BACKLOG events (worker on)"
    start_bridge "$tag" true
    wait_drained "$tag"
    ms=$DRAIN_MS
    # The whole process since its spawn: start-up and the /status polls are in it too.
    ticks=$(cpu_ticks "$SERVER_PID")
    counts=$(inbox_counts)
    failed=${counts##* }
    R["$label|drain"]=$(awk -v n="$BACKLOG" -v ms="$ms" 'BEGIN { printf "%.0f", n * 1000 / ms }')
    R["$label|drain_cpu"]=$(cpu_us_per "$ticks" "$BACKLOG")
    R["$label|peak"]=$(max "${R[$label|peak]:-0}" "$(mib "$SERVER_PID" VmHWM)")
    stop_bridge "$tag"
    observed=$(sql "SELECT count(*) FROM routing_verdicts WHERE verdict = 'observed'")
    recorded=$(sql "SELECT count(*) FROM thread_context_events WHERE event_type = 'human_message'")
    DETAILS+=("- $label, drain: $BACKLOG events in $ms ms from the server's spawn (${R[$label|drain]} events/s; server CPU $(awk -v t="$ticks" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }') s, ${R[$label|drain_cpu]} µs per event); routed observed: $observed, recorded as human_message: $recorded, failed: ${failed:-?}")
    if [[ $observed != "$BACKLOG" || $recorded != "$BACKLOG" || ${failed:-1} != 0 ]]; then
        PROBLEMS+=("$label, drain: $observed observed / $recorded recorded / ${failed:-?} failed of $BACKLOG")
    fi
}

# bridge_rate_during_drain BACKEND LABEL: fixed rate over a draining backlog, with
# @-requests in a quiet chat sent meanwhile.
bridge_rate_during_drain() {
    local backend=$1 label=$2 tag=$1-rate-drain line
    fresh_db "$backend" "$tag"
    start_bridge "$tag-fill" false
    fill "$tag"
    stop_bridge "$tag-fill"
    log "[$label] $RATE events/s for ${DURATION}s while $BACKLOG events drain, $REQUESTS @-requests meanwhile"
    start_bridge "$tag" true
    local url
    url=$(webhook_url)
    start_wrk "$tag" -t"$THREADS" -c"$RATE_CONNECTIONS" -d"${DURATION}s" --timeout 5s \
        --latency -s "$LUA" "$url" -- file="$WORK/rate.tsv" threads="$THREADS" \
        connections="$RATE_CONNECTIONS" rate="$RATE"

    # The requests, spread over the run (a second apart when it is long enough).
    local gap i ts nonce sig body code acks=()
    gap=$(awk -v d="$DURATION" -v n="$REQUESTS" 'BEGIN { g = d / (n + 1); printf "%.2f", (g > 1 ? 1 : g) }')
    i=0
    while IFS=$'\t' read -r ts nonce sig body; do
        sleep "$gap"
        i=$((i + 1))
        code=$(curl -sS -o /dev/null -w '%{http_code} %{time_total}' --max-time 10 \
            -H 'Content-Type: application/json' -H "X-Lark-Request-Timestamp: $ts" \
            -H "X-Lark-Request-Nonce: $nonce" -H "X-Lark-Signature: $sig" \
            --data-binary "$body" "$url" || echo "000 0")
        acks+=("$(now_ms)")
        DETAILS+=("- $label, @-request $i: HTTP ${code% *}, acknowledged in $(awk -v s="${code#* }" 'BEGIN { printf "%.1f", s * 1000 }') ms")
        [[ ${code% *} == 200 ]] || FINDINGS+=("$label: @-request $i answered HTTP ${code% *}")
    done <"$WORK/requests.tsv"
    wrk_result "$tag"
    line=$WRK_LINE
    local counts left
    counts=$(inbox_counts)
    left=${counts%% *}
    local stored
    stored=$(sql 'SELECT count(*) FROM inbox_events')
    check "$label, $RATE/s during drain" "$line" "$((stored - BACKLOG - i))" "$RATE_CONNECTIONS"
    R["$label|rate"]="$(fmt_ms "$(kv "$line" p50_ms)") / $(fmt_ms "$(kv "$line" p99_ms)") ($(printf '%.0f' "$(kv "$line" ok_per_s)")/s$( ((CHECK_BAD == 0)) || echo ", $CHECK_BAD refused"))"
    DETAILS+=("- $label, $RATE/s during drain: events still pending when it ended: ${left:-?}")
    if [[ ${left:-0} == 0 ]]; then
        # A worker faster than BACKLOG / DURATION: part of the run saw no backlog.
        R["$label|rate"]+=", backlog gone before the end"
    fi

    # Turns are queued once the worker reaches the requests: wait for all of them.
    local deadline n=0
    deadline=$(($(now_ms) + DRAIN_TIMEOUT * 1000))
    while (($(now_ms) < deadline)); do
        n=$(sql "SELECT count(*) FROM turns WHERE chat_id = '$QUIET_CHAT'")
        ((n >= REQUESTS)) && break
        sleep 0.2
    done
    ((n >= REQUESTS)) || PROBLEMS+=("$label: only $n of $REQUESTS @-requests got a turn within ${DRAIN_TIMEOUT}s")
    R["$label|peak"]=$(max "${R[$label|peak]:-0}" "$(mib "$SERVER_PID" VmHWM)")
    stop_bridge "$tag"

    # queued_at - received_at per request, in sending order; and from the client's 200.
    local rows delays=() client=() k=0 d q
    rows=$(sql "SELECT t.queued_at - i.received_at, t.queued_at FROM turns t JOIN inbox_events i ON i.profile = t.profile AND i.message_id = t.message_id WHERE t.chat_id = '$QUIET_CHAT' ORDER BY i.received_at")
    while IFS='|' read -r d q; do
        [[ -n $d ]] || continue
        delays+=("$d")
        [[ -n ${acks[k]:-} ]] && client+=("$((q - acks[k]))")
        k=$((k + 1))
    done <<<"$rows"
    local mm cm
    mm=$(printf '%s\n' "${delays[@]}" | max_median)
    cm=$(printf '%s\n' "${client[@]}" | max_median)
    R["$label|turn"]="$(fmt_ms "${mm% *}") ($(fmt_ms "${mm#* }"))"
    DETAILS+=("- $label, @-request ack → turn queued (queued_at − received_at, ms): ${delays[*]:-none}; from the client's 200: ${client[*]:-none} (max ${cm% *}, median ${cm#* })")
}

bench_backend() {
    local backend=$1
    local on="feishu-bridge $backend, worker on" off="feishu-bridge $backend, worker off"
    note_busy "$backend"
    bridge_saturation "$backend" true "$on"
    bridge_drain "$backend" "$on"
    bridge_rate_during_drain "$backend" "$on"
    if [[ $WORKER_OFF == 1 ]]; then
        bridge_saturation "$backend" false "$off"
    fi
}

# install_node_sdk: the pinned SDK in NODE_DIR (npm, only when it is not there yet).
install_node_sdk() {
    local pkg=$NODE_DIR/node_modules/@larksuiteoapi/node-sdk/package.json have=""
    case $NODE_DIR/ in
    "$ROOT"/*) die "FEISHU_BRIDGE_BENCH_CACHE must be outside the repository ($NODE_DIR)" ;;
    esac
    if [[ -f $pkg ]]; then
        have=$(node -p 'require(process.argv[1]).version' "$pkg" 2>/dev/null || true)
    fi
    if [[ $have == "$NODE_SDK_VERSION" ]]; then
        log "Node SDK $NODE_SDK_VERSION: using $NODE_DIR"
        return 0
    fi
    log "installing @larksuiteoapi/node-sdk@$NODE_SDK_VERSION with npm into $NODE_DIR"
    mkdir -p "$NODE_DIR"
    [[ -f $NODE_DIR/package.json ]] ||
        printf '{ "private": true, "description": "feishu-bridge bench/load.sh: the Node SDK baseline" }\n' \
            >"$NODE_DIR/package.json"
    timeout 600 npm install --prefix "$NODE_DIR" --no-audit --no-fund --ignore-scripts \
        --omit=dev --loglevel=error "@larksuiteoapi/node-sdk@$NODE_SDK_VERSION" >&2 ||
        die "npm could not install @larksuiteoapi/node-sdk@$NODE_SDK_VERSION (NODE_SDK=0 skips the baseline)"
    have=$(node -p 'require(process.argv[1]).version' "$pkg" 2>/dev/null || true)
    [[ $have == "$NODE_SDK_VERSION" ]] || die "npm installed Node SDK ${have:-nothing}, expected $NODE_SDK_VERSION"
}

# node_handled URL: "HANDLED FOREIGN" from the Node SDK handler's counters.
node_handled() {
    curl -fsS --max-time 5 "$1" 2>/dev/null |
        sed -n 's/^handled=\([0-9]*\) foreign=\([0-9]*\)$/\1 \2/p' || true
}

# bench_reference LABEL KIND: bare axum, the durable floor or the Node SDK, a fresh
# process per run.
bench_reference() {
    local label=$1 kind=$2 c line tag url counts n
    note_busy "$kind"
    for c in $CONCURRENCIES; do
        tag="$kind-c$c"
        PORT=$(free_port)
        url="http://127.0.0.1:$PORT/webhook/bench/event"
        case $kind in
        bare-axum)
            "$BARE" "127.0.0.1:$PORT" >"$WORK/$tag.log" 2>&1 &
            ;;
        durable-floor)
            mkdir -p "$WORK/$tag"
            "$FLOOR" --listen "127.0.0.1:$PORT" --db "$WORK/$tag/floor.db" \
                --encrypt-key "$ENCRYPT_KEY" >"$WORK/$tag.log" 2>&1 &
            ;;
        node-sdk)
            NODE_PATH=$NODE_DIR/node_modules FB_BENCH_ENCRYPT_KEY=$ENCRYPT_KEY \
                FB_BENCH_TOKEN=$TOKEN FB_BENCH_AUTO_CHALLENGE=$NODE_AUTO_CHALLENGE \
                node "$ROOT/bench/node_sdk_handler.js" "127.0.0.1:$PORT" >"$WORK/$tag.log" 2>&1 &
            ;;
        *) die "unknown reference $kind" ;;
        esac
        SERVER_PID=$!
        wait_port "$SERVER_PID" "$PORT" || die "[$label] did not come up: $(cat "$WORK/$tag.log")"
        if [[ -z ${R[$label|idle]:-} ]]; then
            sleep 0.5
            R["$label|idle"]=$(mib "$SERVER_PID" VmRSS)
        fi
        log "[$label] saturation: wrk -t$THREADS -c$c -d${DURATION}s"
        case $kind in
        bare-axum)
            # The bare server does not deduplicate: replaying is fine.
            saturate "$tag" "$url" "$c" "$WORK/bare.tsv" wrap=1
            line=$WRK_LINE
            CHECK_BAD=$(kv "$line" non2xx)
            DETAILS+=("- $label, c$c: $(printf '%.0f' "$(kv "$line" ok_per_s)") requests/s, p50 $(kv "$line" p50_ms) ms, p99 $(kv "$line" p99_ms) ms, non-2xx $(kv "$line" non2xx)")
            ;;
        durable-floor)
            saturate "$tag" "$url" "$c" "$WORK/saturation.tsv"
            line=$WRK_LINE
            sleep 1
            check "$label, c$c" "$line" "$(sqlite_query "$WORK/$tag/floor.db" 'SELECT count(*) FROM events')" "$c"
            ;;
        node-sdk)
            saturate "$tag" "$url" "$c" "$WORK/saturation.tsv"
            line=$WRK_LINE
            sleep 1
            # Handled events stand in for stored rows: the SDK answers 200 to a request
            # whose signature fails or whose body does not decrypt, and only a handled
            # event was checked, decrypted and dispatched.
            counts=$(node_handled "http://127.0.0.1:$PORT/handled")
            [[ -n $counts ]] || die "[$label] no count from GET /handled"
            check "$label, c$c" "$line" "${counts% *}" "$c" "handled events"
            if [[ ${counts#* } != 0 ]]; then
                PROBLEMS+=("$label, c$c: ${counts#* } dispatched events without the profile's token")
            fi
            # What the SDK rejected (a failed signature, a body it could not decrypt).
            n=$(grep -Ec '^\[(warn|error)\]' "$WORK/$tag.log" || true)
            ((n == 0)) || FINDINGS+=("$label, c$c: $n warnings or errors in the SDK's log (bench/out/$tag.server.log)")
            ;;
        esac
        record "$label" "$c" "$line"
        R["$label|peak"]=$(max "${R[$label|peak]:-0}" "$(mib "$SERVER_PID" VmHWM)")
        stop_server
        cp "$WORK/$tag.log" "$OUT_DIR/$tag.server.log"
    done
}

# ---------------------------------------------------------------------------------------

command -v wrk >/dev/null ||
    die "wrk is not installed (Debian/Ubuntu: sudo apt-get install wrk; elsewhere: https://github.com/wg/wrk)"
for tool in curl awk sed getconf; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done
if [[ $NODE_SDK == 1 ]]; then
    for tool in node npm; do
        command -v "$tool" >/dev/null ||
            die "the Node SDK baseline needs node and npm (Node 18 or later; $tool is missing); NODE_SDK=0 skips it"
    done
fi
[[ " $BACKENDS " != *" postgres "* ]] || command -v psql >/dev/null || die "psql is not installed"
command -v sqlite3 >/dev/null || command -v python3 >/dev/null ||
    die "reading the SQLite databases needs sqlite3 or python3"
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/*.wrk.txt "$OUT_DIR"/*.server.log

log "building release binaries"
cargo build --release --quiet --bin feishu-bridge --example loadgen --example bare_axum \
    --example durable_floor
BRIDGE=${BRIDGE:-$TARGET_DIR/release/feishu-bridge}
LOADGEN=$TARGET_DIR/release/examples/loadgen
BARE=$TARGET_DIR/release/examples/bare_axum
FLOOR=$TARGET_DIR/release/examples/durable_floor
for b in "$BRIDGE" "$LOADGEN" "$BARE" "$FLOOR"; do
    [[ -x $b ]] || die "missing binary $b (is CARGO_TARGET_DIR set as for the build?)"
done
NODE_VERSION=""
if [[ $NODE_SDK == 1 ]]; then
    install_node_sdk
    NODE_VERSION="; Node $(node --version)"
fi

RATE_EVENTS=$((RATE * DURATION * 2 + 1000))
log "generating $EVENTS saturation, $BACKLOG backlog, $RATE_EVENTS fixed-rate and $REQUESTS request events"
gen() { timeout 600 "$LOADGEN" --encrypt-key "$ENCRYPT_KEY" --token "$TOKEN" --app-id cli_bench "$@"; }
gen --count "$EVENTS" --out "$WORK/saturation.tsv"
gen --count "$BACKLOG" --out "$WORK/backlog.tsv"
gen --count "$RATE_EVENTS" --out "$WORK/rate.tsv"
gen --count "$REQUESTS" --out "$WORK/requests.tsv" --chat-id "$QUIET_CHAT" --mention-bot "$BOT"
head -n 20000 "$WORK/saturation.tsv" >"$WORK/bare.tsv"

CPU_MODEL=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MACHINE="$(nproc) CPUs (${CPU_MODEL:-unknown CPU}), $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r)"
WRK_VERSION=$(wrk -v 2>&1 | head -n 1 | awk '{ print $2 }' || true)
RUSTC_VERSION=$(rustc -V 2>/dev/null || echo unknown)
REVISION=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)

FLOOR_LABEL="durable floor"
BARE_LABEL="bare axum"
NODE_LABEL="Node SDK $NODE_SDK_VERSION"
bench_reference "$BARE_LABEL" bare-axum
bench_reference "$FLOOR_LABEL" durable-floor
if [[ $NODE_SDK == 1 ]]; then
    bench_reference "$NODE_LABEL" node-sdk
fi
for backend in $BACKENDS; do
    bench_backend "$backend"
done

# --- the table ---------------------------------------------------------------------------

read -r -a CS <<<"$CONCURRENCIES"
CHEAD=$(printf 'c%s / ' "${CS[@]}")
CHEAD=${CHEAD% / }

# cells LABEL KEY FORMAT-COMMAND: one value per concurrency, " / "-separated.
per_c() {
    local label=$1 key=$2 fmt=$3 c out=""
    for c in "${CS[@]}"; do
        out+="$($fmt "${R[$label|$key|$c]:-}") / "
    done
    echo "${out% / }"
}
plain() { echo "${1:-?}"; }
# eps_cells LABEL: events/s per concurrency, with the refused answers when there were any.
eps_cells() {
    local c out="" bad
    for c in "${CS[@]}"; do
        out+="${R[$1|eps|$c]:-?}"
        bad=${R[$1|bad|$c]:-0}
        ((bad == 0)) || out+=" ($bad refused)"
        out+=" / "
    done
    echo "${out% / }"
}
# vs LABEL REFERENCE: events/s of LABEL over those of REFERENCE, per concurrency ("–"
# when the reference was not run).
vs() {
    local label=$1 ref=$2 c out=""
    [[ -n ${R[$ref|eps|${CS[0]}]:-} ]] || {
        echo "–"
        return 0
    }
    for c in "${CS[@]}"; do
        out+="$(ratio "${R[$label|eps|$c]:-0}" "${R[$ref|eps|$c]:-0}") / "
    done
    echo "${out% / }"
}
# drain_cell LABEL: drain events/s and the worker's CPU per event ("–" if not run).
drain_cell() {
    if [[ -n ${R[$1|drain]:-} ]]; then
        echo "${R[$1|drain]} (${R[$1|drain_cpu]:-?} µs)"
    else
        echo "–"
    fi
}
row() {
    local label=$1
    echo "| $label | $(eps_cells "$label") | $(per_c "$label" cpu plain) | $(per_c "$label" p99 fmt_ms) | $(drain_cell "$label") | ${R[$label|rate]:-–} | ${R[$label|turn]:-–} | ${R[$label|idle]:-?} / ${R[$label|peak]:-?} | $(vs "$label" "$NODE_LABEL") | $(vs "$label" "$FLOOR_LABEL") |"
}

{
    echo "## feishu-bridge load test (worker on, as in production)"
    echo
    echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- Machine: $MACHINE"
    echo "- Revision $REVISION; wrk $WRK_VERSION (client on the same machine); $RUSTC_VERSION$NODE_VERSION"
    if [[ " $BACKENDS " == *" postgres "* ]]; then
        echo "- Postgres $(psql_admin -At -c 'SHOW server_version' 2>/dev/null || echo '?') on $PGHOST:$PGPORT (synchronous_commit = $(psql_admin -At -c 'SHOW synchronous_commit' 2>/dev/null || echo '?'))"
    fi
    echo "- Reproduce: \`$REPRODUCE\`"
    echo "- Saturation: \`wrk -t$THREADS -c<C> -d${DURATION}s\`, a fresh database per run, each event distinct (im.message.receive_v1 group text, not addressed to the bot: routed observed)"
    echo "- Drain: $BACKLOG events stored with the worker off, then timed from the start of a server with the worker on until GET /status shows none pending or processing"
    echo "- Fixed rate: $RATE events/s for ${DURATION}s (\`-c$RATE_CONNECTIONS\`) from the moment a worker-on server over a fresh $BACKLOG-event backlog answers; p50 / p99 (achieved rate)"
    echo "- @-request: $REQUESTS requests to the bot in a quiet chat during the fixed-rate run; max (median) of turns.queued_at − inbox_events.received_at"
    echo "- CPU per event: the server process's utime + stime (/proc/PID/stat, all threads) during a saturation run over its 2xx answers; for the drain, the worker-on server's CPU from its spawn until the inbox is empty over the events drained"
    if [[ $NODE_SDK == 1 ]]; then
        echo "- Node SDK: @larksuiteoapi/node-sdk $NODE_SDK_VERSION in one Node process (bench/node_sdk_handler.js: http server, the SDK's adaptDefault and EventDispatcher with the encrypt key, so signatures are checked; autoChallenge $([[ $NODE_AUTO_CHALLENGE == 1 ]] && echo on || echo off)); a no-op im.message.receive_v1 handler, nothing stored; its handled events matched against the 200s"
    fi
    echo
    echo "| | events/s $CHEAD | CPU µs/event $CHEAD | p99 ack $CHEAD | drain events/s (CPU µs/event) | $RATE/s during $BACKLOG drain p50 / p99 | @-request ack→turn max (median) | idle / peak RSS MiB | events/s vs Node SDK $CHEAD | events/s vs floor $CHEAD |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    row "$BARE_LABEL"
    row "$FLOOR_LABEL"
    if [[ $NODE_SDK == 1 ]]; then
        row "$NODE_LABEL"
    fi
    for backend in $BACKENDS; do
        row "feishu-bridge $backend, worker on"
    done
    if [[ $WORKER_OFF == 1 ]]; then
        for backend in $BACKENDS; do
            row "feishu-bridge $backend, worker off"
        done
    fi
    echo
    echo "The durable floor is SQLite (WAL, synchronous = FULL) for both bridge backends. Worker-off rows: ingress only (verify, decrypt, durable group commit), no drain. The Node SDK row stores nothing: it is what the SDK's own verification, decryption and dispatch cost, with one event loop."
    echo
    echo "Details:"
    echo
    printf '%s\n' "${DETAILS[@]}"
    if ((${#FINDINGS[@]} > 0)); then
        echo
        echo "Findings (the service under this load; the figures stand):"
        echo
        printf -- '- %s\n' "${FINDINGS[@]}"
    fi
    if ((${#PROBLEMS[@]} > 0)); then
        echo
        echo "Problems (this run's figures are not valid):"
        echo
        printf -- '- %s\n' "${PROBLEMS[@]}"
    fi
} | tee "$OUT_DIR/results.md"
log "written to bench/out/results.md (raw wrk output and server logs beside it)"
if ((${#PROBLEMS[@]} > 0)); then
    printf 'load.sh: PROBLEM: %s\n' "${PROBLEMS[@]}" >&2
    exit 1
fi
