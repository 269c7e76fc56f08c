//! `schemagate gateway` run in this process, on a listener bound to port 0 (no port probed and
//! raced for), for the tests that need no process of its own (those that count a stdio route's
//! processes run the binary: [`super::mcp::Gateway`]).

use schemagate::config::GatewayArgs;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A gateway running in this process; it drains and stops when dropped.
pub struct InProcess {
    pub addr: SocketAddr,
    _shutdown: oneshot::Sender<()>,
}

impl InProcess {
    /// The gateway with `routes` (NAME=URL) and `flags`, serving once this returns.
    pub async fn start(routes: &[String], flags: &[&str]) -> Self {
        let mut argv = vec![
            "gateway".to_owned(),
            "--contract-wait-ms".to_owned(),
            "3000".to_owned(),
            "--drain-delay-secs".to_owned(),
            "0".to_owned(),
            "--policy-poll-interval".to_owned(),
            "0".to_owned(),
        ];
        for route in routes {
            argv.push("--route".to_owned());
            argv.push(route.clone());
        }
        argv.extend(flags.iter().map(|f| (*f).to_owned()));
        let args = <GatewayArgs as clap::Parser>::parse_from(argv);
        let config = args.gateway_config().expect("the gateway's configuration");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(schemagate::gateway::run(config, listener, async move {
            let _ = rx.await;
        }));
        InProcess {
            addr,
            _shutdown: tx,
        }
    }

    /// The URL of route `route`.
    pub fn url(&self, route: &str) -> String {
        format!("http://{}/mcp/{route}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}
