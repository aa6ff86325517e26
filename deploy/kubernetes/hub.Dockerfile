# The hub image for Zero to JupyterHub (deploy/kubernetes/values.yaml, hub.image): the chart's own hub image
# (its jupyterhub_config.py, z2jh helpers, curl HTTP client, proxy and Kubernetes clients) plus the course's
# hub configuration and package. Build from the repository root:
#   docker build -f deploy/kubernetes/hub.Dockerfile -t registry.example.org/dl-attention/k8s-hub:0.1.0 .
# Versions are the ones pinned in pyproject.toml (tests/test_kubernetes.py checks that they agree).
FROM quay.io/jupyterhub/k8s-hub:4.4.0

USER root
# The chart's 4.4.0 image ships JupyterHub 5.5.0 and KubeSpawner 7.0.0; the course's configuration and its
# NativeAuthenticator adapter are tested with these pins.
RUN pip install --no-cache-dir \
    jupyterhub==6.1.1 \
    jupyterhub-kubespawner==7.1.0 \
    jupyterhub-idle-culler==2.0.0 \
    jupyterhub-nativeauthenticator==1.3.0 \
    jupyterhub-ltiauthenticator==1.6.3

# hub.extraConfig loads this file (HUB_MODE=kubernetes); the package gives it the authenticators and hooks.
COPY jupyter_config/jupyterhub_config.py /srv/hub/jupyterhub_config.py
COPY attention_platform /srv/hub/attention_platform
ENV PYTHONPATH=/srv/hub

# Back to the chart image's unprivileged user (jovyan, uid 1000), which the chart's securityContext expects.
USER 1000
