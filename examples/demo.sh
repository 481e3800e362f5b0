#!/bin/sh
# The demos without a Feishu app, each in one command that starts what it needs, shows
# what happened and stops what it started (also on Ctrl-C):
#
#   sh examples/demo.sh            # two bots share a thread (examples/demo.toml)
#   sh examples/demo.sh agents     # the same with a webhook agent and a streaming model
#   sh examples/demo.sh day        # a group's day: the batched feed and the daily digest
#   sh examples/demo.sh progress   # a webhook agent that streams, runs tools and asks
#   sh examples/demo.sh handoff    # the planner's answer hands the work to the coder
#
# It builds what the demo needs: the bridge with `cargo build --release --bin
# feishu-bridge` (the build `cargo run --release` makes, without the dev-dependencies, so
# after the quick start it builds nothing), and for `agents`, `day` and `handoff` the local agent,
# an example, which Cargo builds with the dev-dependencies: in the debug profile, which
# `cargo test` has already built. It runs in a temporary directory (a fresh database
# each time; the directory is kept for a look afterwards, and the last line says how to
# explain from it with the bridge stopped), and uses ports 8080 (the bridge) and 9000
# (the local agent) unless PORT / AGENT_PORT say others.
set -eu

demo="${1:-two-bots}"
port="${PORT:-8080}"
agent_port="${AGENT_PORT:-9000}"
root=$(cd "$(dirname "$0")/.." && pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

case "$demo" in
  two-bots) config=demo.toml scenario=scenario.toml agent=no ;;
  agents) config=agents.toml scenario=scenario.toml agent=yes ;;
  day) config=feed.toml scenario=feed_scenario.toml agent=yes ;;
  progress) config=progress.toml scenario=progress_scenario.toml agent=yes ;;
  handoff) config=handoff.toml scenario=handoff_scenario.toml agent=yes ;;
  *) echo "usage: sh examples/demo.sh [two-bots|agents|day|progress|handoff]" >&2; exit 2 ;;
esac

for p in "$port" "$agent_port"; do
  if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$p/"; then
    echo "port $p is in use (an earlier demo still running?): stop it, or set PORT / AGENT_PORT" >&2
    exit 1
  fi
done

# Cargo prints one line when the build is fresh, and its progress when it is not.
bin="$target/release/feishu-bridge"
if [ -x "$bin" ]; then
  echo "checking the bridge is built (cargo build --release --bin feishu-bridge)…"
else
  echo "building the bridge (cargo build --release --bin feishu-bridge): the first build takes minutes (about 7 on two cores) and about 1 GB of target/…"
fi
(cd "$root" && cargo build --release --bin feishu-bridge)
agent_name=local_agent
[ "$demo" = progress ] && agent_name=progress_agent
if [ "$agent" = yes ]; then
  agent_bin="$target/debug/examples/$agent_name"
  if [ -x "$agent_bin" ]; then
    echo "checking the $agent_name example is built (cargo build --example $agent_name)…"
  else
    echo "building the $agent_name example (cargo build --example $agent_name): an example, so Cargo builds the dev-dependencies too; after \`cargo test\` nothing, else a few minutes…"
  fi
  (cd "$root" && cargo build --example "$agent_name")
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/feishu-bridge-demo.XXXXXX")
pids=""
ran=""
stop() {
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  for pid in $pids; do wait "$pid" 2>/dev/null || true; done
  echo "stopped; its files (database, config, logs, digest) are in $work"
  if [ "$demo" = two-bots ] && [ -n "$ran" ]; then
    echo "what the coder saw, again, from the database (no bridge needed):"
    echo "  $bin --config $work/config.toml explain om_demo_root --profile coder --verbose"
  fi
}
trap stop EXIT
trap 'exit 130' INT TERM

# The example config with this run's ports, in $work: its database is read from the
# config file's directory, and the digest directory from the working directory, $work.
# The day demo runs its digest by hand (POST /digests/run); its daily schedule is moved
# out of the way, to the next hour (UTC), so that a start inside the example's window
# (04:10-08:00) does not run the day's digest before the demo's messages arrive.
next=$(date -u -d '+1 hour' +%H)
sed -e "s/127.0.0.1:8080/127.0.0.1:$port/" -e "s/127.0.0.1:9000/127.0.0.1:$agent_port/" \
  -e "s/^at = \"04:10\"/at = \"$next:00\"/" -e "s/^window_end = \"08:00\"/window_end = \"$next:30\"/" \
  "$root/examples/$config" > "$work/config.toml"
