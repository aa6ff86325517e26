# A student's single-user server: JupyterLab 4 + nbgrader's STUDENT extensions
# (Assignments tab, Validate) + torch CPU. Nothing of the course directory, the
# hidden checks (grader_tests/) or the solutions (source/) is in this image.
# Build arguments (docker-compose.yml passes them from .env): PYTHON_BASE, TORCH_INDEX_URL.
ARG PYTHON_BASE=python:3.11.11-slim-bookworm
FROM ${PYTHON_BASE}

# CPU wheels of torch (PyPI's torch is the CUDA build, gigabytes larger). The first two steps are
# the grader image's too, word for word, so the engine builds and stores them once for both.
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
    notebook==7.6.5

# Only the student side of nbgrader, also at the image level (jupyter_config/student/ says the same).
RUN jupyter server extension disable --sys-prefix nbgrader.server_extensions.formgrader \
 && jupyter server extension disable --sys-prefix nbgrader.server_extensions.course_list \
 && jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:formgrader \
 && jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:course-list \
 && jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:create-assignment

# Whole packages of ours (tests/deploy/test_compose_static.py checks that they hold everything the
# server reaches): the student's server (lab: the course's Lab, its extensions, Validate's client,
# feedback on submit's reading side, the body limits), the exchange whose submit
# jupyter_config/student/nbgrader_config.py names, the attempts' policy and status it reads, what
# Validate says (course), the frames and files Validate's client sends (grading), and the deployment's
# settings. Never the hidden checks (grader_tests/) or the course directory.
COPY attention_platform/__init__.py attention_platform/third_party_patches.py attention_platform/start_up_gc.py attention_platform/bounded_json.py attention_platform/settings.py /opt/dl-attention/student-lib/attention_platform/
COPY attention_platform/lab/ /opt/dl-attention/student-lib/attention_platform/lab/
COPY attention_platform/exchange/ /opt/dl-attention/student-lib/attention_platform/exchange/
COPY attention_platform/attempts/ /opt/dl-attention/student-lib/attention_platform/attempts/
COPY attention_platform/course/ /opt/dl-attention/student-lib/attention_platform/course/
COPY attention_platform/grading/ /opt/dl-attention/student-lib/attention_platform/grading/
# The .pth puts that library on sys.path, then defers jsonschema's IRI parser (slow to build,
# paid by every server start otherwise; attention_platform/third_party_patches.py).
RUN pth=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/dl-attention-student.pth \
 && echo /opt/dl-attention/student-lib > "$pth" \
 && python -c 'from attention_platform import third_party_patches as p; p.main(["--line"])' >> "$pth" \
 && python -c "import attention_platform.exchange.submit, attention_platform.lab.course_lab, attention_platform.lab.student_request_limits, attention_platform.lab.feedback_on_submit, attention_platform.lab.warm_validate, attention_platform.course.validation"

# Student-side nbgrader + server settings; the hub sets JUPYTER_CONFIG_PATH to this folder.
COPY jupyter_config/student/ /etc/dl-attention/jupyter/
# The spawners' `jupyterhub-singleuser` is the course's launcher (jupyter_config/student/jupyterhub-singleuser: the
# same server, its start-up without garbage collections), as natively.
RUN ln -sf /etc/dl-attention/jupyter/jupyterhub-singleuser "$(command -v jupyterhub-singleuser)"

# Every student container runs as jovyan (uid 1000); the exchange view is mounted
# under /srv/nbgrader/exchange (outbound read-only, their own inbound and feedback).
RUN useradd --uid 1000 --gid 100 --create-home --shell /bin/bash jovyan \
 && mkdir -p /srv/nbgrader/exchange \
 && chown 1000:100 /srv/nbgrader/exchange
USER 1000:100
WORKDIR /home/jovyan
ENV JUPYTER_CONFIG_PATH=/etc/dl-attention/jupyter
CMD ["jupyterhub-singleuser"]
