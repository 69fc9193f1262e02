#!/bin/sh
# The TypeScript client's and the adapters' tests: installs the pinned packages
# (package-lock.json), builds with the pinned TypeScript, and runs every test with
# node's test runner against the Flightdeck binary named by FLIGHTDECK_BIN.
#
#   FLIGHTDECK_BIN=target/debug/flightdeck clients/typescript/run-tests.sh
#
# Needs Node 18+ and npm with the npm registry; exits non-zero on any failure.
set -eu
cd "$(dirname "$0")"

if [ -z "${FLIGHTDECK_BIN:-}" ] || [ ! -x "$FLIGHTDECK_BIN" ]; then
  echo "run-tests.sh: FLIGHTDECK_BIN must name the Flightdeck binary (got '${FLIGHTDECK_BIN:-}')" >&2
  exit 2
fi
FLIGHTDECK_BIN=$(cd "$(dirname "$FLIGHTDECK_BIN")" && pwd)/$(basename "$FLIGHTDECK_BIN")
export FLIGHTDECK_BIN

npm ci --no-audit --no-fund --loglevel=error
rm -rf dist
./node_modules/.bin/tsc -p tsconfig.json
node --test --test-timeout=300000 dist/test/*.test.js
