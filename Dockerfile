# slurm-syncer image: build a wheel and its runtime dependencies in one stage,
# install them into a venv, then copy only that venv into a slim non-root runtime.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/slurm-syncer
COPY pyproject.toml README.md ./
COPY syncer ./syncer
# syncer/testing (the Kubernetes API emulator, the Slurm sandbox, the demo) is not for production: left out
# by .dockerignore, and removed here too for builders that ignore that file
RUN rm -rf syncer/testing \
 && /opt/slurm-syncer/bin/pip install --no-compile . \
 && /opt/slurm-syncer/bin/python -m compileall -q /opt/slurm-syncer/lib

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="slurm-syncer" \
      org.opencontainers.image.description="Keeps Slurm and Kubernetes in agreement about the same machines" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 65532 syncer \
 && useradd --system --uid 65532 --gid syncer --no-create-home --shell /usr/sbin/nologin syncer
COPY --from=build /opt/slurm-syncer /opt/slurm-syncer
ENV PATH=/opt/slurm-syncer/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["slurm-syncer", "run"]
