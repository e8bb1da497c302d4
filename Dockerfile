# The agentsvc service image (docs/deploy.md, "Containers").
#
#   docker build -t agentsvc .
#   docker compose up          # with PostgreSQL (compose.yaml; write .env first)
#
# Two stages: the first builds the project's wheel and every dependency's, the
# second installs them into a slim Python with no compiler, no build tools and no
# pip cache, and runs the service as an unprivileged user.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# only what the wheel is made of (.dockerignore keeps the rest out of the context)
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="agentsvc" \
      org.opencontainers.image.description="Agent Conversation Service" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    AGENTSVC_DATA_DIR=/var/lib/agentsvc \
    AGENTSVC_LOCAL_DEFAULTS=false \
    AGENTSVC_LOG_FORMAT=json
# The wheels are mounted from the first stage for this one command, so they are not
# copied into a layer of the image.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels agentsvc \
 && groupadd --system --gid 10001 agentsvc \
 && useradd --system --uid 10001 --gid agentsvc --no-create-home \
      --home-dir /var/lib/agentsvc --shell /usr/sbin/nologin agentsvc \
 && install -d -o agentsvc -g agentsvc -m 0700 /var/lib/agentsvc
WORKDIR /var/lib/agentsvc
# numeric, so that an orchestrator's "run as non-root" check can verify it
USER 10001:10001
EXPOSE 8000
# /healthz answers while the process serves HTTP (docs/operations.md); no curl in a
# slim image, so Python's urllib asks
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % (os.environ.get('AGENTSVC_PORT') or '8000'), timeout=4)"]
ENTRYPOINT ["agentsvc"]
CMD ["serve", "--host", "0.0.0.0"]
