# The course's grader: the formgrader (a JupyterLab of the grader account, with
# nbgrader's instructor extensions) as an external JupyterHub service, the course
# directory (source/, nbgrader_config.py) and the hidden checks (grader_tests/).
# Build arguments (docker-compose.yml passes them from .env): PYTHON_BASE, TORCH_INDEX_URL.
ARG PYTHON_BASE=python:3.11.11-slim-bookworm
FROM ${PYTHON_BASE}

# The student image's first two steps, word for word: the engine builds and stores them once.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN --mount=type=bind,source=docker/build,target=/build --mount=type=secret,id=extra_ca \
    /build/run pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" torch==2.13.0
RUN --mount=type=bind,source=docker/build,target=/build --mount=type=secret,id=extra_ca \
    /build/run pip install --no-cache-dir \
    numpy==2.4.6 \
    matplotlib==3.11.2 \
    nbgrader==0.9.6 \
    jupyterhub==6.1.1 \
    jupyterlab==4.6.6 \
    notebook==7.6.5 \
    tqdm==4.70.1 \
    copydetect==0.5.0
RUN --mount=type=bind,source=docker/build,target=/build --mount=type=secret,id=extra_ca \
    /build/run pip install --no-cache-dir "psycopg[binary]==3.3.9"

# The grader account: the formgrader runs as this uid, never as root (docker/grader-entrypoint.sh).
RUN useradd --uid 1000 --gid 100 --create-home --shell /usr/sbin/nologin grader

# Our package (preprocessors, exchange plug-in, sandbox, formgrader launcher) into the interpreter,
# and the hidden checks OUTSIDE it: every sandbox sees the interpreter's files (read-only), so the
# checks live in /opt, readable by root and the grader's group only (the broker refuses to grade
# if it finds them where a sandbox could read them).
WORKDIR /opt/dl-attention/src
COPY pyproject.toml ./
COPY attention_platform/ attention_platform/
COPY grader_tests/ grader_tests/
RUN --mount=type=bind,source=docker/build,target=/build --mount=type=secret,id=extra_ca \
    /build/run pip install --no-cache-dir --no-deps . \
 && python -c 'from attention_platform import third_party_patches as p; p.main([])' \
 && site=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") \
 && rm -rf "$site/grader_tests" build *.egg-info \
 && mkdir -p /opt/dl-attention/checks \
 && mv grader_tests /opt/dl-attention/checks/ \
 && rm -rf /opt/dl-attention/checks/grader_tests/tests \
 && chown -R root:100 /opt/dl-attention/checks \
 && chmod -R u=rwX,g=rX,o= /opt/dl-attention/checks
ENV PYTHONPATH=/opt/dl-attention/checks

# Grader-side nbgrader + server settings (exchange plug-in, formgrader in a JupyterLab tab).
COPY jupyter_config/grader/ /etc/dl-attention/grader/
# The course as this image ships it. The compose file keeps the course directory on a named volume
# (/srv/course: gradebook-side files, submissions, feedback); at every start the entrypoint brings
# the volume up to date with these files when they changed since the volume last saw them.
COPY nbgrader_config.py /opt/dl-attention/course/
COPY source/ /opt/dl-attention/course/source/
RUN mkdir -p /srv/course && chown 1000:100 /srv/course && chmod 700 /srv/course
COPY docker/grader-entrypoint.sh docker/course-sync.py /opt/dl-attention/bin/

WORKDIR /srv/course
ENV GRADER_CONFIG_DIR=/etc/dl-attention/grader COURSE_DIR=/srv/course FORMGRADER_IP=0.0.0.0 FORMGRADER_PORT=9999
EXPOSE 9999
# Starts as root only to set up the sandbox's cgroups and broker; the formgrader runs as uid 1000.
ENTRYPOINT ["/opt/dl-attention/bin/grader-entrypoint.sh"]
