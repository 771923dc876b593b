# syntax=docker/dockerfile:1
# gitsync: one image, `gitsync run` by default. Built with BuildKit:
#   docker build -t ghcr.io/example/gitsync:0.2.0 .
# The Pod it is made for (deploy/deployment.yaml) runs it as UID 65532 with a
# read-only root filesystem; HOME, TMPDIR and the Git cache are emptyDirs there.
# The cache is a directory gitsync makes (0700) inside its volume: a volume is
# open to everyone, and gitsync refuses a cache that is not private to it.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: the gitsync wheel, and wheels of its pinned dependencies ---------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY requirements.lock ./
# the dependency wheels change less often than the code: their layer is cached
RUN pip wheel --wheel-dir /wheels --no-deps --requirement requirements.lock
# README.md: the package metadata (pyproject.toml readme) includes it
COPY pyproject.toml README.md ./
COPY gitsync/ gitsync/
RUN pip wheel --wheel-dir /wheels --no-deps .

# --- runtime -------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}

# git for the source, ssh for git@ remotes (and ssh-keygen for SSH-signed commits), gpg
# for OpenPGP-signed commits (--verify-commits); nothing else
RUN apt-get update \
 && apt-get install --yes --no-install-recommends git openssh-client gpg \
 && rm -rf /var/lib/apt/lists/*

# a passwd entry for 65532: ssh refuses to run for a UID it cannot look up. No
# login shell, and a home that is an emptyDir in the Pod.
RUN groupadd --system --gid 65532 gitsync \
 && useradd --system --uid 65532 --gid 65532 --home-dir /home/gitsync \
      --no-create-home --shell /usr/sbin/nologin gitsync \
 && install --directory --owner=65532 --group=65532 --mode=0700 \
      /home/gitsync /var/cache/gitsync

# exactly the pinned versions, from the wheels built above: no index, no compiler.
# pip compiles the .pyc files here, so nothing is written at run time.
COPY requirements.lock /tmp/requirements.lock
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --disable-pip-version-check --no-index \
      --find-links=/wheels --constraint /tmp/requirements.lock gitsync \
 && pip check \
 && rm /tmp/requirements.lock

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/home/gitsync \
    TMPDIR=/tmp \
    GITSYNC_CACHE_DIR=/var/cache/gitsync/git

USER 65532:65532
WORKDIR /home/gitsync
EXPOSE 8080
ENTRYPOINT ["gitsync"]
CMD ["run"]
