//! The harness's flags (clap) and the groups of legs they choose.

/// The harness's flags (after `cargo bench --bench load --`).
#[derive(clap::Parser)]
#[command(
    name = "load",
    about = "schemagate's load harness: the in-process ceiling and every transport, on one corpus"
)]
pub(crate) struct Opts {
    /// A corpus directory (`tools.json` + `results.jsonl`); default: the generated corpus.
    #[arg(long, env = "SCHEMAGATE_CORPUS")]
    pub(crate) corpus: Option<String>,
    /// Seconds per leg.
    #[arg(long, default_value_t = 3.0)]
    pub(crate) seconds: f64,
    /// Only these leg groups (comma-separated): in-process, rest (or rest-single, rest-batch),
    /// grpc (or grpc-unary, grpc-batch, grpc-stream), proxy, gateway, memory, abuse.
    #[arg(long, value_delimiter = ',')]
    pub(crate) only: Option<Vec<String>>,
    /// Only the memory curves (each in a fresh process).
    #[arg(long)]
    pub(crate) memory_only: bool,
    /// Only the regex part of the memory curves (run by `--memory-only` in a process of its own).
    #[arg(long)]
    pub(crate) regex_memory_only: bool,
    /// Only the abuse leg (run in a process of its own).
    #[arg(long)]
    pub(crate) abuse_only: bool,
    /// Skip the memory curves.
    #[arg(long)]
    pub(crate) skip_memory: bool,
    /// Server threads on the first half of the cores, client threads on the other half.
    #[arg(long)]
    pub(crate) pin: bool,
    /// Run the transport legs with authentication on: the server has a token, and every request
    /// carries it (compare with a run without, for what authorisation costs).
    #[arg(long)]
    pub(crate) with_token: bool,
    /// Run the transport legs with the registry in Redis (a redis-server the harness starts;
    /// Debian package `redis-server`), then measure registration latency and how long a change
    /// takes to reach a second replica.
    #[arg(long)]
    pub(crate) with_redis: bool,
    /// Run as the gateway leg's bare relay to this upstream URL (see `bare_relay`), and nothing
    /// else.
    #[arg(long, hide = true)]
    pub(crate) bare_relay: Option<String>,
    /// Run as the proxy leg's bare stdio relay in front of the command after `--` (see
    /// `bare_stdio`), and nothing else.
    #[arg(long, hide = true)]
    pub(crate) bare_stdio_relay: bool,
    /// The command after `--`, for `--bare-stdio-relay`.
    #[arg(last = true, hide = true, requires = "bare_stdio_relay")]
    pub(crate) command: Vec<String>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// A group of legs, as `--only` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    InProcess,
    RestSingle,
    RestBatch,
    GrpcUnary,
    GrpcBatch,
    GrpcStream,
    Memory,
    Abuse,
    Proxy,
    Gateway,
}

impl Group {
    pub(crate) const TRANSPORTS: [Group; 5] = [
        Group::RestSingle,
        Group::RestBatch,
        Group::GrpcUnary,
        Group::GrpcBatch,
        Group::GrpcStream,
    ];

    fn name(self) -> &'static str {
        match self {
            Group::InProcess => "in-process",
            Group::RestSingle => "rest-single",
            Group::RestBatch => "rest-batch",
            Group::GrpcUnary => "grpc-unary",
            Group::GrpcBatch => "grpc-batch",
            Group::GrpcStream => "grpc-stream",
            Group::Memory => "memory",
            Group::Abuse => "abuse",
            Group::Proxy => "proxy",
            Group::Gateway => "gateway",
        }
    }
}

impl Opts {
    pub(crate) fn from_args() -> Opts {
        <Opts as clap::Parser>::parse()
    }

    /// Whether the legs of `group` run: `--only rest` asks for every `rest-*` group.
    pub(crate) fn wants(&self, group: Group) -> bool {
        if group == Group::Memory {
            if self.memory_only {
                return true;
            }
            if self.skip_memory {
                return false;
            }
        } else if self.memory_only {
            return false;
        }
        let name = group.name();
        match &self.only {
            None => true,
            Some(asked) => asked.iter().any(|a| {
                let a = a.trim();
                name == a || name.strip_prefix(a).is_some_and(|r| r.starts_with('-'))
            }),
        }
    }

    pub(crate) fn only_memory(&self) -> bool {
        self.wants(Group::Memory)
            && !self.wants(Group::InProcess)
            && !Group::TRANSPORTS.iter().any(|&g| self.wants(g))
    }
}
