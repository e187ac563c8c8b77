# Multi-stage build of the `fauxpay` binary (provider, merchant, load generator, demo).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin fauxpay

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl tini \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/fauxpay /usr/local/bin/fauxpay
EXPOSE 12111 8080
# tini is PID 1 and fauxpay its child: a SIGTERM that comes before fauxpay installs its
# handler (its first milliseconds) stops it as it stops any process, where a PID 1 with
# no handler ignores it until `docker stop` sends SIGKILL.
ENTRYPOINT ["/usr/bin/tini", "--", "fauxpay"]
CMD ["serve", "--addr", "0.0.0.0:12111"]
