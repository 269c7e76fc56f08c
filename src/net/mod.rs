//! What every socket adapter shares: start-up and drain ([`drain`]), connection limits and
//! timeouts ([`listen`]), the bounded read of a request body ([`body`]), TLS ([`tls`]),
//! the `Host` and `Origin` checks against DNS rebinding ([`origins`]), and the small admin server (`/metrics`, `/healthz`) of commands that serve no REST port
//! ([`admin`]).

pub mod admin;
pub mod body;
pub mod drain;
pub mod listen;
pub mod origins;
mod timed_io;
pub mod tls;
mod watchdog;

/// Which protocols a port speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocols {
    /// HTTP/1.1 and HTTP/2 with prior knowledge (the REST port).
    Http1AndHttp2,
    /// HTTP/2 only (gRPC).
    Http2,
}
