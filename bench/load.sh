#!/usr/bin/env bash
# Load test of the webhook ingress: verified, decrypted, durably stored events per second
# on SQLite and Postgres, latency at a fixed 500 events/s, memory, and the ceiling of a
# bare axum server on the same machine.
#
#   bash bench/load.sh            # from the repository root; results in bench/out/
#
# What is measured: only ingress. The inbox worker is disabled (`[worker] enabled =
# false`), so each request is signature check + AES decrypt + envelope parse + a group-
# committed INSERT whose transaction is durable (WAL fsync) before the 200 goes out.
# WITH_WORKER=1 adds a second pass per backend with the worker on (it claims and parses
# the stored events concurrently, as in production).
#
# Every request carries a distinct event (event_id, message_id, IV, nonce), generated
# beforehand by examples/loadgen.rs and replayed by bench/wrk-events.lua, so nothing is
# answered as a duplicate. Traffic goes to 127.0.0.1 only.
#
# Tunables (environment): DURATION (s, default 10), THREADS (2), CONNECTIONS (64),
# RATE (500), RATE_CONNECTIONS (16), EVENTS (events generated for a saturation run),
# BACKENDS ("sqlite postgres"), WITH_WORKER (0), PGHOST (127.0.0.1), PGPORT (5432),
# PGUSER (postgres), PG_ADMIN_DB (test; the database CREATE/DROP DATABASE runs in).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

DURATION=${DURATION:-10}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-64}
RATE=${RATE:-500}
RATE_CONNECTIONS=${RATE_CONNECTIONS:-16}
EVENTS=${EVENTS:-250000}
BACKENDS=${BACKENDS:-sqlite postgres}
WITH_WORKER=${WITH_WORKER:-0}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
PG_ADMIN_DB=${PG_ADMIN_DB:-test}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT_DIR=$ROOT/bench/out
LUA=$ROOT/bench/wrk-events.lua

ENCRYPT_KEY="bench-encrypt-key-$$"
TOKEN="bench-verification-token-$$"
PG_DB="fb_bench_$$"
PG_CREATED=0
SERVER_PID=""
WORK=$(mktemp -d "${TMPDIR:-/tmp}/feishu-bridge-load.XXXXXX")

log() { printf '==> %s\n' "$*" >&2; }
die() {
    printf 'load.sh: %s\n' "$*" >&2
    exit 1
}

psql_admin() {
    psql -X -q -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$PG_ADMIN_DB" "$@"
}

stop_server() {
    if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        local i
        for i in $(seq 1 100); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$SERVER_PID" 2>/dev/null; then
            log "server $SERVER_PID did not stop after SIGTERM; killing it"
            kill -KILL "$SERVER_PID" 2>/dev/null || true
        fi
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}

cleanup() {
    local rc=$?
    stop_server
    if [[ $PG_CREATED == 1 ]]; then
        psql_admin -c "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null 2>&1 ||
            log "could not drop database $PG_DB"
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

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

# wait_http PID CURL-ARGS...: polls (bounded) until the URL answers 2xx.
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

mib() { # field of /proc/PID/status (kB) in MiB
    awk -v f="$2:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$1/status"
}

# mean_batch SUM COUNT: mean events per commit, from the batch-size histogram.
mean_batch() { awk -v s="$1" -v n="$2" 'BEGIN { printf "%.1f", (n > 0 ? s / n : 0) }'; }

# kv LINE KEY: the value of KEY=... in a wrk-events RESULT line.
kv() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }

# metric NAME-AND-LABEL-PATTERN: the value of one /metrics sample.
metric() {
    curl -fsS --max-time 5 "http://127.0.0.1:$PORT/metrics" |
        awk -v pat="$1" 'index($0, pat) == 1 { v = $NF } END { print (v == "" ? 0 : v) }'
}

# run_wrk NAME ARGS...: runs wrk with the event script, keeps its output, prints the
# RESULT line.
run_wrk() {
    local name=$1
    shift
    local out=$WORK/$name.wrk
    if ! timeout $((DURATION + 120)) wrk "$@" >"$out" 2>&1; then
        cat "$out" >&2
        die "wrk failed ($name)"
    fi
    cp "$out" "$OUT_DIR/$name.wrk.txt"
    local line
    line=$(grep '^wrk-events: RESULT' "$out" || true)
    [[ -n $line ]] || {
        cat "$out" >&2
        die "no result line from wrk ($name)"
    }
    # (Wrapping is expected for the bare ceiling run; running out is not.)
    grep 'WARNING: the event file ran out' "$out" >&2 || true
    echo "$line"
}

