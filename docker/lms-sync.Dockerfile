# The LMS sync (attention-course lms-sync: scores out to the LMS, its roster into the hub's groups), started
# by docker-compose.yml's profile `lti`. It is the grader image with the LMS client added (PyJWT,
# cryptography, and the hub's LTI authenticator, whose role table and user names the roster shares with
# launches; pins of requirements.lock): the sync reads the gradebook and writes the course's outbox as the
# grader does, and only it holds
# the tool's private key. The grader image itself carries no LMS client on purpose: its processes handle
# students' notebooks and never sign anything for the LMS.
# Build: docker-compose.yml hands the grader service's image in as the build context `grader-image`.
FROM grader-image

RUN --mount=type=bind,source=docker/build,target=/build --mount=type=secret,id=extra_ca \
    /build/run pip install --no-cache-dir \
    jupyterhub-ltiauthenticator==1.6.3 \
    pyjwt==2.15.1 \
    cryptography==50.0.2 \
    cffi==2.1.1 \
    pycparser==3.12 \
    cachetools==8.0.1 \
    escapism==1.1.0 \
    oauthlib==4.0.1

USER 1000:100
WORKDIR /srv/course
ENTRYPOINT []
# The key: the secret lti_tool_key, the hub's own key, mounted read-only (the native launcher pipes it instead).
CMD ["attention-course", "lms-sync", "--course", "/srv/course", "--key-file", "/run/secrets/lti_tool_key"]
