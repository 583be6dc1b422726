# troupe's container image: the scheduler only (no test or dev extras), non-root.
#   docker build -t troupe:0.1.0 .
# scripts/build-image builds the same image without Docker or a pulled base image
# (Debian's python3 in a root filesystem made by mmdebstrap, committed with buildah):
# keep the user, entry point, command, port and environment of the two in step
# (tests/manifests/test_dockerfile.py, tests/image/test_build_image.py).
# Runs as UID/GID 65532 with a read-only root filesystem (manifests/deployment.yaml);
# bytecode is compiled at build time because nothing can be written at run time.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY troupe ./troupe
# A plain `pip install .`: the runtime dependencies only. numpy and uvloop come as
# manylinux wheels, so no compiler is needed.
RUN pip install --no-cache-dir --root-user-action=ignore --prefix=/install . \
 && python -m compileall -q /install

FROM python:3.11-slim
COPY --from=build /install /usr/local
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# /metrics, /healthz, /livez, /readyz
EXPOSE 10259
ENTRYPOINT ["troupe"]
CMD ["run", "--config", "/etc/troupe/config.yaml"]