# ---------------------------------------------------------------------------------------

command -v wrk >/dev/null || die "wrk is not installed"
command -v curl >/dev/null || die "curl is not installed"
mkdir -p "$OUT_DIR"

log "building release binaries"
cargo build --release --quiet --bin feishu-bridge --example loadgen --example bare_axum
BRIDGE=$TARGET_DIR/release/feishu-bridge
LOADGEN=$TARGET_DIR/release/examples/loadgen
BARE=$TARGET_DIR/release/examples/bare_axum
for b in "$BRIDGE" "$LOADGEN" "$BARE"; do
    [[ -x $b ]] || die "missing binary $b (is CARGO_TARGET_DIR set as for the build?)"
done

RATE_EVENTS=$((RATE * DURATION * 2 + 1000))
log "generating $EVENTS saturation events and $RATE_EVENTS fixed-rate events"
"$LOADGEN" --count "$EVENTS" --encrypt-key "$ENCRYPT_KEY" --token "$TOKEN" \
    --app-id cli_bench --out "$WORK/saturation.tsv"
"$LOADGEN" --count "$RATE_EVENTS" --encrypt-key "$ENCRYPT_KEY" --token "$TOKEN" \
    --app-id cli_bench --out "$WORK/rate.tsv"
# The ceiling run may replay events (the bare server does not deduplicate).
head -n 20000 "$WORK/saturation.tsv" >"$WORK/bare.tsv"

CPU_MODEL=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MACHINE="$(nproc) CPUs (${CPU_MODEL:-unknown CPU}), $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r)"
WRK_VERSION=$(wrk -v 2>&1 | head -n 1 | awk '{ print $2 }' || true)
RUSTC_VERSION=$(rustc -V 2>/dev/null || echo unknown)
REVISION=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)

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

declare -a ROWS=() DETAILS=() PROBLEMS=()
CHECK=""

# bench_backend BACKEND WORKER(true|false)
bench_backend() {
    local backend=$1 worker=$2 label=$1 url
    [[ $worker == true ]] && label="$backend + worker"
    local tag=${label// + /-}
    case $backend in
    sqlite)
        mkdir -p "$WORK/$tag"
        url="sqlite://$WORK/$tag/bench.db"
        ;;
    postgres)
        if [[ $PG_CREATED == 1 ]]; then
            psql_admin -c "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null
            PG_CREATED=0
        fi
        psql_admin -c "CREATE DATABASE $PG_DB" >/dev/null || die "cannot create database $PG_DB"
        PG_CREATED=1
        url="postgres://$PGUSER@$PGHOST:$PGPORT/$PG_DB"
        ;;
    *) die "unknown backend $backend" ;;
    esac

    PORT=$(free_port)
    local cfg=$WORK/$tag.toml
    cat >"$cfg" <<EOF
# Written by bench/load.sh. The freshness check is off so pre-generated events stay
# valid however long generation and loading take.
[server]
listen = "127.0.0.1:$PORT"
timestamp_tolerance_secs = 0

[database]
url = "$url"

[worker]
# false: measure ingress alone (verify + decrypt + durable group commit).
enabled = $worker

