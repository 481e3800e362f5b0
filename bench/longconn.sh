#!/usr/bin/env bash
# Events/s and acknowledgement latency over ONE long connection, beside the event URL
# (webhook) measured in the same run, on the same machine, with the same events and the
# same release build of feishu-bridge, on SQLite and on Postgres:
#
#   bash bench/longconn.sh            # from anywhere; results in bench/out/longconn.md
#   QUICK=1 bash bench/longconn.sh    # smoke run: 2,000-event saturation, 3 s at RATE
#
# The client is examples/longconn_load.rs for both ways in (wrk is not needed):
#
#   * long connection: it runs the fake Feishu of bench/fake_longconn.rs; the bridge,
#     pointed at it with api_base, fetches a URL and connects; the fake pushes each event
#     as a data frame (plaintext JSON, as Feishu pushes) and times it to its ACK;
#   * webhook: it POSTs each event, AES-encrypted and signed as Feishu sends it, to
#     /webhook/bench/event over kept-alive HTTP/1.1 connections, timed to the response.
#
# Per backend, four runs, each on a fresh database and a fresh bridge process (the
# release binary, worker on, every other setting its default):
#   1. saturation over the long connection: COUNT events, WINDOW in flight;
#   2. saturation over the event URL: COUNT events, WINDOW requests at a time;
#   3. RATE events/s for DURATION s over the long connection (latency from each slot);
#   4. RATE events/s for DURATION s over the event URL (each request sent at its slot).
#
# Events are im.message.receive_v1 group replies in 16 chats that mention another bot and
# a person, never this bridge's bot (bot_open_id = ou_bench_bot): each one is routed
# "observed", so the agent is not in the way. Replies are dry_run; nothing leaves
# 127.0.0.1.
#
# After each run the bridge is stopped and every event acknowledged 200 is looked up in
# inbox_events by its event_id. The script exits 1 when a run is not valid: an
# acknowledged event not stored, an event never answered, an ACK the fake could not
# match, an event routed other than "observed". Events the bridge refused (500 / non-200)
# and error lines in its log are reported as findings.
#
# Tunables (environment): QUICK (0), COUNT (40000; QUICK 2000), WINDOW (64), RATE (500),
# DURATION (s; 20, QUICK 3), BACKENDS ("sqlite postgres"), PGHOST (127.0.0.1),
# PGPORT (5432), PGUSER (postgres), PG_ADMIN_DB (test; where CREATE/DROP DATABASE runs).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

TUNABLES="QUICK COUNT WINDOW RATE DURATION BACKENDS PGHOST PGPORT PGUSER PG_ADMIN_DB"
REPRODUCE=""
for v in $TUNABLES; do
    if [[ ${!v:-} =~ ^[A-Za-z0-9_./:-]+$ ]]; then
        REPRODUCE+="$v=${!v} "
    elif [[ -n ${!v:-} ]]; then
        REPRODUCE+="$v=${!v@Q} "
    fi
done
REPRODUCE+="bash bench/longconn.sh"

QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
    COUNT=${COUNT:-2000}
    DURATION=${DURATION:-3}
fi
COUNT=${COUNT:-40000}
WINDOW=${WINDOW:-64}
RATE=${RATE:-500}
DURATION=${DURATION:-20}
BACKENDS=${BACKENDS:-sqlite postgres}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
PG_ADMIN_DB=${PG_ADMIN_DB:-test}
export PGCONNECT_TIMEOUT=5
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT_DIR=$ROOT/bench/out

# Bench-only values, not the secrets of any app.
APP_SECRET="bench-app-secret-$$"
ENCRYPT_KEY="bench-encrypt-key-$$"
TOKEN="bench-verification-token-$$"
PG_DB="fb_longconn_$$"
PG_CREATED=0
SERVER_PID=""
CLIENT_PID=""
WORK=$(mktemp -d "${TMPDIR:-/tmp}/feishu-bridge-longconn.XXXXXX")

log() { printf '==> %s\n' "$*" >&2; }
die() {
    printf 'longconn.sh: %s\n' "$*" >&2
    exit 1
}

psql_admin() {
    psql -X -q -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$PG_ADMIN_DB" "$@"
}

