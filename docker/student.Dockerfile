# A student's single-user server: JupyterLab 4 + nbgrader's STUDENT extensions
# (Assignments tab, Validate) + torch CPU. Nothing of the course directory, the
# hidden checks (grader_tests/) or the solutions (source/) is in this image.
FROM python:3.11.11-slim-bookworm

# CPU wheels of torch (the default index ships CUDA builds, gigabytes larger).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" torch==2.13.0 \
 && pip install --no-cache-dir \
    numpy==2.4.6 \
    matplotlib==3.11.2 \
    nbgrader==0.9.6 \
    jupyterhub==6.1.1 \
    jupyterlab==4.6.6 \
    notebook==7.6.5

# Only the student side of nbgrader, also at the image level (hub/student/ says the same).
RUN jupyter server extension disable --sys-prefix nbgrader.server_extensions.formgrader \
 && jupyter server extension disable --sys-prefix nbgrader.server_extensions.course_list \
 && jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:formgrader \
 && jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:course-list \
 && jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:create-assignment

# Student-side nbgrader + server settings; the hub sets JUPYTER_CONFIG_PATH to this folder.
COPY hub/student/ /etc/dl-attention/jupyter/

# Every student container runs as jovyan (uid 1000); the exchange view is mounted
# under /srv/nbgrader/exchange (outbound read-only, their own inbound and feedback).
RUN useradd --uid 1000 --gid 100 --create-home --shell /bin/bash jovyan \
 && mkdir -p /srv/nbgrader/exchange \
 && chown 1000:100 /srv/nbgrader/exchange
USER 1000:100
WORKDIR /home/jovyan
ENV JUPYTER_CONFIG_PATH=/etc/dl-attention/jupyter
CMD ["jupyterhub-singleuser"]
