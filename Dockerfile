# tech-log-backend service image. No registry is reachable here, so nothing
# is pulled: deploy/image/build.sh (make image) builds a static binary on the
# host (CGO_ENABLED=0) and stages it with the example policy file next to
# this Dockerfile, then builds FROM scratch.
#
# The image holds two files: /tech-log-backend and
# /etc/tech-log-backend/policies.json (app-bootstrap/examples/policies.json,
# an example: mount your own over it or point APP_RATE_LIMIT_POLICIES_FILE
# elsewhere). There are no CA certificates: with Redis TLS, mount a CA bundle
# and set APP_RATE_LIMIT_REDIS_TLS_CA_FILE. There is no shell and no curl:
# the HEALTHCHECK runs the binary's own -healthcheck mode (GET /healthz on
# APP_WEB_ADDR, exit 0 on a 200).
#
# Two listeners: the public one on :8080 (the API, /healthz and a /readyz
# that says ready or not) and the admin one on :9090 (APP_WEB_ADMIN_ADDR:
# /metrics and the detailed /readyz document). Publish only 8080 to
# clients; let Prometheus and operators reach 9090 on a private network.
FROM scratch
COPY tech-log-backend /tech-log-backend
COPY policies.json /etc/tech-log-backend/policies.json
ENV APP_WEB_ADDR=:8080 \
    APP_WEB_ADMIN_ADDR=:9090 \
    APP_LOG_FORMAT=json
# A numeric non-root user: scratch has no /etc/passwd.
USER 65532:65532
EXPOSE 8080 9090
HEALTHCHECK --interval=10s --timeout=4s --start-period=5s --retries=3 \
    CMD ["/tech-log-backend", "-healthcheck"]
ENTRYPOINT ["/tech-log-backend"]
