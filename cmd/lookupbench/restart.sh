#!/usr/bin/env bash
# restart.sh SIZE PORT N [RESTARTS] [LOOKUPS]: start 'switchboard serve
# --config serve-SIZE.yaml' (whose http.lookup.dir holds a store filled
# with the N results of its topic) RESTARTS times (default 5), stopping it
# before the next, and time each start in phases from the moment the
# process is started: its first log line, "switchboard serving" (the node
# built), the lookup store caught up (those three from the log's own
# timestamps), /readyz 200 (polled every 20 ms). The last start stays up
# for LOOKUPS hits and as many misses through HTTP (default 100,000; 0:
# none) and SAMPLES memory samples 2 s apart (default 5; 'lookupbench
# mem': the RSS, split into Go's heap arenas, other anonymous memory and
# files, and Go's heap in use), then is stopped. With EXTRA set, EXTRA more
# results (redeliveries of existing ids: the store still holds N intents)
# are written to the topic before the last start, for the store to read.
# Run it where the configs are, with switchboard and lookupbench on PATH;
# BOOTSTRAP names the broker (default 127.0.0.1:59092). See BENCHMARKS.md
# (issue 17).
set -euo pipefail
size=$1 port=$2 n=$3 restarts=${4:-5} lookups=${5:-100000}
samples=${SAMPLES:-5} extra=${EXTRA:-0} bootstrap=${BOOTSTRAP:-127.0.0.1:59092}
pid=
trap '[[ -z $pid ]] || kill -TERM "$pid" 2>/dev/null || true' EXIT # a failed step leaves no serve behind

# at LOG PATTERN: the time (seconds since the epoch) of the first line of
# LOG that matches PATTERN, from its time= field.
at() {
	local t
	t=$(grep -m1 -e "$2" "$1" | grep -o '^time=[^ ]*' | cut -d= -f2)
	[[ -n $t ]] && date -d "$t" +%s.%N
}
since() { echo "scale=2; ($1 - $2) / 1" | bc; }

for run in $(seq 1 "$restarts"); do
	if ((run == restarts && extra > 0)); then
		lookupbench produce --bootstrap "$bootstrap" --topic "bench$size.result" --n "$extra" | sed 's/^/  /'
	fi
	log="serve-$size-r$run.log"
	t0=$(date +%s.%N)
	switchboard serve --config "serve-$size.yaml" --insecure-no-auth --instance-id "bench$size" >"$log" 2>&1 &
	pid=$!
	until curl -sf "127.0.0.1:$port/readyz" >/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "serve exited:" >&2
			tail -5 "$log" >&2
			exit 1
		fi
		sleep 0.02
	done
	ready=$(date +%s.%N)
	for _ in 1 2 3 4 5; do # the line may trail the readiness it reports by a moment
		grep -q 'lookup store caught up' "$log" && break
		sleep 0.1
	done
	first=$(at "$log" '^time=') serving=$(at "$log" 'msg="switchboard serving"') store=$(at "$log" 'lookup store caught up')
	echo "size=$size restart=$run first_log=$(since "$first" "$t0")s serving=$(since "$serving" "$t0")s" \
		"store_caught_up=$(since "$store" "$t0")s ready=$(since "$ready" "$t0")s" \
		"store: $(grep -m1 -o 'records_read=[0-9]* .*' "$log")"
	if ((run == restarts)); then
		if ((lookups > 0)); then
			lookupbench get --url "http://127.0.0.1:$port" --n "$n" --lookups "$lookups" --workers 8
		fi
		for s in $(seq 1 "$samples"); do
			sleep 2
			echo "size=$size sample=$s $(lookupbench mem --pid "$pid" --url "http://127.0.0.1:$port")"
		done
	fi
	kill -TERM "$pid"
	wait "$pid" || true
	pid=
done
