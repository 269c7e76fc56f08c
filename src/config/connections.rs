//! How connections are held to account: flags `serve` and `gateway` share.

use super::*;
use crate::net::listen::{connections_from_fd_limit, ConnectionLimits, Http2Limits};

/// Connections: their number, timeouts and HTTP/2 settings.
#[derive(Debug, Clone, clap::Args)]
pub struct ConnectionArgs {
    /// Most open connections over every port; 0 derives it from the open-file limit (raised to
    /// its hard limit at start-up). Past it, new connections are closed at once and counted.
    #[arg(long, env = "SCHEMAGATE_MAX_CONNECTIONS", default_value_t = 0)]
    pub max_connections: usize,
    /// Seconds an HTTP/1 client has to send a request's headers (also how long an idle
    /// keep-alive HTTP/1 connection stays open).
    #[arg(long, env = "SCHEMAGATE_HEADER_READ_TIMEOUT_SECS", default_value_t = DEFAULT_HEADER_READ_TIMEOUT_SECS)]
    pub header_read_timeout_secs: u64,
    /// Seconds a request body (REST, a unary gRPC message, a message POSTed to the gateway) has
    /// to arrive in full: 408 (gRPC DEADLINE_EXCEEDED) past it.
    #[arg(long, env = "SCHEMAGATE_BODY_READ_TIMEOUT_SECS", default_value_t = DEFAULT_BODY_READ_TIMEOUT_SECS)]
    pub body_read_timeout_secs: u64,
    /// Seconds a connection may stay open with no request in flight.
    #[arg(long, env = "SCHEMAGATE_IDLE_TIMEOUT_SECS", default_value_t = DEFAULT_IDLE_TIMEOUT_SECS)]
    pub idle_timeout_secs: u64,
    /// Seconds an answer may wait for the client to read it before the connection is closed.
    #[arg(long, env = "SCHEMAGATE_WRITE_TIMEOUT_SECS", default_value_t = DEFAULT_WRITE_TIMEOUT_SECS)]
    pub write_timeout_secs: u64,
    /// HTTP/2 streams one connection may have open at once.
    #[arg(long, env = "SCHEMAGATE_HTTP2_MAX_CONCURRENT_STREAMS", default_value_t = DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS)]
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2 flow-control window of each stream, in bytes.
    #[arg(long, env = "SCHEMAGATE_HTTP2_STREAM_WINDOW_BYTES", default_value_t = DEFAULT_HTTP2_STREAM_WINDOW)]
    pub http2_stream_window_bytes: u32,
    /// HTTP/2 flow-control window of each connection, in bytes.
    #[arg(long, env = "SCHEMAGATE_HTTP2_CONNECTION_WINDOW_BYTES", default_value_t = DEFAULT_HTTP2_CONNECTION_WINDOW)]
    pub http2_connection_window_bytes: u32,
    /// Seconds between HTTP/2 keep-alive pings on a quiet connection; a peer that does not answer
    /// one within the same time is disconnected.
    #[arg(long, env = "SCHEMAGATE_HTTP2_KEEPALIVE_SECS", default_value_t = DEFAULT_HTTP2_KEEPALIVE_SECS)]
    pub http2_keepalive_secs: u64,
}

impl ConnectionArgs {
    /// Refuses values no connection could be served under.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (name, value) in [
            ("--header-read-timeout-secs", self.header_read_timeout_secs),
            ("--body-read-timeout-secs", self.body_read_timeout_secs),
            ("--idle-timeout-secs", self.idle_timeout_secs),
            ("--write-timeout-secs", self.write_timeout_secs),
            ("--http2-keepalive-secs", self.http2_keepalive_secs),
        ] {
            anyhow::ensure!(value > 0, "{name} must be at least 1");
        }
        anyhow::ensure!(
            self.http2_stream_window_bytes >= 65_535 && self.http2_connection_window_bytes >= 65_535,
            "--http2-stream-window-bytes and --http2-connection-window-bytes must be at least 65535 (HTTP/2's initial window)"
        );
        Ok(())
    }

    /// The limits every connection is served under (raises the open-file limit when
    /// --max-connections is 0).
    pub fn limits(&self) -> ConnectionLimits {
        let max_connections = match self.max_connections {
            0 => connections_from_fd_limit(),
            n => n,
        };
        ConnectionLimits {
            max_connections,
            header_read_timeout: Duration::from_secs(self.header_read_timeout_secs),
            idle_timeout: Duration::from_secs(self.idle_timeout_secs),
            write_timeout: Duration::from_secs(self.write_timeout_secs),
            http2: Http2Limits {
                max_concurrent_streams: self.http2_max_concurrent_streams,
                stream_window: self.http2_stream_window_bytes,
                connection_window: self.http2_connection_window_bytes,
                keepalive_interval: Duration::from_secs(self.http2_keepalive_secs),
                keepalive_timeout: Duration::from_secs(self.http2_keepalive_secs),
            },
        }
    }
}
