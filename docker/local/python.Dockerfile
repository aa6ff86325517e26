# A stand-in for the official python:3.11-slim-bookworm image, built from Debian's own packages, for
# machines that reach Debian's archive but no container registry (scripts/docker-local-bases.sh).
# Same layout as the official image where our Dockerfiles rely on it: python, pip and installed
# scripts in /usr/local/bin (a venv whose prefix is /usr/local), site-packages under /usr/local/lib.
ARG DEBIAN_IMAGE=dl-attention-local/debian:bookworm
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /usr/local \
 && /usr/local/bin/python -m pip --version
ENV LANG=C.UTF-8 PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
CMD ["python3"]
