# syntax=docker/dockerfile:1
# walc's container image: the fully static walc binary (musl) on an empty base.
#
#   docker build -t walc .
#   docker build --build-arg WALC_BUSYBOX=0 -t walc:minimal .   # walc alone
#
# The builder runs `make static`, the target CI builds and tests (deploy/static/build.sh), and
# assembles the final file tree in /rootfs: the binary at /usr/local/bin/walc; the CA bundle at
# /etc/ssl/certs/ca-certificates.crt (walc's default CA file for S3 over HTTPS); /etc/passwd and
# /etc/group naming the non-root user 65532 (walc); a world-writable /tmp.
#
# Unless WALC_BUSYBOX=0, busybox-static is there too, as /usr/local/bin/busybox only (no /bin/sh,
# no applet links): the Helm chart's sidecar initContainer runs `busybox cp` to copy walc into the
# PostgreSQL pod, which an image without any other program cannot do.
#
# BUILDER_BASE: any Debian bookworm image; make image builds on one made locally with
# debootstrap (deploy/image/build.sh), as no registry is reachable there.

ARG BUILDER_BASE=debian:bookworm-slim
FROM ${BUILDER_BASE} AS builder
ARG WALC_BUSYBOX=1
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends busybox-static ca-certificates make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The static toolchain (musl, cmake, autotools, deb-src) in a layer of its own, rebuilt only when
# deploy/static or deploy/apt.sh change: `build.sh key` installs it and prints the cache key.
COPY deploy/apt.sh deploy/
COPY deploy/static/ deploy/static/
RUN deploy/static/build.sh key
COPY . .
RUN --mount=type=cache,target=/var/cache/walc-static make static \
    && ./walc-static version \
    && mkdir -p /rootfs/usr/local/bin /rootfs/etc/ssl/certs /rootfs/tmp \
    && install -m 0755 walc-static /rootfs/usr/local/bin/walc \
    && install -m 0644 /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt \
    && echo 'walc:x:65532:65532:walc:/nonexistent:/sbin/nologin' >/rootfs/etc/passwd \
    && echo 'walc:x:65532:' >/rootfs/etc/group \
    && chmod 1777 /rootfs/tmp \
    && if [ "$WALC_BUSYBOX" != 0 ]; then install -m 0755 /bin/busybox /rootfs/usr/local/bin/busybox; fi

FROM scratch
LABEL org.opencontainers.image.title="walc" \
      org.opencontainers.image.description="PostgreSQL backup and WAL archiving, WAL-G compatible"
COPY --from=builder /rootfs/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/walc"]
CMD ["help"]
