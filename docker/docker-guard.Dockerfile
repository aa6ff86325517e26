# The docker guard (docker-compose.yml, service docker-guard): the only container holding the Docker
# socket. One stdlib file and the settings module it reads, nothing else of the project; it runs as uid
# 1000 with the socket's group.
# Build argument (docker-compose.yml passes it from .env): PYTHON_BASE.
ARG PYTHON_BASE=python:3.11.11-slim-bookworm
FROM ${PYTHON_BASE}
COPY attention_platform/__init__.py attention_platform/settings.py /opt/docker-guard/attention_platform/
COPY attention_platform/docker_guard.py /opt/docker-guard/docker_guard.py
USER 1000:100
EXPOSE 2375
CMD ["python", "/opt/docker-guard/docker_guard.py"]
