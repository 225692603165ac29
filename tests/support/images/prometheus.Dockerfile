# Prometheus from Debian's own package, for the compose stack test (no image can be pulled):
# on the debootstrapped base, built with `--network host` so apt reaches the Debian mirror.
# The entrypoint is the binary, as in prom/prometheus: compose's `command` gives the flags.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
       prometheus wget \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus
ENTRYPOINT ["/usr/bin/prometheus"]
