# flagsvc: build the single executable with Node + npm (npm brings Bun), ship only the binary.
#   docker build -t flagsvc .
#   docker run -p 8443:8443 -v flagsvc-data:/data flagsvc

FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build && ./dist/flagsvc version

# The Bun-compiled binary links against glibc: a Debian base, not Alpine.
FROM debian:bookworm-slim
RUN groupadd --gid 10001 flagsvc \
 && useradd --no-log-init --uid 10001 --gid flagsvc --home-dir /data --no-create-home --shell /usr/sbin/nologin flagsvc \
 && mkdir /data \
 && chown flagsvc:flagsvc /data \
 && chmod 0750 /data
COPY --from=build /src/dist/flagsvc /usr/local/bin/flagsvc
ENV SVC_DATA_DIR=/data
USER 10001:10001
WORKDIR /data
VOLUME /data
EXPOSE 8443
# SIGTERM drains in-flight requests for up to 10 s: give `docker stop` more (--stop-timeout 15).
HEALTHCHECK --interval=30s --timeout=10s --start-period=15s --retries=3 CMD ["flagsvc", "healthcheck"]
ENTRYPOINT ["flagsvc"]
CMD ["serve"]
