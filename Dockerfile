# The seat's image: a base pinned by digest, the overlay copied file by file over its vllm package,
# checked once, at build, against the lock built in (the image's ID then stands for it: `seat up`
# compares it with the ID `seat build` recorded).
# Two ways to build it, with the same checks and labels:
#   docker build --build-arg BASE_IMAGE=REPO@sha256:... -t NAME .   (after `seat overlay fetch`;
#       copies the whole overlay; .dockerignore keeps the context to what is copied here)
#   seat build [PROFILE]   (the fast path: only the files the base lacks, a reproducible layer)
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

ARG BASE_IMAGE
# --- begin: rendered by `seat render` from the default profile and overlay/overlay.lock ---
ARG BASE_TAG="voipmonitor/vllm:chthonic-consecration-f1190eab-b12x0ff2847-pr20-cu132"
ARG VLLM_DIR="/opt/venv/lib/python3.12/site-packages/vllm"
ARG SMOKE_IMPORTS="vllm.config.speculative vllm.v1.spec_decode.dspark vllm.v1.worker.gpu.spec_decode.dspark"
ARG SEAT_PORT="9406"
ARG SEAT_PROFILE="dsv4-flash-dspark-tp4"
ARG OVERLAY_SOURCE="https://github.com/brandonmmusic-max/deepspark"
ARG OVERLAY_COMMIT="731bbcb90b64b6a2f60a882ea118a557b9815263"
ARG OVERLAY_TREE="2706883663e835474b156955942028fe6678de97"
ARG OVERLAY_LOCK_SHA256="c8c8a5086e4078a538e9ba944641c854fd3c83f843dacaa7e86c63b02976aa41"
# --- end: rendered ---
ARG SEAT_SOURCE=seatkit
# `seat build` passes `git describe --always --dirty`; by hand, pass it the same way.
ARG SEAT_REVISION=""
# Which b12x kernels the image carries: `seat build` records them (and copies a pinned b12x overlay,
# overlay/b12x.lock, with the vllm one); a plain build records none and copies no b12x overlay.
ARG B12X_DIR=/opt/venv/lib/python3.12/site-packages/b12x
ARG B12X_COMMIT=""
ARG B12X_DENSE_SHA256=""
ARG B12X_OVERLAY=""

# Copied over the package, never mounted over it: the base's compiled extensions and the folders
# the overlay lacks stay in place. `seat build` passes OVERLAY_FILES=overlay/root/ and
# OVERLAY_INTO=/ with the overlay at its full path in its context, every folder at one fixed time:
# copied into /, even the package's own folder takes that time, so the layer is the same on every
# build (copied into the package, the package's folder would take the build's time).
ARG OVERLAY_FILES=overlay/vllm/
ARG OVERLAY_INTO=${VLLM_DIR}/
COPY ${OVERLAY_FILES} ${OVERLAY_INTO}
COPY image/ /opt/seatkit/
# overlay/copied (from `seat build` only) lists what it copied: build-check.sh removes the base's
# bytecode of each, and the list.
COPY overlay/overlay.lock overlay/b12x.loc[k] overlay/copie[d] /opt/seatkit/

# PYTHONDONTWRITEBYTECODE: the seat writes no bytecode, so a .pyc written into a running seat is
# someone else's (seat doctor judges the container's own layer); the overlay's modules, whose base
# bytecode the build drops, compile in memory at each start.
ENV SEAT_OVERLAY_DIR=${VLLM_DIR} \
    SEAT_B12X_DIR=${B12X_DIR} \
    SEAT_PORT=${SEAT_PORT} \
    PYTHONDONTWRITEBYTECODE=1

# The labels must describe the lock built in; then the overlay check (every locked file, copied or
# the base's own, as locked, and none hidden by a package of the same name); then the smoke
# imports, which fail the build naming the module when the base lacks what the overlay imports.
RUN PYTHONDONTWRITEBYTECODE=1 /opt/seatkit/build-check.sh "$OVERLAY_LOCK_SHA256" "$SMOKE_IMPORTS"

LABEL org.opencontainers.image.title="seatkit seat ${SEAT_PROFILE}" \
      org.opencontainers.image.source="${SEAT_SOURCE}" \
      org.opencontainers.image.revision="${SEAT_REVISION}" \
      org.opencontainers.image.base.name="${BASE_TAG}" \
      org.opencontainers.image.base.digest="${BASE_IMAGE}" \
      io.seatkit.profile="${SEAT_PROFILE}" \
      io.seatkit.overlay.source="${OVERLAY_SOURCE}" \
      io.seatkit.overlay.commit="${OVERLAY_COMMIT}" \
      io.seatkit.overlay.tree="${OVERLAY_TREE}" \
      io.seatkit.overlay.lock.sha256="${OVERLAY_LOCK_SHA256}" \
      io.seatkit.overlay.dir="${VLLM_DIR}" \
      io.seatkit.b12x.dir="${B12X_DIR}" \
      io.seatkit.b12x.commit="${B12X_COMMIT}" \
      io.seatkit.b12x.dense_sha256="${B12X_DENSE_SHA256}" \
      io.seatkit.b12x.overlay="${B12X_OVERLAY}"

# A cold JIT cache keeps /health silent for 15-20 minutes.
HEALTHCHECK --interval=30s --timeout=5s --start-period=40m --retries=3 CMD ["/opt/seatkit/health.sh"]

# The seat's command runs as given, whatever entrypoint the base declares.
ENTRYPOINT []