# halt PID: SIGTERM, up to 10 s, then SIGKILL; reaps it.
halt() {
    local pid=$1 _
    [[ -n $pid ]] || return 0
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "process $pid ignored SIGTERM for 10 s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || true
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
    halt "$CLIENT_PID"
    halt "$SERVER_PID"
    drop_pg
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A loopback port nothing listens on (a refused connection means free), below the
# kernel's ephemeral range, so that no outgoing connection can be holding it.
free_port() {
    local p _ low
    low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    for _ in $(seq 1 100); do
        p=$((20000 + RANDOM % (low - 20000)))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    die "no free port found"
}

# --- databases ---------------------------------------------------------------------------

DB_BACKEND=""
DB_FILE=""
DB_URL=""

# fresh_db BACKEND TAG: a new, empty database for one run.
fresh_db() {
    DB_BACKEND=$1
    case $1 in
    sqlite)
        mkdir -p "$WORK/$2"
        DB_FILE=$WORK/$2/bench.db
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
        psql -X -q -At -F '|' -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" \
            -d "$PG_DB" -c "$1"
    else
        sqlite3 -batch -noheader -cmd '.timeout 5000' "$DB_FILE" "$1"
    fi
}

# stored_acked FILE: how many of the event ids in FILE are rows of inbox_events.
stored_acked() {
    local file=$1
    local query="SELECT count(*) FROM acked a JOIN inbox_events e ON e.profile = 'bench' AND e.event_id = a.event_id"
    if [[ $DB_BACKEND == postgres ]]; then
        psql -X -q -At -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$PG_DB" \
            -c 'CREATE TEMP TABLE acked (event_id text PRIMARY KEY)' \
            -c "\\copy acked FROM '$file'" -c "$query"
    else
        sqlite3 -batch -noheader "$DB_FILE" \
            'CREATE TEMP TABLE acked (event_id TEXT PRIMARY KEY)' \
            ".import $file acked" "$query"
    fi
}

# --- the bridge --------------------------------------------------------------------------

PORT=""

# start_bridge TAG CONNECTION API_BASE: the release bridge on the current database, with
# its pid in $WORK/TAG.pid for the client (which reads its CPU time).
start_bridge() {
    local attempt
    for attempt in 1 2 3; do
        start_bridge_once "$@" && return 0
        # Another process took the port between the check and the bind: another port.
        grep -q "Address already in use" "$WORK/$1.log" || break
        log "[$1] port $PORT was taken; trying another (attempt $attempt)"
    done
    cat "$WORK/$1.log" >&2
    die "[$1] feishu-bridge did not become healthy"
}

# start_bridge_once TAG CONNECTION API_BASE: one attempt; fails when the bridge exits or
# does not answer /healthz within 15 s.
start_bridge_once() {
    local tag=$1 connection=$2 api_base=$3 cfg=$WORK/$1.toml keys
    PORT=$(free_port)
    if [[ $connection == websocket ]]; then
        keys="connection = \"websocket\"
app_secret = \"$APP_SECRET\""
    else
        keys="verification_token = \"$TOKEN\"
encrypt_key = \"$ENCRYPT_KEY\""
    fi
    cat >"$cfg" <<EOF
# Written by bench/longconn.sh: every setting not given here is the default (worker on).
[server]
listen = "127.0.0.1:$PORT"

[database]
url = "$DB_URL"

[[profiles]]
name = "bench"
app_id = "cli_bench"
$keys
bot_open_id = "ou_bench_bot"
dry_run = true
api_base = "$api_base"

[profiles.agent]
kind = "echo"
EOF
    RUST_LOG=warn "$BRIDGE" --config "$cfg" serve >"$WORK/$tag.log" 2>&1 &
    SERVER_PID=$!
    echo "$SERVER_PID" >"$WORK/$tag.pid"
    local _
    for _ in $(seq 1 150); do
        if curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$PORT/healthz" 2>/dev/null; then
            return 0
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    return 1
}

# stop_bridge TAG: SIGTERM (a graceful shutdown), keeps its log, notes its error lines.
stop_bridge() {
    local tag=$1 n
    PEAK_RSS=$(awk '$1 == "VmHWM:" { printf "%.1f", $2 / 1024 }' "/proc/$SERVER_PID/status" 2>/dev/null || echo "?")
    halt "$SERVER_PID"
    SERVER_PID=""
    cp "$WORK/$tag.log" "$OUT_DIR/longconn-$tag.server.log"
    n=$(grep -Ec ' ERROR |panicked' "$WORK/$tag.log" || true)
    if ((n > 0)); then
        FINDINGS+=("$tag: $n error lines in the server log (bench/out/longconn-$tag.server.log)")
    fi
}

