#!/usr/bin/env bash
# Installs what deploy/examples/check.sh runs, pinned, into DIR (default
# ~/.cache/switchboard/examples): a Python venv with confluent-kafka and its
# Avro and Schema Registry extras (agents/python/requirements.txt), and from
# npm kafkajs, @kafkajs/confluent-schema-registry, a Node 22 binary and tsc
# (agents/typescript/package.json; Node 22 runs the .ts files as they are,
# by type stripping, where Debian's Node 20 cannot; tsc type-checks them).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${1:-${SWITCHBOARD_EXAMPLES:-$HOME/.cache/switchboard/examples}}
mkdir -p "$dir"
if [[ ! -x $dir/venv/bin/python ]]; then
	python3 -m venv "$dir/venv"
fi
"$dir/venv/bin/pip" install -q --disable-pip-version-check -r "$here/agents/python/requirements.txt"
cp "$here/agents/typescript/package.json" "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error
"$dir/node_modules/.bin/node" --version
