//! The binary only wires: parse flags, set up logging, bind, run.

use anyhow::Context;
use clap::Parser;
use schemagate::config::{Cli, Command, LogArgs, LogFormat};
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut runtime = match &cli.command {
        // One stdio session a process: one thread relays both directions, with no wake-ups
        // between threads (a large payload's check still runs on the gate's worker threads).
        Command::Proxy(_) => tokio::runtime::Builder::new_current_thread(),
        // `--relay-threads` threads relay (a large payload's check, a compile or a batch runs
        // on the gate's worker threads); 0 leaves tokio's default (one per core, or
        // TOKIO_WORKER_THREADS).
        Command::Gateway(args) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            if args.relay_threads > 0 {
                builder.worker_threads(args.relay_threads);
            }
            builder
        }
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    runtime
        .enable_all()
        // A runtime thread out of work gives back the memory it freed (answers it wrote).
        .on_thread_park(schemagate::ops::memory::return_freed)
        .build()
        .context("cannot start the async runtime")?
        .block_on(run(cli))
}

/// Logs to stderr (stdout is the MCP client's, under `proxy`).
fn init_logs(log: &LogArgs) -> anyhow::Result<()> {
    let level = log.log_level.as_str();
    let filter = EnvFilter::try_new(level)
        .with_context(|| format!("--log-level {level:?} is not a valid filter"))?;
    // Colour only on a terminal: hosts write an MCP server's stderr to log files.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match log.log_format {
        LogFormat::Json => logs.json().init(),
        LogFormat::Text => logs.init(),
    }
    Ok(())
}

async fn run(Cli { command }: Cli) -> anyhow::Result<()> {
    match command {
        Command::Proxy(args) => {
            init_logs(&args.log)?;
            let code = schemagate::proxy::run(
                args.proxy_config()?,
                schemagate::ops::shutdown::signal_or_hangup(),
            )
            .await?;
            std::process::exit(code)
        }
        Command::Gateway(args) => {
            init_logs(&args.log)?;
            let listener = tokio::net::TcpListener::bind(args.listen)
                .await
                .with_context(|| format!("cannot listen on {} (--listen)", args.listen))?;
            schemagate::gateway::run(
                args.gateway_config()?,
                listener,
                schemagate::ops::shutdown::signal(),
            )
            .await
        }
        Command::Diff(args) => {
            let output = args.output;
            let config = match args.diff_config() {
                Ok(config) => config,
                Err(e) => std::process::exit(schemagate::cli::diff::refused(
                    output,
                    &e,
                    &mut std::io::stdout().lock(),
                    &mut std::io::stderr().lock(),
                )),
            };
            let code = schemagate::cli::diff::run(
                config,
                &mut std::io::stdout().lock(),
                &mut std::io::stderr().lock(),
            );
            std::process::exit(code)
        }
        Command::Check(args) => {
            let config = match args.check_config(std::io::stderr().is_terminal()) {
                Ok(config) => config,
                Err(e) => {
                    eprintln!("schemagate check: {e:#}");
                    std::process::exit(schemagate::cli::check::BAD_INPUT);
                }
            };
            // Neither locked: the progress bar draws on stderr from another thread, and with
            // `--verdicts -` the verdicts go to stdout from another.
            let code =
                schemagate::cli::check::run(config, &mut std::io::stdout(), &mut std::io::stderr())
                    .await;
            std::process::exit(code)
        }
        Command::Serve(args) => {
            init_logs(&args.log)?;
            let http = tokio::net::TcpListener::bind(args.listen)
                .await
                .with_context(|| format!("cannot listen on {} (--listen)", args.listen))?;
            let grpc = tokio::net::TcpListener::bind(args.grpc_listen)
                .await
                .with_context(|| {
                    format!("cannot listen on {} (--grpc-listen)", args.grpc_listen)
                })?;
            schemagate::serve::run(
                args.serve_config()?,
                schemagate::Listeners { http, grpc },
                schemagate::ops::shutdown::signal(),
            )
            .await
        }
    }
}
