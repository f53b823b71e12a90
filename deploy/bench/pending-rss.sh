#!/usr/bin/env bash
# Resident memory under large pending intents (issue 13): starts `switchboard
# serve` on a broker with a route to an agent that does not answer, produces
# PRSS_COUNT intents of about 1 MB each at once, samples the process's VmRSS
# and VmHWM and the /metrics figures every second for PRSS_SECONDS, then
# (PRSS_DRAIN=1) starts an echo agent and checks that every intent gets
# exactly one result on the results topic (read_committed): nothing lost,
# nothing doubled.
#
#   deploy/bench/pending-rss.sh BINARY LABEL [ROUTER_KEYS]
#
# ROUTER_KEYS are added to the config's router mapping, e.g.
# 'memory_limit_bytes: 312475648'.
# Environment (defaults in brackets): PRSS_BOOTSTRAP [127.0.0.1:9092],
# PRSS_OUT [/tmp/pending-rss], PRSS_HTTP [127.0.0.1:19100], PRSS_COUNT [1000],
# PRSS_SIZE [999940: the payload's string, a 1,000,004-byte record],
# PRSS_SECONDS [60], PRSS_IDLE [10: seconds idle before the baseline],
# PRSS_DRAIN [1], PRSS_DRAIN_TIMEOUT [900 s], PRSS_DELIVERY [exactly_once].
# Needs kcat, curl, awk and python3. Each run uses topics of its own (prss-LABEL-…)
# and deletes them at the end with deploy/kafka/kafka.sh (set KAFKA_PORT for it).
#
# Output: OUT/LABEL/{samples.tsv, summary.txt, serve.log, agent.log}, and one
# line on stdout: label, idle RSS, RSS at the end, VmHWM, pending, the
# process budget serve logged, and (with the drain) results, distinct ids and
# VmHWM once the answers have flowed back.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 BINARY LABEL [ROUTER_KEYS]" >&2; exit 2; }
bin=$(realpath "$1") label=$2 extra=${3:-}
bootstrap=${PRSS_BOOTSTRAP:-127.0.0.1:9092}
outroot=${PRSS_OUT:-/tmp/pending-rss}
listen=${PRSS_HTTP:-127.0.0.1:19100}
count=${PRSS_COUNT:-1000}
size=${PRSS_SIZE:-999940}
seconds=${PRSS_SECONDS:-60}
idle=${PRSS_IDLE:-10}
drain=${PRSS_DRAIN:-1}
drain_timeout=${PRSS_DRAIN_TIMEOUT:-900}
delivery=${PRSS_DELIVERY:-exactly_once}
here=$(cd "$(dirname "$0")" && pwd)
out=$outroot/$label
mkdir -p "$out"
p=prss-$label-$(date +%s)

# The intents: one file per count and size, kept for the next run.
intents=$outroot/intents-$count-$size.txt
if [[ ! -s $intents ]]; then
	python3 -c "import sys
b='x'*$size
for i in range($count): sys.stdout.write(f'r-{i:04d}\t{{\"intent_id\":\"r-{i:04d}\",\"intent_type\":\"big\",\"payload\":{{\"blob\":\"{b}\"}}}}\n')" >"$intents.tmp"
	mv "$intents.tmp" "$intents"
fi

cat >"$out/config.yaml" <<EOF
kafka:
  bootstrap_servers: $bootstrap
  group_id: $p
  properties: {message.max.bytes: "1100000"}
topics:
  requests: $p.request
  responses: $p.response
  timeouts: $p.timeout
  results: $p.result
  dead_letter: $p.dlq
  pending: $p.pending
  fallback_cache: $p.fallback
  context_snapshots: $p.contexts
  progress: $p.progress
  partitions: 6
  max_message_bytes: 1100000
  auto_create: true
agents:
  slow: {topic: $p.agent.slow, group_id: $p-agent-slow}
intents:
  big: {agent: slow, timeout: 30m, max_timeout: 1h}
router: {delivery: $delivery${extra:+, $extra}}
http:
  listen: $listen
  auth: {mode: "off"}
EOF

pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [[ ${PRSS_KEEP_TOPICS:-0} != 1 ]]; then
		"$here/../kafka/kafka.sh" topics --delete --topic "$p.*" >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

