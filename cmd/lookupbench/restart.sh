#!/usr/bin/env bash
# restart.sh SIZE PORT N [EXTRA]: restart 'switchboard serve --config
# serve-SIZE.yaml' (whose http.lookup.dir holds a filled store of N results)
# three times, twice with nothing new and once after EXTRA more results
# (default 100,000, at most N: redeliveries of existing ids, so the store
# still holds N intents) were written to the topic (the store resumes and
# reads them); print the time from process
# start to /readyz 200 and the store's own catch-up; then look up through
# HTTP and print the instance's RSS. Run it where the configs are, with
# switchboard and lookupbench on PATH; BOOTSTRAP names the broker (default
# 127.0.0.1:59092). See BENCHMARKS.md (issue 17).
set -euo pipefail
size=$1 port=$2 n=$3 extra=${4:-100000} bootstrap=${BOOTSTRAP:-127.0.0.1:59092}
if ((extra > n)); then extra=$n; fi
pid=
trap '[[ -z $pid ]] || kill -TERM "$pid" 2>/dev/null || true' EXIT # a failed step leaves no serve behind
for run in 1 2 3; do
	if [[ $run == 3 ]]; then
		lookupbench produce --bootstrap "$bootstrap" --topic "bench$size.result" --n "$extra" | sed 's/^/  /'
	fi
	t0=$(date +%s.%N)
	switchboard serve --config "serve-$size.yaml" --insecure-no-auth --instance-id "bench$size" >"serve-$size-r$run.log" 2>&1 &
	pid=$!
	until curl -sf "127.0.0.1:$port/readyz" >/dev/null; do sleep 0.02; done
	t1=$(date +%s.%N)
	echo "size=$size restart=$run ready_after=$(echo "$t1 - $t0" | bc)s store: $(grep -o 'lookup store caught up.*' "serve-$size-r$run.log" | grep -o 'records_read=[0-9]* .*')"
	if [[ $run == 3 ]]; then
		lookupbench get --url "http://127.0.0.1:$port" --n "$n" --lookups 100000 --workers 8
		echo "size=$size rss: $(grep -E 'VmRSS|VmHWM' "/proc/$pid/status" | tr -s ' \n' ' ')"
		echo "size=$size go: $(curl -sf "127.0.0.1:$port/metrics" | grep -E '^go_memstats_(heap_inuse|sys)_bytes ' | tr '\n' ' ')"
	fi
	kill -TERM "$pid"
	wait "$pid" || true
	pid=
done
