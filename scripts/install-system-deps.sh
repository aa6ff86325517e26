#!/usr/bin/env bash
# Debian and npm packages the hub, the sandbox and the browser tests need.
# Idempotent: installs only what is missing. Run as root (CI is root).
# --proxy-only: configurable-http-proxy alone, which needs no root (make check's proxy tests).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
if [ "${1:-}" != "--proxy-only" ]; then
  command -v chromium >/dev/null || need_apt+=(chromium)
  command -v bwrap >/dev/null || need_apt+=(bubblewrap)
fi
if ((${#need_apt[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${need_apt[*]} (run this script as root)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# configurable-http-proxy and axe-core (the browser tests' accessibility check, tests/accessibility.py),
# pinned, into ./node_modules (the hub config looks there first). One npm call for both: an install
# without a package.json keeps only what it was asked for.
CHP_VERSION=5.3.0
AXE_VERSION=4.10.3
installed() { node -p "require('./node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ ! -x node_modules/.bin/configurable-http-proxy ] || [ "$(installed configurable-http-proxy)" != "$CHP_VERSION" ] || \
   [ "$(installed axe-core)" != "$AXE_VERSION" ]; then
  npm install --no-save --no-audit --no-fund --loglevel=error "configurable-http-proxy@${CHP_VERSION}" \
    "axe-core@${AXE_VERSION}" >/dev/null
fi