metric() { # metric NAME: the value of an unlabelled sample in the last scrape
	awk -v n="$1" '$1 == n {print $2; exit}' "$out/metrics.txt"
}
status() { # status FIELD: kB from /proc/PID/status
	awk -v f="$1:" '$1 == f {print $2; exit}' "/proc/$serve/status"
}
scrape() { curl -fsS "http://$listen/metrics" >"$out/metrics.txt" 2>/dev/null || : >"$out/metrics.txt"; }

"$bin" serve --insecure-no-auth --config "$out/config.yaml" >"$out/serve.log" 2>&1 &
serve=$!
pids+=("$serve")
for _ in $(seq 1 120); do
	curl -fsS "http://$listen/readyz" >/dev/null 2>&1 && break
	kill -0 "$serve" || { echo "pending-rss: serve exited (see $out/serve.log)" >&2; exit 1; }
	sleep 1
done
curl -fsS "http://$listen/readyz" >/dev/null
sleep "$idle"
scrape
idle_rss=$(status VmRSS)
idle_heap=$(metric go_memstats_heap_inuse_bytes)
budget=$(grep -o 'process_budget_mib=[0-9]*' "$out/serve.log" | head -1 | cut -d= -f2 || true)
goal=$(grep -o 'limit_mib=[0-9]*' "$out/serve.log" | head -1 | cut -d= -f2 || true)

kcat -P -b "$bootstrap" -t "$p.request" -K $'\t' -X message.max.bytes=1100000 -X partitioner=murmur2_random -l "$intents"

printf 't\tvmrss_kib\tvmhwm_kib\tpending\tpending_bytes\tfetch_paused\theap_inuse_bytes\n' >"$out/samples.tsv"
for t in $(seq 1 "$seconds"); do
	sleep 1
	scrape
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$(status VmRSS)" "$(status VmHWM)" "$(metric switchboard_intents_pending)" \
		"$(metric switchboard_intents_pending_bytes)" "$(metric switchboard_fetch_paused)" "$(metric go_memstats_heap_inuse_bytes)" >>"$out/samples.tsv"
done
IFS=$'\t' read -r _ rss hwm pending pbytes paused heap < <(tail -1 "$out/samples.tsv")
maxrss=$(awk 'NR > 1 && $2 > m {m = $2} END {print m}' "$out/samples.tsv")

# Prometheus writes large values as 6.479872e+07: awk reads them.
line=$(awk -v l="$label" -v ir="$idle_rss" -v ih="${idle_heap:-0}" -v r="$rss" -v mr="$maxrss" -v w="$hwm" -v p="${pending:-0}" \
	-v pb="${pbytes:-0}" -v pz="${paused:-0}" -v h="${heap:-0}" -v b="${budget:-none}" -v g="${goal:-?}" -v ld="$(cut -d' ' -f1 /proc/loadavg)" \
	'BEGIN {printf "%s idle_rss_mib=%.1f idle_heap_inuse_mb=%.1f rss_mib=%.1f max_sampled_rss_mib=%.1f vmhwm_mib=%.1f pending=%d pending_mb=%.1f paused=%d heap_inuse_mb=%.1f process_budget_mib=%s go_limit_mib=%s load1=%s",
		l, ir/1024, ih/1e6, r/1024, mr/1024, w/1024, p, pb/1e6, pz, h/1e6, b, g, ld}')

if [[ $drain == 1 ]]; then
	# Every result record's key, read_committed, from the start.
	kcat -C -u -b "$bootstrap" -t "$p.result" -o beginning -f '%k\n' -X isolation.level=read_committed -q >"$out/result-keys.txt" 2>/dev/null &
	pids+=("$!")
	"$bin" agent --config "$out/config.yaml" --name slow --concurrency 16 >"$out/agent.log" 2>&1 &
	pids+=("$!")
	start=$(date +%s)
	distinct=0
	while (($(date +%s) - start < drain_timeout)); do
		sleep 5
		distinct=$(sort -u "$out/result-keys.txt" | grep -c . || true)
		((distinct >= count)) && break
	done
	sleep 5 # a doubled result would come after the last first one
	results=$(grep -c . "$out/result-keys.txt" || true)
	distinct=$(sort -u "$out/result-keys.txt" | grep -c . || true)
	scrape
	answered=$(awk '/^switchboard_intents_resolved_total/ && /outcome="answered"/ {s += $2} END {print s + 0}' "$out/metrics.txt")
	dhwm=$(status VmHWM)
	line+=" results=$results distinct_ids=$distinct answered=$answered drain_s=$(($(date +%s) - start)) vmhwm_after_drain_mib=$((dhwm / 1024))"
fi
echo "$line" | tee "$out/summary.txt"
