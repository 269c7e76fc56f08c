//! What every socket adapter shares: connection limits and timeouts ([`listen`]), TLS ([`tls`]),
//! the `Host` and `Origin` checks against DNS rebinding ([`origins`]), and the small admin server (`/metrics`, `/healthz`) of commands that serve no REST port
//! ([`admin`]).

pub mod admin;
pub mod listen;
pub mod origins;
mod timed_io;
pub mod tls;

/// Which protocols a port speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocols {
    /// HTTP/1.1 and HTTP/2 with prior knowledge (the REST port).
    Http1AndHttp2,
    /// HTTP/2 only (gRPC).
    Http2,
}