# --- runs ----------------------------------------------------------------------------------

declare -A R=()
declare -a DETAILS=() PROBLEMS=() FINDINGS=()
PEAK_RSS="?"

# kv LINE KEY: the value of KEY=... in a RESULT line.
kv() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }

# load_args KIND: the client's load arguments for a saturation or a fixed-rate run.
load_args() {
    if [[ $1 == saturation ]]; then
        echo "--count $COUNT --window $WINDOW"
    else
        echo "--rate $RATE --duration $DURATION"
    fi
}

# result TAG: the RESULT line of the client's output (dies without one).
result() {
    local line
    line=$(grep '^longconn-load: RESULT' "$WORK/$1.out" || true)
    [[ -n $line ]] || {
        cat "$WORK/$1.out" "$WORK/$1.err" >&2
        die "[$1] no result line from the client"
    }
    cp "$WORK/$1.out" "$OUT_DIR/longconn-$1.client.txt"
    echo "$line"
}

# run_longconn BACKEND KIND: the fake first (it prints its api_base), then the bridge.
run_longconn() {
    local backend=$1 kind=$2 tag=$1-longconn-$2 base _ line
    fresh_db "$backend" "$tag"
    log "[$tag] long connection, $(load_args "$kind")"
    # shellcheck disable=SC2046 # the load arguments are words
    timeout $((DURATION + 600)) "$LOAD" longconn $(load_args "$kind") --app-secret "$APP_SECRET" \
        --token "$TOKEN" --acked "$WORK/$tag.acked" --bridge-pid-file "$WORK/$tag.pid" \
        >"$WORK/$tag.out" 2>"$WORK/$tag.err" &
    CLIENT_PID=$!
    base=""
    for _ in $(seq 1 600); do
        base=$(sed -n 's/^longconn-load: api_base=//p' "$WORK/$tag.out")
        [[ -z $base ]] || break
        kill -0 "$CLIENT_PID" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n $base ]] || die "[$tag] the fake did not start: $(cat "$WORK/$tag.err")"
    start_bridge "$tag" websocket "$base"
    wait "$CLIENT_PID" || {
        CLIENT_PID=""
        cat "$WORK/$tag.err" >&2
        die "[$tag] the client failed"
    }
    CLIENT_PID=""
    line=$(result "$tag")
    stop_bridge "$tag"
    local strays
    strays=$(sed -n 's/.* strays=\([0-9]*\).*/\1/p' "$WORK/$tag.out")
    ((${strays:-1} == 0)) || PROBLEMS+=("$tag: ${strays:-?} frames from the bridge matched nothing the fake pushed")
    check "$tag" "$line"
}

# run_webhook BACKEND KIND: the bridge first, then the client posting to it.
run_webhook() {
    local backend=$1 kind=$2 tag=$1-webhook-$2 line
    fresh_db "$backend" "$tag"
    start_bridge "$tag" webhook "http://127.0.0.1:9"
    log "[$tag] event URL, $(load_args "$kind")"
    # shellcheck disable=SC2046 # the load arguments are words
    timeout $((DURATION + 600)) "$LOAD" webhook $(load_args "$kind") \
        --url "http://127.0.0.1:$PORT/webhook/bench/event" --encrypt-key "$ENCRYPT_KEY" \
        --token "$TOKEN" --acked "$WORK/$tag.acked" --bridge-pid-file "$WORK/$tag.pid" \
        >"$WORK/$tag.out" 2>"$WORK/$tag.err" &
    CLIENT_PID=$!
    wait "$CLIENT_PID" || {
        CLIENT_PID=""
        cat "$WORK/$tag.err" >&2
        die "[$tag] the client failed"
    }
    CLIENT_PID=""
    line=$(result "$tag")
    stop_bridge "$tag"
    check "$tag" "$line"
}

