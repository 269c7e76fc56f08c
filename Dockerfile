# Build: the release binary only. No protoc is needed (the proto is compiled by protox).
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
# The patched stand-in crate and the dev-only testkit: Cargo reads every path dependency's
# manifest to resolve the lockfile, even for the binary alone.
COPY build-support build-support
COPY testkit testkit
COPY proto proto
COPY src src
COPY benches benches
COPY examples examples
RUN cargo build --release --locked --bin schemagate

# Run: a minimal image with the C runtime, as a non-root user.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/schemagate /usr/local/bin/schemagate
USER 10001:10001
EXPOSE 8080 50051
ENV SCHEMAGATE_LOG_FORMAT=json
ENTRYPOINT ["/usr/local/bin/schemagate"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--grpc-listen", "0.0.0.0:50051"]
