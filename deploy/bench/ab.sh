#!/usr/bin/env bash
# Interleaved A/B of two switchboard binaries with `switchboard bench`: for
# each round, each delivery guarantee and each rate, the old binary then the
# new one, each run's observed end-to-end p50/p99 and broker requests per
# intent written as benchmark lines for benchstat:
#
#   deploy/bench/ab.sh OLD_BINARY NEW_BINARY OUT_DIR
#   benchstat OUT_DIR/old.txt OUT_DIR/new.txt
#
# Environment (defaults in brackets): AB_ROUNDS [5], AB_RATES [200 1000],
# AB_DELIVERIES [at_least_once exactly_once], AB_DURATION [10s],
# AB_BENCH_ARGS (e.g. --brokers 127.0.0.1:9092 or --config FILE) [--brokers 127.0.0.1:9092].
# Each run's JSON report stays in OUT_DIR; each benchmark line also carries
# the host's 1-minute load average when the run started (load1): on a
# shared host, say so next to the figures. A binary whose bench reports it
# adds p99-after-2s-ms: the p99 of the intents sent from 2 s into the load,
# after the start-up seconds that can set a short run's p99 (the run's
# per_second series in its JSON shows them).
set -euo pipefail
[[ $# == 3 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY OUT_DIR" >&2; exit 2; }
old=$1 new=$2 out=$3
rounds=${AB_ROUNDS:-5}
rates=${AB_RATES:-200 1000}
deliveries=${AB_DELIVERIES:-at_least_once exactly_once}
duration=${AB_DURATION:-10s}
read -r -a args <<<"${AB_BENCH_ARGS:---brokers 127.0.0.1:9092}"
mkdir -p "$out"
: >"$out/old.txt"
: >"$out/new.txt"
for round in $(seq 1 "$rounds"); do
	for d in $deliveries; do
		for r in $rates; do
			for side in old new; do
				bin=$old
				[[ $side == new ]] && bin=$new
				json=$out/$side-$d-$r-$round.json
				load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
				"$bin" bench "${args[@]}" --delivery "$d" --rate "$r" --duration "$duration" --json >"$json" 2>"$json.err" || {
					echo "ab: $side $d $r round $round failed (see $json.err)" >&2
					continue
				}
				jq -r --arg name "BenchmarkE2E/$d/rate=$r" --arg load "$load" '.router as $p |
					"\($name) 1 \(($p.latency_ms.end_to_end_observed.p50 * 1e6) | floor) ns/op \($p.latency_ms.end_to_end_observed.p50) p50-ms \($p.latency_ms.end_to_end_observed.p99) p99-ms \($p.broker_per_intent.requests // 0) broker-req/intent \($p.broker_per_intent.produce // 0) produce/intent \($p.process_cpu_cores) cores\(if $p.latency_ms.end_to_end_observed_after_2s then " \($p.latency_ms.end_to_end_observed_after_2s.p99) p99-after-2s-ms" else "" end) \($load) load1"' \
					"$json" >>"$out/$side.txt"
				echo "ab: round $round $d ${r}/s $side: $(tail -1 "$out/$side.txt")"
			done
		done
	done
done
