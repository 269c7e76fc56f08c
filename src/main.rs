//! The binary only wires: parse flags, set up logging, bind, run.

use anyhow::Context;
use clap::Parser;
use schemagate::config::{Cli, Command, LogFormat};
use tracing_subscriber::EnvFilter;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // A runtime thread out of work gives back the memory it freed (answers it wrote).
        .on_thread_park(schemagate::memory::return_freed)
        .build()
        .context("cannot start the async runtime")?
        .block_on(run(cli))
}

async fn run(Cli { command }: Cli) -> anyhow::Result<()> {
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
