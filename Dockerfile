# shardq server image: the server only (no `pipeline` extra: pyspark is for `shardq analyze`,
# not for serving), as a non-root user, with the write-ahead log on a volume at /data.
#   docker build -t shardq .
#   docker run -d --name shardq -p 127.0.0.1:11300:11300 -v shardq-data:/data shardq
# "Running in production" in README.md has more. tests/integration/test_packaging.py runs
# this file's CMD and HEALTHCHECK against a real server (no container engine needed).
ARG PYTHON_IMAGE=python:3.11-slim

# Stage 1: a venv in /opt/shardq with shardq and its dependencies (all have binary wheels,
# so no compiler is needed); pip and its caches stay behind in this stage.
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/shardq
WORKDIR /src
COPY pyproject.toml ./
COPY shardq ./shardq
RUN /opt/shardq/bin/pip install . && /opt/shardq/bin/shardq --version

# Stage 2: the same base image (the venv's python links to its /usr/local/bin/python) plus
# the venv.
FROM ${PYTHON_IMAGE}
COPY --from=build /opt/shardq /opt/shardq
WORKDIR /
ENV PATH=/opt/shardq/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# A fixed uid, so a bind-mounted /data can be chowned to it on the host (10001:10001).
# /data is created and owned before VOLUME: changes after VOLUME would be discarded.
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin shardq \
    && mkdir /data && chown shardq:shardq /data && chmod 0700 /data
VOLUME /data
USER shardq
EXPOSE 11300
# The beanstalk protocol itself: connect, send `stats`, expect `OK <bytes>`. If you change
# the port in CMD, change it here too.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import socket,sys; s=socket.create_connection(('127.0.0.1',11300),3); s.sendall(b'stats\\r\\n'); sys.exit(s.makefile('rb').read(3)!=b'OK ')"]
# The supervisor is PID 1: it handles SIGTERM (stops the serving processes, then the shards,
# which sync their logs; about 3 s at most, within `docker stop`'s 10 s) and reaps its
# children.
STOPSIGNAL SIGTERM
# -l 0.0.0.0: inside a container 127.0.0.1 is the container's own loopback, which
# `docker run -p` cannot reach; the host decides what is exposed (publish the port on
# 127.0.0.1 or a private address, as above). No config file is read (there is no
# config/shardq.yaml in the working directory /): add flags after the image name, or mount
# one and pass --config FILE (see README.md).
CMD ["shardq", "serve", "-l", "0.0.0.0", "-p", "11300", "-b", "/data"]
