//! Compiles the gRPC contract with protox (pure Rust): no system `protoc` is needed.

use prost::Message;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let fds = protox::compile(["schemagate/v1/validator.proto"], ["proto"])?;
    // The encoded descriptors serve gRPC reflection, so grpcurl works without the .proto file.
    std::fs::write(
        out_dir.join("schemagate_descriptor.bin"),
        fds.encode_to_vec(),
    )?;
    tonic_prost_build::configure()
        .bytes(".schemagate.v1")
        // The service does not depend on tonic's transport; clients build their own channel.
        .build_transport(false)
        // A message that does not decode is the client's error, not INTERNAL.
        .codec_path("crate::grpc::codec::Codec")
        .compile_fds(fds)?;
    Ok(())
}
