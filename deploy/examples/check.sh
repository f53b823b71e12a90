#!/usr/bin/env bash
# Runs the example agents and publishers (deploy/examples/agents) and the
# README's own agent snippets against a running Switchboard, and checks what
# they do: each agent answers its intents with progress, in JSON and in Avro;
# skips a request whose deadline has passed; stops on a cancel notice; copies
# the traceparent onto its responses; commits (its lag falls to 0); each
# publisher gets its result.
#
#   check.sh dev     against 'switchboard dev' (embedded broker and registry)
#   check.sh kafka   against 'switchboard serve' on the Apache Kafka in
#                    KAFKA_BOOTSTRAP, or one deploy/kafka/kafka.sh starts (and
#                    stops); dev's embedded registry serves as the registry
#   check.sh         both
#
# Needs bin/switchboard (make build), kcat, jq, curl, and deploy/examples/install.sh's
# clients. Ports: EXAMPLES_CHECK_PORT (default 18500) for the API, +1 dev's
# Kafka, +2 the registry, +3 serve's API.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${SWITCHBOARD_EXAMPLES:-$HOME/.cache/switchboard/examples}
port=${EXAMPLES_CHECK_PORT:-18500}
modes=("$@")
[[ ${#modes[@]} -gt 0 ]] || modes=(dev kafka)
py=$dir/venv/bin/python
node=$dir/node_modules/.bin/node
sb=$root/bin/switchboard
if [[ ! -x $py || ! -x $node ]]; then
	echo "examples-check: the clients are not installed: run deploy/examples/install.sh" >&2
	exit 1
fi
for tool in kcat jq curl; do
	command -v "$tool" >/dev/null || { echo "examples-check: $tool is not installed (apt-get install $tool)" >&2; exit 1; }
done
[[ -x $sb ]] || { echo "examples-check: no $sb: run make build" >&2; exit 1; }
# The TypeScript files run from the install dir (their node_modules), so they are told where the schemas are.
cp "$here"/agents/typescript/*.ts "$here/agents/typescript/tsconfig.json" "$dir/"
echo "examples-check: tsc: type-checking the TypeScript examples"
(cd "$dir" && "$node" node_modules/typescript/bin/tsc -p .) || { echo "examples-check: FAIL: tsc found type errors" >&2; exit 1; }

work=$(mktemp -d /tmp/switchboard-examples-check.XXXXXX)
pids=()
kafka_started=
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [[ -n $kafka_started ]]; then "$root/deploy/kafka/kafka.sh" down >/dev/null 2>&1 || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "examples-check: FAIL: $*"
	local f
	for f in "$work"/*.log; do
		echo "---- $(basename "$f") (last 20 lines)"
		grep -v 'Telemetry client instance id' "$f" | tail -n 20 || true
	done
	exit 1
}
# until SECONDS CMD...: runs CMD until it succeeds, for at most SECONDS.
until_ok() {
	local end=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[[ $SECONDS -lt $end ]] || return 1
		sleep 0.2
	done
}
start() { # start NAME CMD...: runs CMD in the background in a process group of its own (stopped whole), logging to $work/NAME.log
	local name=$1
	shift
	setsid "$@" >"$work/$name.log" 2>&1 &
	pids+=($!)
}
logged() { grep -qF -- "$2" "$work/$1.log"; }

# readme_block MARKER: the code block after '<!-- examples-check: MARKER -->' in README.md.
readme_block() {
	awk -v m="<!-- examples-check: $1 -->" '
		$0 == m { found = 1; next }
		found && !inside && /^```/ { inside = 1; next }
		inside && /^```/ { exit }
		inside { print }' "$root/README.md"
}

# dev's broker and registry: the registry serves the Apache Kafka run too.
reg=http://127.0.0.1:$((port + 2))
start dev "$sb" dev --agents=false --config "$here/agents/switchboard-examples.yaml" \
	--http "127.0.0.1:$port" --kafka-port $((port + 1)) --registry "127.0.0.1:$((port + 2))"
until_ok 120 curl -sf "http://127.0.0.1:$port/readyz" || fail "switchboard dev is not ready"

# check_agents MODE BOOTSTRAP API PREFIX: starts the four agents and checks them.
check_agents() {
	local mode=$1 b=$2 api=$3 prefix=$4 n lang id out t0 tp
	local sbflags=(--brokers "$b" --registry "$reg")
	local sendflags=()
	# serve's API shows an intent to its tenant only: the API key's.
	[[ $mode == dev ]] || { sbflags+=(--config "$work/serve.yaml"); sendflags=(--tenant examples); }
	agent_topic() { if [[ -n $prefix ]]; then echo "$prefix.agent.$1"; else echo "mcp.agent.$1.request"; fi; }
	agent_flags() { # the topic, group and responses topic of agent $1 under this run's prefix
		[[ -z $prefix ]] || echo "--topic $prefix.agent.$1 --group $prefix.agent.$1 --responses $prefix.response"
	}
	for n in py-json py-avro; do
		# shellcheck disable=SC2046 # agent_flags is a list of words
		start "$mode-$n" "$py" "$here/agents/python/agent.py" --name "$n" --bootstrap "$b" --registry "$reg" $(agent_flags "$n")
	done
	for n in ts-json ts-avro; do
		# shellcheck disable=SC2046
		start "$mode-$n" env SWITCHBOARD_SCHEMAS="$root/schemas" "$node" "$dir/agent.ts" --name "$n" --bootstrap "$b" --registry "$reg" $(agent_flags "$n")
	done

	for n in py-json py-avro ts-json ts-avro; do
		lang=python
		[[ $n == ts-* ]] && lang=typescript
		out=$("$sb" send "${sbflags[@]}" "${sendflags[@]}" --type "$n" --payload "{\"steps\":2,\"delay_ms\":20,\"check\":\"$n\"}" --wait 90s 2>&1) ||
			fail "$mode: $n: send: $out"
		jq -e --arg n "$n" --arg l "$lang" '.outcome == "answered" and .answer.agent == $n and .answer.lang == $l
			and .answer.echo.check == $n and .progress_count == 2' <<<"$out" >/dev/null ||
			fail "$mode: $n: not the answer expected: $out"
		echo "examples-check: $mode: $n answered, with 2 progress records"
	done

	# Publishers: Python over Kafka (JSON and Avro requests, Avro results), TypeScript over HTTP.
	local pyflags=(--bootstrap "$b" --registry "$reg")
	[[ -z $prefix ]] || pyflags+=(--requests "$prefix.request" --results "$prefix.result")
	for enc in json avro; do
		out=$("$py" "$here/agents/python/publish.py" "${pyflags[@]}" --encoding "$enc" --type py-avro --payload '{"from":"publish.py"}' --wait 90 2>"$work/$mode-publish-py.log") ||
			fail "$mode: publish.py --encoding $enc: $out"
		jq -e '.outcome == "answered" and .answer.echo.from == "publish.py"' <<<"$out" >/dev/null ||
			fail "$mode: publish.py --encoding $enc: $out"
		echo "examples-check: $mode: publish.py ($enc) got its result"
	done
	# The trace goes on: the agent's response carries the traceparent publish.py started.
	tp=$(sed -n 's/.* traceparent \(.*\)$/\1/p' "$work/$mode-publish-py.log")
	id=$(sed -n 's/^published \([^ ]*\) .*/\1/p' "$work/$mode-publish-py.log")
	[[ -n $tp && -n $id ]] || fail "$mode: publish.py did not say what it published"
	until_ok 30 bash -c "kcat -b '$b' -C -e -q -t '${prefix:-mcp.agent}.response' -f '%k %h\n' | grep -qF -- '$id traceparent=$tp'" ||
		fail "$mode: no response to $id carries traceparent $tp"
	echo "examples-check: $mode: the response carries the request's traceparent"
	out=$(cd "$dir" && SWITCHBOARD_API_KEY=${api_key:-} "$node" publish.ts --api "$api" --type ts-avro --payload '{"from":"publish.ts"}' --wait 90s 2>&1) ||
		fail "$mode: publish.ts: $out"
	jq -e '.outcome == "answered" and .answer.echo.from == "publish.ts"' <<<"$out" >/dev/null || fail "$mode: publish.ts: $out"
	echo "examples-check: $mode: publish.ts got its result"

	# A request whose deadline has passed is skipped, and so is a record that is no request,
	# without stopping the agent (JSON agents: kcat writes them).
	for n in py-json ts-json; do
		id=late-$mode-$n-$$
		printf '%s\n' "$id|not json" "$id|{\"intent_id\":\"$id\",\"intent_type\":\"$n\",\"agent\":\"$n\",\"payload\":{},\"deadline\":1,\"attempt\":1}" |
			kcat -b "$b" -P -t "$(agent_topic "$n")" -K '|' -X topic.partitioner=murmur2_random ||
			fail "$mode: kcat could not write to $(agent_topic "$n")"
		until_ok 30 logged "$mode-$n" "skipped $id: deadline passed" || fail "$mode: $n did not skip $id"
		logged "$mode-$n" "skipped an unreadable record" || fail "$mode: $n did not skip a record that is not JSON"
	done
	echo "examples-check: $mode: py-json and ts-json skip a request past its deadline and an unreadable record"

	# A cancel notice stops the work: a long intent, cancelled once it has begun.
	for n in py-avro ts-json; do
		id=$("$sb" send "${sbflags[@]}" "${sendflags[@]}" --type "$n" --payload '{"steps":300,"delay_ms":100}' | jq -r .intent_id)
		until_ok 60 bash -c "curl -sf '$api/v1/intents/$id/events' -H 'authorization: Bearer ${api_key:-}' --max-time 2 | grep -q '^event: progress'" ||
			fail "$mode: $n: no progress for $id"
		"$sb" cancel "${sbflags[@]}" "${sendflags[@]}" --reason check "$id" >/dev/null || fail "$mode: cancel $id"
		until_ok 60 logged "$mode-$n" "cancelled $id (check)" || fail "$mode: $n did not stop $id on its cancel notice"
	done
	echo "examples-check: $mode: py-avro and ts-json stop on a cancel notice"

	# Committed after answering: each agent's lag, sampled after all of the above, is 0.
	t0=$(date +%s)
	for n in py-json py-avro ts-json ts-avro; do
		until_ok 60 bash -c "curl -sf '$api/metrics' | awk -v n='$n' -v t0=$t0 '
			\$1 == \"switchboard_agent_lag_records{agent=\\\"\" n \"\\\"}\" { lag = \$2 }
			\$1 == \"switchboard_agent_lag_sampled_timestamp_seconds{agent=\\\"\" n \"\\\"}\" { ts = \$2 + 0 }
			END { exit !(lag == \"0\" && ts > t0) }'" || fail "$mode: $n: its lag did not fall to 0 (uncommitted offsets)"
	done
	echo "examples-check: $mode: every agent committed what it answered (lag 0)"
}

check_readme() { # the README's snippets, with dev's ports and their own agent names
	local b=127.0.0.1:$((port + 1)) n out
	local subst=(-e "s/localhost:9092/$b/g" -e "s|http://localhost:8081|$reg|g")
	readme_block readme-python | sed "${subst[@]}" -e 's/\becho\b/readme-py/g' >"$work/readme.py"
	readme_block readme-kcat | sed "${subst[@]}" -e 's/\becho\b/readme-kcat/g' >"$work/readme-kcat.sh"
	[[ -s $work/readme.py && -s $work/readme-kcat.sh ]] || fail "README.md lost its examples-check markers"
	start readme-py "$py" "$work/readme.py"
	start readme-kcat bash "$work/readme-kcat.sh"
	for n in readme-py readme-kcat; do
		out=$("$sb" send --brokers "$b" --registry "$reg" --type "$n" --payload '{"from":"README"}' --wait 90s 2>&1) ||
			fail "dev: $n: send: $out"
		jq -e '.outcome == "answered" and .answer.from == "README"' <<<"$out" >/dev/null || fail "dev: $n: $out"
		echo "examples-check: dev: the README's ${n#readme-} agent answered"
	done
}

for mode in "${modes[@]}"; do
	case $mode in
	dev)
		check_agents dev "127.0.0.1:$((port + 1))" "http://127.0.0.1:$port" ""
		check_readme
		;;
	kafka)
		if [[ -z ${KAFKA_BOOTSTRAP:-} ]]; then
			rc=0
			"$root/deploy/kafka/kafka.sh" status 2>/dev/null || rc=$?
			[[ $rc != 3 ]] || kafka_started=1
			eval "$("$root/deploy/kafka/kafka.sh" up)"
		fi
		prefix=ex.$(date +%s).$$
		api_key=examples-check-key
		sed -e "s/localhost:9092/$KAFKA_BOOTSTRAP/" -e "s|127.0.0.1:8080|127.0.0.1:$((port + 3))|" \
			"$here/agents/switchboard-examples.yaml" >"$work/serve.yaml"
		cat >>"$work/serve.yaml" <<-YAML
			  auth:
			    api_keys: [{name: examples, tenant: examples, key_sha256: $(printf %s "$api_key" | sha256sum | cut -d' ' -f1)}]
			schema_registry: {url: "$reg"}
			topics:
			  requests: $prefix.request
			  responses: $prefix.response
			  results: $prefix.result
			  timeouts: $prefix.timeout
			  dead_letter: $prefix.dlq
			  pending: $prefix.pending
			  fallback_cache: $prefix.cache
			  context_snapshots: $prefix.context
			  progress: $prefix.progress
			  partitions: 3
			  auto_create: true
			  overrides: {}
		YAML
		for n in py-json py-avro ts-json ts-avro readme-py readme-kcat; do
			sed -i "/^agents:/,/^intents:/s/^  $n: *{\(.*\)}/  $n: {\1, topic: $prefix.agent.$n, group_id: $prefix.agent.$n}/; s/{, /{/" "$work/serve.yaml"
		done
		sed -i "/^kafka:/a\\  group_id: $prefix.router" "$work/serve.yaml"
		start serve "$sb" serve --config "$work/serve.yaml"
		until_ok 120 curl -sf "http://127.0.0.1:$((port + 3))/readyz" || fail "switchboard serve is not ready"
		check_agents kafka "$KAFKA_BOOTSTRAP" "http://127.0.0.1:$((port + 3))" "$prefix"
		;;
	*) echo "examples-check: unknown mode '$mode' (dev or kafka)" >&2; exit 2 ;;
	esac
done
echo "examples-check: ok (${modes[*]})"
