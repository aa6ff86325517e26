# The hub: JupyterHub + configurable-http-proxy + DockerSpawner, configured by
# hub/jupyterhub_config.py (the same file the native mode uses) with HUB_MODE=docker.
# Versions are the ones pinned in pyproject.toml and scripts/install-system-deps.sh
# (tests/test_compose_static.py checks that they agree).
FROM python:3.11.11-slim-bookworm

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm \
 && npm install -g --no-audit --no-fund configurable-http-proxy@5.3.0 \
 && apt-get purge -y npm && apt-get autoremove -y && rm -rf /var/lib/apt/lists/* /root/.npm

RUN pip install --no-cache-dir \
    jupyterhub==6.1.1 \
    jupyterhub-nativeauthenticator==1.3.0 \
    jupyterhub-ltiauthenticator==1.6.3 \
    jupyterhub-idle-culler==2.0.0 \
    dockerspawner==14.0.0 \
    "psycopg[binary]==3.3.9"

COPY hub/jupyterhub_config.py /srv/hub/
COPY attention_platform /srv/hub/attention_platform
WORKDIR /srv/hub-state
ENV HUB_MODE=docker HUB_STATE_DIR=/srv/hub-state PYTHONPATH=/srv/hub
EXPOSE 8000
CMD ["jupyterhub", "-f", "/srv/hub/jupyterhub_config.py"]
