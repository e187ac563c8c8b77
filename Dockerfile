# Multi-stage build of the `fauxpay` binary (provider, merchant, load generator, demo).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin fauxpay

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/fauxpay /usr/local/bin/fauxpay
EXPOSE 12111 8080
ENTRYPOINT ["fauxpay"]
CMD ["serve", "--addr", "0.0.0.0:12111"]