# check TAG LINE: every 200 stored, everything answered, everything observed; keeps the
# figures for the table.
check() {
    local tag=$1 line=$2 sent ok refused errors unanswered stored rows others
    sent=$(kv "$line" sent)
    ok=$(kv "$line" ok)
    refused=$(kv "$line" refused)
    errors=$(kv "$line" errors)
    unanswered=$(kv "$line" unanswered)
    stored=$(stored_acked "$WORK/$tag.acked")
    rows=$(sql 'SELECT count(*) FROM inbox_events')
    others=$(sql "SELECT count(*) FROM routing_verdicts WHERE verdict <> 'observed'")
    local observed
    observed=$(sql "SELECT count(*) FROM routing_verdicts WHERE verdict = 'observed'")
    [[ $stored == "$ok" ]] || PROBLEMS+=("$tag: $ok events acknowledged 200 but only $stored of them stored")
    ((rows <= sent)) || PROBLEMS+=("$tag: $rows rows for $sent events sent")
    ((unanswered == 0 && errors == 0)) ||
        PROBLEMS+=("$tag: $unanswered events never answered, $errors not sent (transport errors)")
    ((others == 0)) || PROBLEMS+=("$tag: $others events routed other than observed")
    ((refused == 0)) || FINDINGS+=("$tag: the bridge refused $refused events (500 / non-200)")
    local cpu per_event
    cpu=$(kv "$line" bridge_cpu_ms)
    per_event=$(awk -v c="$cpu" -v n="$ok" 'BEGIN { if (c != "?" && n > 0) printf "%.0f", c * 1000 / n; else print "?" }')
    R["$tag|eps"]=$(printf '%.0f' "$(kv "$line" ok_per_s)")
    R["$tag|lat"]="$(fmt_ms "$(kv "$line" p50_ms)") / $(fmt_ms "$(kv "$line" p99_ms)") / $(fmt_ms "$(kv "$line" max_ms)")"
    R["$tag|p50"]=$(kv "$line" p50_ms)
    R["$tag|p99"]=$(kv "$line" p99_ms)
    R["$tag|max"]=$(kv "$line" max_ms)
    R["$tag|cpu"]=$per_event
    local biz=""
    [[ $(kv "$line" biz_rt_p50_ms) == NaN ]] ||
        biz="; biz_rt p50 / p99 $(kv "$line" biz_rt_p50_ms) / $(kv "$line" biz_rt_p99_ms) ms"
    DETAILS+=("- $tag: $sent sent, $ok acknowledged 200 ($stored of them found in inbox_events, $rows rows in all), $refused refused, $unanswered unanswered; $(kv "$line" ok_per_s) events/s over $(kv "$line" duration_s) s; ack p50 / p99 / max $(kv "$line" p50_ms) / $(kv "$line" p99_ms) / $(kv "$line" max_ms) ms$biz; bridge CPU $cpu ms ($per_event µs/event), client CPU $(kv "$line" client_cpu_ms) ms; peak RSS $PEAK_RSS MiB; routed observed by the stop: $observed")
}

# fmt_ms MS: a latency for the table.
fmt_ms() {
    awk -v v="$1" 'BEGIN {
        if (v == "" || v == "NaN") print "?"
        else if (v >= 1000) printf "%.2f s", v / 1000
        else if (v >= 100) printf "%.0f ms", v
        else if (v >= 10) printf "%.1f ms", v
        else printf "%.2f ms", v
    }'
}

# ratio A B: A / B as "1.23×".
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && a != "?" && b + 0 > 0) printf "%.2f×", a / b; else print "?" }'; }

# --- main ----------------------------------------------------------------------------------

for tool in curl awk sed sqlite3 timeout; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done
[[ " $BACKENDS " != *" postgres "* ]] || command -v psql >/dev/null || die "psql is not installed"
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/longconn-*.server.log "$OUT_DIR"/longconn-*.client.txt

log "building release binaries"
cargo build --release --quiet --bin feishu-bridge --example longconn_load
BRIDGE=$TARGET_DIR/release/feishu-bridge
LOAD=$TARGET_DIR/release/examples/longconn_load
for b in "$BRIDGE" "$LOAD"; do
    [[ -x $b ]] || die "missing binary $b (is CARGO_TARGET_DIR set as for the build?)"
done

for backend in $BACKENDS; do
    run_longconn "$backend" saturation
    run_webhook "$backend" saturation
    run_longconn "$backend" rate
    run_webhook "$backend" rate
done

REVISION=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$(git -C "$ROOT" status --porcelain 2>/dev/null | awk '{ print $2 }' | paste -sd ' ' - || true)
CPU_MODEL=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MACHINE="$(nproc) CPUs (${CPU_MODEL:-unknown CPU}), $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r)"

