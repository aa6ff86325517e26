# The course's grader: the formgrader (a JupyterLab of the grader account, with
# nbgrader's instructor extensions) as an external JupyterHub service, the course
# directory (source/, nbgrader_config.py) and the hidden checks (grader_tests/).
FROM python:3.11.11-slim-bookworm

ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" torch==2.13.0 \
 && pip install --no-cache-dir \
    numpy==2.4.6 \
    matplotlib==3.11.2 \
    nbgrader==0.9.6 \
    jupyterhub==6.1.1 \
    jupyterlab==4.6.6 \
    notebook==7.6.5 \
    "psycopg[binary]==3.3.9"

# Our package (preprocessors, exchange plug-in, sandbox, formgrader launcher) and the checks.
WORKDIR /srv/app
COPY pyproject.toml ./
COPY attention_platform/ attention_platform/
COPY grader_tests/ grader_tests/
RUN pip install --no-cache-dir --no-deps .

# Grader-side nbgrader + server settings (exchange plug-in, formgrader in a JupyterLab tab).
COPY hub/grader/ /etc/dl-attention/grader/
# The course directory; the compose file mounts a named volume here, which Docker
# fills from this image on first use (gradebook, submissions and feedback then live on it).
COPY nbgrader_config.py /srv/course/
COPY source/ /srv/course/source/
RUN chmod 700 /srv/course

ENV GRADER_CONFIG_DIR=/etc/dl-attention/grader COURSE_DIR=/srv/course FORMGRADER_IP=0.0.0.0 FORMGRADER_PORT=9999
EXPOSE 9999
CMD ["python", "-m", "attention_platform.hub.formgrader_service"]
