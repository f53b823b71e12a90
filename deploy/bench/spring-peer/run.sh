#!/usr/bin/env bash
# Switchboard against Spring for Apache Kafka's ReplyingKafkaTemplate, side by
# side on one Apache Kafka broker, driven by one Java open-loop load generator
# (LoadGen.java). `make peer-bench` runs it; it is not part of `make check`.
#
# For Spring: a plain replier (Replier.java) answering at once, two hops.
# For Switchboard: `switchboard serve` (the router, each delivery guarantee in
# PEER_DELIVERIES) and `switchboard agent` answering at once, four hops.
# For each system it runs a step-up (the knee: the last rate whose p99, as the
# generator observed it, stayed under PEER_MAX_P99_MS) and fixed rates
# (PEER_EQUAL_RATES) for p50/p99 at equal rates, and prints CPU per answered
# request from /proc (broker, the system's processes, the generator).
#
# Environment (defaults in brackets):
#   KAFKA_BOOTSTRAP     a running broker; unset: deploy/kafka/kafka.sh starts one on
#                       KAFKA_PORT [9092] (KAFKA_CONTROLLER_PORT, SWITCHBOARD_KAFKA_DIR
#                       as kafka.sh reads them) and stops it at the end
#   PEER_RATES          step-up rates [1000,2000,3000,4000,6000,8000,10000,12000,15000,20000,25000,30000,40000]
#   PEER_STEP_SECONDS   seconds per step [10]
#   PEER_MAX_P99_MS     a step holds while its p99 is at most this [500]
#   PEER_EQUAL_RATES    fixed rates for the side-by-side latencies [200,1000]
#   PEER_SYSTEMS        what to run, in order: spring, spring_exactly_once (the
#                       replier in Kafka transactions, one per poll, replies read
#                       read_committed) and Switchboard's delivery guarantees
#                       [spring exactly_once at_least_once]; one at a time
#                       into the same PEER_OUT splits a long run (the summary lists
#                       every system with results there, with when each ran)
#   PEER_DELIVERIES     (older name) Switchboard's guarantees, spring kept first
#   PEER_HTTP_PORT      the port 'switchboard serve' listens on [18480]
#   PEER_PARTITIONS     partitions of every topic [6]
#   PEER_OUT            where the raw step lines go [deploy/bench/spring-peer/target/results]
#   PEER_BUILD          no: run what the last run built in target/ (rounds of an A/B
#                       without a build's CPU before each) [yes]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
peer=$root/deploy/bench/spring-peer
cd "$root"

rates=${PEER_RATES:-1000,2000,3000,4000,6000,8000,10000,12000,15000,20000,25000,30000,40000}
step_s=${PEER_STEP_SECONDS:-10}
max_p99=${PEER_MAX_P99_MS:-500}
equal=${PEER_EQUAL_RATES:-200,1000}
systems=${PEER_SYSTEMS:-spring ${PEER_DELIVERIES:-exactly_once at_least_once}}
for s in $systems; do
	case $s in
	spring | spring_exactly_once | exactly_once | at_least_once) ;;
	*)
		echo "peer-bench: PEER_SYSTEMS: unknown system \"$s\" (want spring, spring_exactly_once, exactly_once, at_least_once)" >&2
		exit 2
		;;
	esac
done
http_port=${PEER_HTTP_PORT:-18480}
partitions=${PEER_PARTITIONS:-6}
out=${PEER_OUT:-$peer/target/results}
mkdir -p "$out"

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	if [[ -n ${started_broker:-} ]]; then
		deploy/kafka/kafka.sh down >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

if [[ -z ${KAFKA_BOOTSTRAP:-} ]]; then
	rc=0
	deploy/kafka/kafka.sh status >/dev/null 2>&1 || rc=$?
	if [[ $rc == 3 ]]; then
		started_broker=1
	fi
	deploy/kafka/kafka.sh up >/dev/null
	KAFKA_BOOTSTRAP=127.0.0.1:${KAFKA_PORT:-9092}
fi
echo "peer-bench: $systems on broker $KAFKA_BOOTSTRAP; step-up $rates (${step_s}s steps, p99 ≤ ${max_p99} ms); equal rates $equal"