cd "$work"

wait_for() {
  i=0
  until curl -s -o /dev/null --max-time 1 "$1"; do
    i=$((i + 1))
    if [ "$i" -gt 100 ]; then echo "$2 did not start; see $work/*.log" >&2; exit 1; fi
    sleep 0.1
  done
}

if [ "$agent" = yes ]; then
  LOCAL_AGENT_LISTEN="127.0.0.1:$agent_port" PROGRESS_AGENT_LISTEN="127.0.0.1:$agent_port" \
    PROGRESS_AGENT_BRIDGE="http://127.0.0.1:$port" "$agent_bin" > agent.log 2>&1 &
  pids="$pids $!"
  wait_for "http://127.0.0.1:$agent_port/" "the local agent"
fi
FEISHU_BRIDGE_DIGEST_API_KEY=demo-key "$bin" --config config.toml serve > bridge.log 2>&1 &
pids="$pids $!"
wait_for "http://127.0.0.1:$port/healthz" "the bridge"

admin='Authorization: Bearer demo-admin-token'
"$bin" --config config.toml simulate --scenario "$root/examples/$scenario"
ran=yes

case "$demo" in
  two-bots)
    echo "== what the coder saw (GET /explain/om_demo_root?profile=coder)"
    curl -s -H "$admin" -H 'Accept: text/plain' \
      "http://127.0.0.1:$port/explain/om_demo_root?profile=coder&verbose=true"
    ;;
  agents)
    echo "== the turns (GET /turns)"
    curl -s -H "$admin" "http://127.0.0.1:$port/turns"
    echo
    ;;
  day)
    echo "== the chat's feed, its senders named (GET /feed?profile=planner&session_key=chat:oc_demo_feed)"
    curl -s -H "$admin" "http://127.0.0.1:$port/feed?profile=planner&session_key=chat:oc_demo_feed"
    echo
    echo "== the daily digest (POST /digests/run), then the file it wrote"
    curl -s -X POST -H "$admin" "http://127.0.0.1:$port/digests/run" > digest.json
    cat feishu-bridge-demo-digest/digest/*.md
    echo "== the next morning, asked again in the thread: the summary is carried over"
    "$bin" --config config.toml simulate --scenario "$root/examples/feed_next_day.toml"
    ;;
  progress)
    # The question waits 3 s for a press that never comes; the turn ends after it.
    i=0
    until curl -s -H "$admin" "http://127.0.0.1:$port/turns" | grep -Eq '"state":"(succeeded|failed|cancelled)"'; do
      i=$((i + 1))
      if [ "$i" -gt 300 ]; then echo "the turn did not end; see $work/*.log" >&2; exit 1; fi
      sleep 0.1
    done
    # The working reaction goes when the answer is posted: give it a moment.
    i=0
    until curl -s "http://127.0.0.1:$agent_port/demo/cards" | grep -q "removed from"; do
      i=$((i + 1))
      [ "$i" -gt 50 ] && break
      sleep 0.1
    done
    echo "== the card updates the stand-in Open API received (GET :$agent_port/demo/cards)"
    curl -s "http://127.0.0.1:$agent_port/demo/cards"
    echo "== the turn, its events and its question (GET /turns)"
    curl -s -H "$admin" "http://127.0.0.1:$port/turns?verbose=true"
    echo
    ;;
  handoff)
    # The coder's turn is queued when the planner's answer is recorded: wait for its end.
    i=0
    until curl -s -H "$admin" "http://127.0.0.1:$port/turns?profile=coder" | grep -Eq '"state":"(succeeded|failed|cancelled)"'; do
      i=$((i + 1))
      if [ "$i" -gt 300 ]; then echo "the coder's turn did not end; see $work/*.log" >&2; exit 1; fi
      sleep 0.1
    done
    echo "== the turns: the planner's, then the coder's in the same chain (GET /turns)"
    curl -s -H "$admin" "http://127.0.0.1:$port/turns"
    echo
    echo "== why the coder ran and what it saw (GET /explain/om_handoff_root?profile=coder)"
    curl -s -H "$admin" -H 'Accept: text/plain' \
      "http://127.0.0.1:$port/explain/om_handoff_root?profile=coder"
    echo "== the handoffs counted (GET /metrics)"
    curl -s "http://127.0.0.1:$port/metrics" | grep '^feishu_bridge_handoffs_total'
    ;;
esac
