#!/usr/bin/env bash
# A black-box round trip through Switchboard with clients nobody here wrote:
# kcat publishes a JSON intent, a kcat + jq pipeline plays the agent, and kcat
# reads the result. Needs KAFKA_BOOTSTRAP (a running broker) and SWITCHBOARD
# (the switchboard binary); kcat and jq on the PATH. Prints what it does and
# exits non-zero on any failure.
set -euo pipefail

: "${KAFKA_BOOTSTRAP:?set KAFKA_BOOTSTRAP to a running broker, e.g. 127.0.0.1:9092}"
: "${SWITCHBOARD:?set SWITCHBOARD to the switchboard binary}"
for tool in kcat jq; do
	command -v "$tool" >/dev/null || { echo "blackbox: $tool is not installed (apt-get install $tool)"; exit 1; }
done

work=$(mktemp -d)
prefix="bb.$(date +%s).$$"
serve_pid=
cleanup() {
	if [[ -n $serve_pid ]] && kill "$serve_pid" 2>/dev/null; then
		wait "$serve_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "blackbox: FAIL: $*"
	echo "---- switchboard serve log (last 30 lines)"
	tail -n 30 "$work/serve.log" || true
	exit 1
}

B=$KAFKA_BOOTSTRAP
kc() { kcat -b "$B" -X topic.partitioner=murmur2_random "$@"; }

cat >"$work/switchboard.yaml" <<YAML
kafka:
  bootstrap_servers: $B
  group_id: $prefix.router
topics:
  requests: $prefix.request
  responses: $prefix.response
  results: $prefix.result
  timeouts: $prefix.timeout
  dead_letter: $prefix.dlq
  pending: $prefix.pending
  fallback_cache: $prefix.cache
  context_snapshots: $prefix.context
  partitions: 3
  auto_create: true
agents:
  kcat: {topic: $prefix.agent.kcat, encoding: json}
intents:
  echo: {agent: kcat, timeout: 60s}
http:
  listen: 127.0.0.1:0
  auth:   # this test talks to Kafka only; serve requires a credential all the same
    api_keys: [{name: blackbox, tenant: blackbox, key_sha256: c7e615b1e6f0cb74f42a3e585d26c914921fa8958bc235ea66135a2be2bb67e1}]
YAML

echo "blackbox: starting switchboard serve (topics prefixed $prefix)"
"$SWITCHBOARD" serve --config "$work/switchboard.yaml" >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 1 300); do
	grep -q "switchboard serving" "$work/serve.log" 2>/dev/null && break
	kill -0 "$serve_pid" 2>/dev/null || fail "switchboard serve exited"
	sleep 0.1
done
grep -q "switchboard serving" "$work/serve.log" || fail "switchboard serve did not start within 30s"

# The agent: read one dispatched request, answer it on the responses topic
# keyed by its intent id (kcat -K splits key and value at '|').
echo "blackbox: kcat + jq agent waiting on $prefix.agent.kcat"
(
	timeout 60 kcat -b "$B" -C -t "$prefix.agent.kcat" -o beginning -c 1 -q -u |
		jq -rc '"\(.intent_id)|" + ({request_id: .intent_id, agent: "kcat", status: "ok", answer: {echoed: .payload, by: "jq"}} | tojson)' |
		kc -P -t "$prefix.response" -K '|'
) &
agent_pid=$!

id="bb-$(date +%s%N)"
echo "blackbox: kcat publishes intent $id"
printf '%s|{"intent_id":"%s","intent_type":"echo","payload":{"hello":"kcat"}}\n' "$id" "$id" |
	kc -P -t "$prefix.request" -K '|'

echo "blackbox: kcat reads the result"
result=$(timeout 60 kcat -b "$B" -C -t "$prefix.result" -o beginning -c 1 -q -u) || fail "no result within 60s"
wait "$agent_pid" || fail "the kcat agent failed"
echo "blackbox: result: $result"

echo "$result" | jq -e --arg id "$id" \
	'.intent_id == $id and .outcome == "answered" and .answer.echoed.hello == "kcat" and .answer.by == "jq" and .timeline.dispatched_at != null' >/dev/null ||
	fail "unexpected result"
echo "blackbox: PASS: kcat intent -> switchboard -> kcat/jq agent -> switchboard -> kcat result"