# The broker's pid, for its CPU: the process listening on the bootstrap port.
port=${KAFKA_BOOTSTRAP##*:}
broker_pid=$(ss -ltnpH "sport = :$port" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
cpu_broker=${broker_pid:+broker=$broker_pid}

if [[ ${PEER_BUILD:-yes} == no && -f $peer/target/classpath.txt && -x $peer/target/switchboard ]]; then
	echo "peer-bench: PEER_BUILD=no: the peer and switchboard as last built in $peer/target"
else
	echo "peer-bench: building the peer (mvn) and switchboard (go build)"
	mvn -B -q -ntp -f "$peer/pom.xml" compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt
	go build -o "$peer/target/switchboard" ./cmd/switchboard
fi
sb=$peer/target/switchboard
cp="$peer/target/classes:$(cat "$peer/target/classpath.txt")"
java=(java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$cp")

# loadgen NAME ARGS...: runs the generator, its step lines to $out/NAME.txt.
loadgen() {
	local name=$1
	shift
	"${java[@]}" io.switchboard.peer.LoadGen --bootstrap "$KAFKA_BOOTSTRAP" --step-seconds "$step_s" \
		--max-p99-ms "$max_p99" "$@" | tee "$out/$name.txt" | sed "s/^/  $name: /"
}

# stop PID: stops one process this script started.
stop() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# run_spring [transactional]: the peer, its replier plain or in transactions.
run_spring() {
	local tx=${1:-} id t name=spring read=()
	id=$(date +%s)
	t=peer.$id.spring
	if [[ -n $tx ]]; then
		name=spring_exactly_once
		read=(--isolation read_committed)
	fi
	echo "peer-bench: $name (ReplyingKafkaTemplate, ${tx:-plain} replier), topics $t.*"
	"${java[@]}" io.switchboard.peer.LoadGen --bootstrap "$KAFKA_BOOTSTRAP" --mode spring --rates 1 --step-seconds 1 \
		--request-topic "$t.request" --reply-topic "$t.reply" --create-topics "$t.request,$t.reply" \
		--partitions "$partitions" >/dev/null # creates the topics (its one request has no replier yet)
	"${java[@]}" io.switchboard.peer.Replier "$KAFKA_BOOTSTRAP" "$t.request" "$t.replier" ${tx:+"$tx"} >"$out/$name-replier.log" 2>&1 &
	local replier=$!
	pids+=("$replier")
	local args=(--mode spring "${read[@]}" --request-topic "$t.request" --reply-topic "$t.reply" --cpu "${cpu_broker:+$cpu_broker,}system=$replier")
	loadgen "$name-stepup" "${args[@]}" --step-up true --rates "$rates"
	loadgen "$name-equal" "${args[@]}" --rates "$equal"
	stop "$replier"
}

run_switchboard() {
	local delivery=$1 id t cfg
	id=$(date +%s)
	t=peer.$id.sb
	cfg=$out/switchboard-$delivery.yaml
	cat >"$cfg" <<-EOF
		kafka:
		  bootstrap_servers: $KAFKA_BOOTSTRAP
		  group_id: $t.router
		topics:
		  requests: $t.intent.request
		  responses: $t.agent.response
		  results: $t.intent.result
		  timeouts: $t.intent.timeout
		  progress: $t.intent.progress
		  dead_letter: $t.intent.dlq
		  pending: $t.router.pending
		  fallback_cache: $t.fallback.cache
		  context_snapshots: $t.context.snapshot
		  partitions: $partitions
		agents:
		  peer: {topic: $t.agent.peer.request}
		intents:
		  peer: {agent: peer, timeout: 5s}
		router:
		  delivery: $delivery
		  max_pending: 100000
		http:
		  listen: 127.0.0.1:$http_port
		  auth: {mode: "off"}
		log:
		  level: warn
	EOF
	echo "peer-bench: switchboard ($delivery), topics $t.*"
	"$sb" topics create --config "$cfg" >/dev/null
	"$sb" serve --config "$cfg" --insecure-no-auth >"$out/switchboard-$delivery-serve.log" 2>&1 &
	local serve=$!
	pids+=("$serve")
	"$sb" agent --config "$cfg" --name peer --concurrency 4096 >"$out/switchboard-$delivery-agent.log" 2>&1 &
	local agent=$!
	pids+=("$agent")
	local _
	for _ in $(seq 1 120); do
		curl -sf "http://127.0.0.1:$http_port/readyz" >/dev/null 2>&1 && break
		sleep 0.5
	done
	local args=(--mode switchboard --request-topic "$t.intent.request" --results-topic "$t.intent.result" --intent-type peer
		--cpu "${cpu_broker:+$cpu_broker,}system=$serve,agent=$agent")
	loadgen "switchboard-$delivery-stepup" "${args[@]}" --step-up true --rates "$rates"
	loadgen "switchboard-$delivery-equal" "${args[@]}" --rates "$equal"
	stop "$agent"
	stop "$serve"
}

for s in $systems; do
	if [[ $s == spring ]]; then
		run_spring
	elif [[ $s == spring_exactly_once ]]; then
		run_spring transactional
	else
		run_switchboard "$s"
	fi
done

# The summary: one row per system with results in $out (this run's and any
# earlier run's into the same PEER_OUT: the "at" column says when each ran).
echo
printf '%-34s %-17s %8s' system at knee/s
IFS=, read -r -a eq <<<"$equal"
for r in "${eq[@]}"; do
	printf ' %10s %10s' "p50@$r" "p99@$r"
done
printf '   %s\n' "CPU µs per answered request at ${eq[-1]}/s (broker, system, generator)"
summary() {
	local name=$1 file=$2
	[[ -f $out/$file-stepup.txt && -f $out/$file-equal.txt ]] || return 0
	printf '%-34s %-17s %8s' "$name" "$(date -u -r "$out/$file-equal.txt" '+%Y-%m-%d %H:%M')" \
		"$(sed -n 's/^knee .*rate=\([0-9]*\) bound=lower.*/≥\1/p; t; s/^knee .*rate=\([0-9]*\).*/\1/p' "$out/$file-stepup.txt")"
	for r in "${eq[@]}"; do
		printf ' %10s %10s' \
			"$(awk -v r="$r" '$1=="step" && $3=="rate="r {for(i=1;i<=NF;i++) if ($i ~ /^p50_ms=/) {sub("p50_ms=","",$i); print $i}}' "$out/$file-equal.txt")" \
			"$(awk -v r="$r" '$1=="step" && $3=="rate="r {for(i=1;i<=NF;i++) if ($i ~ /^p99_ms=/) {sub("p99_ms=","",$i); print $i}}' "$out/$file-equal.txt")"
	done
	printf '   %s\n' "$(awk -v r="${eq[-1]}" '$1=="step" && $3=="rate="r {s=""; for(i=1;i<=NF;i++) if ($i ~ /^cpu_us\./) {sub("cpu_us.","",$i); s=s" "$i}; print s}' "$out/$file-equal.txt")"
}
summary "spring (2 hops)" spring
summary "spring exactly_once (2 hops)" spring_exactly_once
for d in exactly_once at_least_once; do
	summary "switchboard $d (4 hops)" "switchboard-$d"
done
echo "(latencies in ms as the generator observed them; ≥: every step held, the knee is above PEER_RATES' last; raw step lines in $out)"
