//! The binary only wires: parse flags, set up logging, bind, run.

use anyhow::Context;
use clap::Parser;
use schemagate::config::{Cli, Command, LogFormat};
use tracing_subscriber::EnvFilter;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Cli { command } = Cli::parse();
    match command {
        Command::Serve(args) => {
            let filter = EnvFilter::try_new(&args.log_level).with_context(|| {
                format!("--log-level {:?} is not a valid filter", args.log_level)
            })?;
            let logs = tracing_subscriber::fmt().with_env_filter(filter);
            match args.log_format {
                LogFormat::Json => logs.json().init(),
                LogFormat::Text => logs.init(),
            }
            let http = tokio::net::TcpListener::bind(args.listen)
                .await
                .with_context(|| format!("cannot listen on {} (--listen)", args.listen))?;
            let grpc = tokio::net::TcpListener::bind(args.grpc_listen)
                .await
                .with_context(|| {
                    format!("cannot listen on {} (--grpc-listen)", args.grpc_listen)
                })?;
            schemagate::run(
                args,
                schemagate::Listeners { http, grpc },
                schemagate::shutdown::signal(),
            )
            .await
        }
    }
}
