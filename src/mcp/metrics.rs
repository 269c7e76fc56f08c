//! What the MCP relay counts: every message read, by the way it crossed
//! (`direction`) and what became of it (`kind`), in `schemagate_proxy_messages_total`.

use super::Direction;
use crate::core::metrics::{Metrics, Transport, PROXY_MESSAGES_TOTAL};
use metrics::Counter;

/// What became of a message the boundary read, the `kind` of
/// `schemagate_proxy_messages_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relayed {
    /// Forwarded exactly as received.
    Forwarded,
    /// Forwarded exactly as received, though it is not a JSON-RPC message (not JSON, or JSON
    /// that is not a JSON-RPC object).
    NotJsonRpc,
    /// Longer than `--max-message-bytes`: not forwarded; a request or a response awaited is
    /// answered with a JSON-RPC error instead.
    Oversized,
    /// A tool result replaced by an `isError` result carrying the verdict.
    Replaced,
    /// A request answered by schemagate without reaching the server (arguments rejected, too
    /// many calls in flight).
    Answered,
    /// Not relayed, and nothing in its place: an answer carrying a tool result whose id no
    /// client could place (neither a string nor a number), from an untrusted server.
    Withheld,
}

impl Relayed {
    pub const ALL: [Relayed; 6] = [
        Relayed::Forwarded,
        Relayed::NotJsonRpc,
        Relayed::Oversized,
        Relayed::Replaced,
        Relayed::Answered,
        Relayed::Withheld,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Relayed::Forwarded => "forwarded",
            Relayed::NotJsonRpc => "not_json_rpc",
            Relayed::Oversized => "oversized",
            Relayed::Replaced => "replaced",
            Relayed::Answered => "answered",
            Relayed::Withheld => "withheld",
        }
    }
}

/// `schemagate_proxy_messages_total` of one transport, by direction and kind, made (at zero)
/// when the first session of a server starts.
pub struct MessageMetrics {
    messages: [[Counter; Relayed::ALL.len()]; Direction::ALL.len()],
}

impl MessageMetrics {
    pub fn new(metrics: &Metrics, transport: Transport) -> Self {
        Self {
            messages: Direction::ALL.map(|direction| {
                Relayed::ALL.map(|what| {
                    metrics.counter(
                        PROXY_MESSAGES_TOTAL,
                        &[
                            ("transport", transport.as_str()),
                            ("direction", direction.as_str()),
                            ("kind", what.as_str()),
                        ],
                    )
                })
            }),
        }
    }

    pub fn count(&self, direction: Direction, what: Relayed) {
        self.messages[direction as usize][what as usize].increment(1);
    }
}
