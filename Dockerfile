# Charter's container image: the wheel built from this checkout, run as a non-root user,
# `charter serve` as the entrypoint and /readyz as the health check.
#
#   docker build -t charter .
#   docker run -p 8750:8750 --env-file .env charter     # see docs/operations.md
#
# The image carries the example project (charter init's `basic`) under /srv/project with the
# production deployment file of container/charter.deploy.yaml: secrets come from the
# environment, the store from CHARTER_STORE. Mount your own project over /srv/project.

FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m pip install --no-cache-dir build==1.2.2.post1 \
    && python -m build --wheel --outdir /dist .

FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    CHARTER_DEPLOY=/srv/project/charter.deploy.yaml
COPY --from=build /dist /dist
RUN python -m pip install --no-cache-dir "$(ls /dist/charter-*.whl)[server,mcp,postgres,s3,otel]" \
    && rm -rf /dist \
    && useradd --system --uid 10001 --home-dir /srv --shell /usr/sbin/nologin charter \
    && charter init --example basic /srv/project \
    && rm -rf /srv/project/.charter /srv/project/charter.deploy.yaml \
    && mkdir -p /srv/audit \
    && chown -R charter:charter /srv
COPY --chown=charter:charter container/charter.deploy.yaml /srv/project/charter.deploy.yaml
USER charter
WORKDIR /srv/project
EXPOSE 8750
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8750/readyz', timeout=2).status != 200)"]
ENTRYPOINT ["charter", "serve", "--host", "0.0.0.0", "--port", "8750", "--project", "/srv/project"]
