# A stand-in for the official postgres image, built from Debian's postgresql (15), for machines that
# reach Debian's archive but no container registry (scripts/docker-local-bases.sh). It honours what
# docker-compose.yml uses of the official image: POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB,
# scripts in /docker-entrypoint-initdb.d on the first start, data in /var/lib/postgresql/data, pg_isready.
ARG DEBIAN_IMAGE=dl-attention-local/debian:bookworm
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /docker-entrypoint-initdb.d /var/lib/postgresql/data /var/run/postgresql \
 && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql \
 && chmod 0700 /var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PGDATA=/var/lib/postgresql/data LANG=C.UTF-8
# The server never runs as root (the official image drops to this user too).
USER postgres
STOPSIGNAL SIGINT
EXPOSE 5432
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
