#!/usr/bin/env bash
# Base images made here from Debian's packages, for a Docker host that reaches Debian's archive but
# no container registry. docker-compose.yml builds the SAME Dockerfiles on them when .env says
#   PYTHON_BASE=dl-attention-local/python:3.11-bookworm
#   POSTGRES_IMAGE=dl-attention-local/postgres:15-bookworm
# Each image is made once and kept by the engine; run again, this only checks they are there.
# Needs root (debootstrap) and a running engine (scripts/docker-engine.sh start).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian release and mirror the base file system is made from.
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
# Names of the images made here.
DEBIAN_IMAGE=${DEBIAN_IMAGE:-dl-attention-local/debian:$SUITE}
PYTHON_IMAGE=${PYTHON_IMAGE:-dl-attention-local/python:3.11-$SUITE}
POSTGRES_IMAGE=${POSTGRES_IMAGE:-dl-attention-local/postgres:15-$SUITE}

log() { echo "docker-local-bases: $*" >&2; }
have() { docker image inspect "$1" >/dev/null 2>&1; }

if ! have "$DEBIAN_IMAGE"; then
  rootfs=$(mktemp -d /var/tmp/dl-attention-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  log "debootstrap --variant=minbase $SUITE (about a minute)"
  debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 \
    || { tail -20 "$rootfs.log" >&2; exit 1; }
  rm -f "$rootfs.log"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' - "$DEBIAN_IMAGE" >/dev/null
  log "made $DEBIAN_IMAGE"
fi

for spec in "$PYTHON_IMAGE:docker/local/python.Dockerfile" "$POSTGRES_IMAGE:docker/local/postgres.Dockerfile"; do
  image=${spec%:docker/*}
  dockerfile=docker/${spec#*:docker/}
  if ! have "$image"; then
    log "building $image from $dockerfile"
    # The context is docker/local only: these images need nothing else of the repository.
    docker build -q -t "$image" --build-arg "DEBIAN_IMAGE=$DEBIAN_IMAGE" -f "$dockerfile" docker/local >/dev/null
    log "made $image"
  fi
done
