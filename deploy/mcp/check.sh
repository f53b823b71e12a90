#!/usr/bin/env bash
# Runs real MCP clients nobody here wrote against 'switchboard dev' with
# deploy/mcp/switchboard-mcp.yaml: the official conformance suite (with the
# baseline of scenarios left out), the Python SDK and the TypeScript SDK.
# Needs bin/switchboard (make build) and deploy/mcp/install.sh's tools.
# Ports: MCP_CHECK_PORT (default 18400) for the API, +1 Kafka, +2 registry.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${SWITCHBOARD_MCP_CHECKS:-$HOME/.cache/switchboard/mcp-checks}
port=${MCP_CHECK_PORT:-18400}
node=$dir/node_modules/.bin/node
if [[ ! -x $node || ! -x $dir/venv/bin/python ]]; then
	echo "mcp-check: the clients are not installed: run deploy/mcp/install.sh" >&2
	exit 1
fi
log=$(mktemp /tmp/switchboard-mcp-check.XXXXXX)
"$root/bin/switchboard" dev --config "$here/switchboard-mcp.yaml" --http "127.0.0.1:$port" \
	--kafka-port $((port + 1)) --registry "127.0.0.1:$((port + 2))" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
url=http://127.0.0.1:$port/mcp
for _ in $(seq 1 120); do
	curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
	kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
	sleep 0.5
done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { echo "mcp-check: switchboard dev is not ready"; cat "$log"; exit 1; }

rc=0
echo "mcp-check: conformance suite 0.1.16 against $url"
out=$(mktemp -d)
(cd "$out" && "$node" "$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js" server --url "$url" \
	--expected-failures "$here/conformance-baseline.yml") | sed 's/\x1b\[[0-9;]*m//g' | grep -E '^[✓✗] |Baseline|Unexpected|stale|^  ✗' || rc=1
rm -rf "$out"
echo "mcp-check: Python SDK"
"$dir/venv/bin/python" "$here/python_client.py" "$url" || rc=1
echo "mcp-check: TypeScript SDK"
(cd "$dir" && cp "$here/ts_client.mjs" . && "$node" ts_client.mjs "$url") || rc=1
if [[ $rc != 0 ]]; then
	echo "mcp-check: FAILED; switchboard dev's log:"
	tail -50 "$log"
fi
exit "$rc"
