#!/usr/bin/env bash
# Installs what deploy/mcp/check.sh runs, pinned, into DIR (default
# ~/.cache/switchboard/mcp-checks): a Python venv with the MCP Python SDK
# (requirements.txt), and from npm the conformance suite, the TypeScript SDK
# and a Node 22 binary (package.json; the suite needs Node 22's fs.globSync).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${1:-${SWITCHBOARD_MCP_CHECKS:-$HOME/.cache/switchboard/mcp-checks}}
mkdir -p "$dir"
if [[ ! -x $dir/venv/bin/python ]]; then
	python3 -m venv "$dir/venv"
fi
"$dir/venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
cp "$here/package.json" "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error
"$dir/node_modules/.bin/node" --version