[[profiles]]
name = "bench"
app_id = "cli_bench"
verification_token = "$TOKEN"
encrypt_key = "$ENCRYPT_KEY"
# Keeps any processing local: replies are recorded, not sent, and the API base points
# at a closed loopback port.
bot_open_id = "ou_bench_bot"
dry_run = true
api_base = "http://127.0.0.1:9"
EOF

    log "[$label] starting feishu-bridge on 127.0.0.1:$PORT"
    RUST_LOG=warn "$BRIDGE" --config "$cfg" serve >"$WORK/$tag.log" 2>&1 &
    SERVER_PID=$!
    if ! wait_http "$SERVER_PID" "http://127.0.0.1:$PORT/healthz"; then
        cat "$WORK/$tag.log" >&2
        die "[$label] server did not become healthy"
    fi
    sleep 0.5
    local idle_rss
    idle_rss=$(mib "$SERVER_PID" VmRSS)

    # stored_rows: rows in the inbox, from the database itself.
    stored_rows() {
        if [[ $backend == postgres ]]; then
            psql -X -At -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$PG_DB" \
                -c 'SELECT count(*) FROM inbox_events'
        elif [[ $worker == false ]]; then
            # With the worker off every stored row stays pending, and the gauge is
            # counted from the database at scrape time.
            metric 'feishu_bridge_inbox_pending '
        elif command -v sqlite3 >/dev/null; then
            sqlite3 "$WORK/$tag/bench.db" 'SELECT count(*) FROM inbox_events'
        else
            metric 'feishu_bridge_webhook_requests_total{kind="event",outcome="accepted",profile="bench"}'
        fi
    }
    # check NAME RESULT-LINE ROWS-BEFORE ROWS-AFTER CONNECTIONS: stored rows against 2xx
    # answers, into CHECK. Requests in flight when wrk stops are stored but never counted
    # by wrk, so the stored count may exceed the 2xx count by at most the number of
    # connections; it must never be lower (an acknowledged event that was not stored).
    check() {
        local name=$1 line=$2 before=$3 after=$4 conns=$5
        local ok stored extra
        ok=$(kv "$line" ok)
        stored=$((after - before))
        extra=$((stored - ok))
        DETAILS+=("- $label, $name: 2xx = $ok, stored rows = $stored, requests sent = $(($(kv "$line" issued) - 1))")
        if ((extra == 0)); then
            CHECK="ok"
        elif ((extra > 0 && extra <= conns)); then
            CHECK="ok (+$extra in flight at cutoff)"
        else
            CHECK="MISMATCH ($stored stored vs $ok 2xx)"
            PROBLEMS+=("$label, $name: $CHECK")
        fi
    }

    local base="http://127.0.0.1:$PORT/webhook/bench/event"
    local busy
    busy=$(cpu_busy)
    DETAILS+=("- $label: CPU busy before the run (other processes): ${busy}%")
    ((busy < 20)) || log "[$label] WARNING: the machine is already ${busy}% busy; results will be low"
    local rows0 rows1 rows2 sat fixed
    rows0=$(stored_rows)
    log "[$label] saturation: wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s"
    sat=$(run_wrk "$tag-saturation" -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" \
        --timeout 5s --latency -s "$LUA" "$base" -- \
        file="$WORK/saturation.tsv" threads="$THREADS")
    sleep 1
    rows1=$(stored_rows)
    local sat_batches sat_batch_sum
    sat_batches=$(metric "feishu_bridge_inbox_commit_batch_size_count{backend=\"$backend\"}")
    sat_batch_sum=$(metric "feishu_bridge_inbox_commit_batch_size_sum{backend=\"$backend\"}")
    check saturation "$sat" "$rows0" "$rows1" "$CONNECTIONS"
    local sat_check=$CHECK

    log "[$label] fixed rate: $RATE events/s, wrk -t$THREADS -c$RATE_CONNECTIONS -d${DURATION}s"
    fixed=$(run_wrk "$tag-rate$RATE" -t"$THREADS" -c"$RATE_CONNECTIONS" -d"${DURATION}s" \
        --timeout 5s --latency -s "$LUA" "$base" -- \
        file="$WORK/rate.tsv" threads="$THREADS" connections="$RATE_CONNECTIONS" rate="$RATE")
    sleep 1
    rows2=$(stored_rows)
    check "rate $RATE/s" "$fixed" "$rows1" "$rows2" "$RATE_CONNECTIONS"
    local rate_check=$CHECK

    local peak_rss accepted batches batch_sum
    peak_rss=$(mib "$SERVER_PID" VmHWM)
    accepted=$(metric 'feishu_bridge_webhook_requests_total{kind="event",outcome="accepted",profile="bench"}')
    batches=$(metric "feishu_bridge_inbox_commit_batch_size_count{backend=\"$backend\"}")
    batch_sum=$(metric "feishu_bridge_inbox_commit_batch_size_sum{backend=\"$backend\"}")
    stop_server
    if grep -Eiq 'error|panic' "$WORK/$tag.log"; then
        log "[$label] the server log has errors:"
        grep -Ei 'error|panic' "$WORK/$tag.log" | head -n 20 >&2
    fi
    cp "$WORK/$tag.log" "$OUT_DIR/$tag.server.log"

    local non2xx=$(($(kv "$sat" non2xx) + $(kv "$fixed" non2xx)))
    local errors=$(($(kv "$sat" connect_err) + $(kv "$sat" read_err) + $(kv "$sat" write_err) + $(kv "$sat" timeouts) + $(kv "$fixed" connect_err) + $(kv "$fixed" read_err) + $(kv "$fixed" write_err) + $(kv "$fixed" timeouts)))
    local check_cell="saturation $sat_check; rate $rate_check"
    ((non2xx == 0 && errors == 0)) || PROBLEMS+=("$label: $non2xx non-2xx answers, $errors socket errors")
    ROWS+=("| $label | $(printf '%.0f' "$(kv "$sat" ok_per_s)") | $(kv "$sat" p99_ms) | $(printf '%.0f' "$(kv "$fixed" ok_per_s)") | $(kv "$fixed" p50_ms) | $(kv "$fixed" p99_ms) | $idle_rss | $peak_rss | $non2xx | $errors | $check_cell |")
    DETAILS+=("- $label: accepted counter = $accepted (both runs); group commit: $(mean_batch "$sat_batch_sum" "$sat_batches") events per transaction at saturation, $(mean_batch "$((batch_sum - sat_batch_sum))" "$((batches - sat_batches))") at $RATE/s")
    if (($(kv "$sat" exhausted) > 0)); then
        DETAILS+=("- $label: WARNING: the saturation file ran out; rerun with a larger EVENTS")
    fi
}

