#!/usr/bin/env bash
# The Python framework adapters' tests (clients/python/tests_integrations/) against a real
# Flightdeck: OpenAI Agents SDK, Pydantic AI, LangGraph, Claude Agent SDK, each with its
# real package (requirements-integrations.txt) and a scripted model. No network beyond
# PyPI for the install, no keys.
#
#   FLIGHTDECK_BIN=target/debug/flightdeck clients/python/run-tests.sh [pytest args]
#
# The venv lives in ${FLIGHTDECK_CACHE:-$HOME/.cache/flightdeck}/venv-integrations and is
# rebuilt when the requirements file or the Python changes. Needs python3 (3.10 or later)
# with venv and pip (Debian: apt-get install python3-venv). The Claude Agent SDK's wheel
# carries the Claude Code CLI as a native binary: no Node needed.
# When the tests can run in a network namespace of their own (root, `unshare` and `ip`),
# they do, with only the loopback interface: proof that nothing reaches the network.
# FLIGHTDECK_TEST_NETWORK=host runs them without it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${FLIGHTDECK_BIN:?set FLIGHTDECK_BIN to the Flightdeck server binary}"
FLIGHTDECK_BIN="$(cd "$(dirname "$FLIGHTDECK_BIN")" && pwd)/$(basename "$FLIGHTDECK_BIN")"
if [ ! -x "$FLIGHTDECK_BIN" ]; then
    echo "run-tests.sh: FLIGHTDECK_BIN=$FLIGHTDECK_BIN is not an executable" >&2
    exit 2
fi
export FLIGHTDECK_BIN

python="${PYTHON:-python3}"
cache="${FLIGHTDECK_CACHE:-$HOME/.cache/flightdeck}"
venv="$cache/venv-integrations"
requirements="$here/requirements-integrations.txt"
want="$( { cat "$requirements"; "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"

if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
    echo "run-tests.sh: installing $requirements into $venv"
    rm -rf "$venv"
    mkdir -p "$cache"
    if ! "$python" -m venv "$venv"; then
        echo "run-tests.sh: $python cannot make a venv (Debian: apt-get install python3-venv)" >&2
        exit 2
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements"
    echo "$want" > "$venv/.requirements.sha256"
fi

export PYTHONDONTWRITEBYTECODE=1
export OPENAI_AGENTS_DISABLE_TRACING=1
cd "$here"
tests=("$venv/bin/python" -m pytest tests_integrations -p no:cacheprovider -q -rA "$@")

if [ "${FLIGHTDECK_TEST_NETWORK:-isolated}" != host ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null \
    && command -v ip >/dev/null && unshare -n true 2>/dev/null; then
    echo "run-tests.sh: running in a network namespace with only loopback"
    exec unshare -n -- sh -c 'ip link set lo up && exec "$@"' sh "${tests[@]}"
fi
echo "run-tests.sh: running with the host's network (no network namespace available)"
exec "${tests[@]}"