label() { [[ $1 == sqlite ]] && echo SQLite || echo Postgres; }
{
    echo "## feishu-bridge: long connection vs event URL"
    echo
    echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $MACHINE; $(rustc -V 2>/dev/null || echo 'rustc ?')"
    echo "- Revision \`$REVISION\`${DIRTY:+ with uncommitted changes in: $DIRTY}"
    if [[ " $BACKENDS " == *" postgres "* ]]; then
        echo "- Postgres $(psql_admin -At -c 'SHOW server_version' 2>/dev/null || echo '?') on $PGHOST:$PGPORT (synchronous_commit = $(psql_admin -At -c 'SHOW synchronous_commit' 2>/dev/null || echo '?'))"
    fi
    echo "- Reproduce: \`$REPRODUCE\`"
    echo "- Bridge: release build, its own process, worker on, default settings, a fresh database per run; client: examples/longconn_load.rs on the same cores"
    echo "- Saturation: $COUNT distinct events, $WINDOW in flight (long connection: one connection, the next event pushed as each ACK arrives; webhook: $WINDOW kept-alive connections); fixed rate: $RATE events/s for ${DURATION} s, latency from each event's slot"
    echo "- Events: im.message.receive_v1 group replies not addressed to the bot (routed observed); pushed as plaintext frames over the long connection, POSTed encrypted and signed to the event URL"
    echo
    echo "| backend | way in | saturation events/s | saturation ack p50 / p99 / max | bridge CPU per event | $RATE/s ack p50 / p99 / max | $RATE/s reached |"
    echo "|---|---|---:|---:|---:|---:|---:|"
    for backend in $BACKENDS; do
        lc=$backend-longconn wh=$backend-webhook
        echo "| $(label "$backend") | long connection | ${R[$lc-saturation|eps]:-?} | ${R[$lc-saturation|lat]:-?} | ${R[$lc-saturation|cpu]:-?} µs | ${R[$lc-rate|lat]:-?} | ${R[$lc-rate|eps]:-?}/s |"
        echo "| $(label "$backend") | webhook | ${R[$wh-saturation|eps]:-?} | ${R[$wh-saturation|lat]:-?} | ${R[$wh-saturation|cpu]:-?} µs | ${R[$wh-rate|lat]:-?} | ${R[$wh-rate|eps]:-?}/s |"
        r=() k=""
        for k in p50 p99 max; do r+=("$(ratio "${R[$lc-saturation|$k]:-}" "${R[$wh-saturation|$k]:-}")"); done
        q=()
        for k in p50 p99 max; do q+=("$(ratio "${R[$lc-rate|$k]:-}" "${R[$wh-rate|$k]:-}")"); done
        echo "| $(label "$backend") | **long connection / webhook** | $(ratio "${R[$lc-saturation|eps]:-}" "${R[$wh-saturation|eps]:-}") | ${r[0]} / ${r[1]} / ${r[2]} | $(ratio "${R[$lc-saturation|cpu]:-}" "${R[$wh-saturation|cpu]:-}") | ${q[0]} / ${q[1]} / ${q[2]} | $(ratio "${R[$lc-rate|eps]:-}" "${R[$wh-rate|eps]:-}") |"
    done
    echo
    echo "Bridge CPU per event: the bridge process's user + system time during the saturation run (ingress and the worker routing what arrived) over the events acknowledged. Ratios above 1× in events/s, below 1× in latency and CPU favour the long connection."
    echo
    echo "Details:"
    echo
    printf '%s\n' "${DETAILS[@]}"
    if ((${#FINDINGS[@]} > 0)); then
        echo
        echo "Findings (what the service did under this load; the figures stand):"
        echo
        printf -- '- %s\n' "${FINDINGS[@]}"
    fi
    if ((${#PROBLEMS[@]} > 0)); then
        echo
        echo "Problems (this run's figures are not valid):"
        echo
        printf -- '- %s\n' "${PROBLEMS[@]}"
    fi
} | tee "$OUT_DIR/longconn.md"
log "written to bench/out/longconn.md (client output and server logs beside it)"
if ((${#PROBLEMS[@]} > 0)); then
    printf 'longconn.sh: PROBLEM: %s\n' "${PROBLEMS[@]}" >&2
    exit 1
fi