for backend in $BACKENDS; do
    bench_backend "$backend" false
    if [[ $WITH_WORKER == 1 ]]; then
        bench_backend "$backend" true
    fi
done

# The ceiling: the same wrk saturation command against a server that only reads the body
# and answers 200.
PORT=$(free_port)
log "[bare axum] starting on 127.0.0.1:$PORT"
"$BARE" "127.0.0.1:$PORT" >"$WORK/bare.log" 2>&1 &
SERVER_PID=$!
wait_http "$SERVER_PID" -X POST -d '{}' "http://127.0.0.1:$PORT/webhook/bench/event" ||
    die "bare axum server did not come up"
bare=$(run_wrk bare-axum-saturation -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" \
    --timeout 5s --latency -s "$LUA" "http://127.0.0.1:$PORT/webhook/bench/event" -- \
    file="$WORK/bare.tsv" threads="$THREADS" wrap=1)
bare_peak=$(mib "$SERVER_PID" VmHWM)
stop_server
bare_non2xx=$(kv "$bare" non2xx)

{
    echo "## feishu-bridge ingress load test"
    echo
    echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- Machine: $MACHINE"
    echo "- Revision $REVISION; wrk $WRK_VERSION (client on the same machine); $RUSTC_VERSION"
    if [[ " $BACKENDS " == *" postgres "* ]]; then
        echo "- Postgres $(psql -X -At -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$PG_ADMIN_DB" -c 'SHOW server_version' 2>/dev/null || echo '?') on $PGHOST:$PGPORT (synchronous_commit = $(psql -X -At -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$PG_ADMIN_DB" -c 'SHOW synchronous_commit' 2>/dev/null || echo '?'))"
    fi
    echo "- Event: im.message.receive_v1, ~1.5 KB plaintext, ~2 KB encrypted body, each one distinct"
    echo "- Saturation: \`wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s\`; fixed rate: $RATE events/s with \`-t$THREADS -c$RATE_CONNECTIONS -d${DURATION}s\` (wrk delay() pacing)"
    echo "- Worker disabled unless the backend says \"+ worker\": ingress only (verify, decrypt, durable group commit)"
    echo
    echo "| backend | events/s (saturation) | p99 ms (saturation) | achieved rate | p50 ms @ $RATE/s | p99 ms @ $RATE/s | idle RSS MiB | peak RSS MiB | non-2xx | socket errors | stored rows = 2xx |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    printf '%s\n' "${ROWS[@]}"
    echo "| bare axum (ceiling) | $(printf '%.0f' "$(kv "$bare" ok_per_s)") req/s | $(kv "$bare" p99_ms) | | | | | $bare_peak | $bare_non2xx | | |"
    echo
    echo "Details:"
    echo
    printf '%s\n' "${DETAILS[@]}"
} | tee "$OUT_DIR/results.md"
log "written to bench/out/results.md (raw wrk output and server logs beside it)"
if ((${#PROBLEMS[@]} > 0)); then
    printf 'load.sh: PROBLEM: %s\n' "${PROBLEMS[@]}" >&2
    exit 1
fi
