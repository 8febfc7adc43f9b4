#!/usr/bin/env bash
# The whole quality gate: install test dependencies from the project's own files, then
# ruff (lint + format), mypy and the full pytest suite. Used by the README and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${FLOPWISE_TEST_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --disable-pip-version-check -c constraints-ci.txt -e '.[test,bench]'

# Browser tests drive Debian's Chromium (no browser download is possible here).
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  (apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium chromium-driver >/dev/null) \
    || echo "warning: could not install chromium; browser tests will be skipped" >&2
fi

"$VENV/bin/ruff" check src tests benchmarks
"$VENV/bin/ruff" format --check src tests benchmarks
"$VENV/bin/mypy" src
"$PY" -m pytest -q "$@"
