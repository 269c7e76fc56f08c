//! The name, kind and description of every series schemagate exports: the one table the
//! renderer's `# HELP` lines, the docs checks and the dashboards' names come from.

pub const VALIDATIONS_TOTAL: &str = "schemagate_validations_total";
pub const FIELD_FAILURES_TOTAL: &str = "schemagate_field_failures_total";
pub const VALIDATION_DURATION_SECONDS: &str = "schemagate_validation_duration_seconds";
pub const TEXT_DRIFT_TOTAL: &str = "schemagate_text_drift_total";
pub const CACHE_HITS_TOTAL: &str = "schemagate_cache_hits_total";
pub const CACHE_MISSES_TOTAL: &str = "schemagate_cache_misses_total";
pub const CACHE_EVICTIONS_TOTAL: &str = "schemagate_cache_evictions_total";
pub const CACHE_ENTRIES: &str = "schemagate_cache_entries";
pub const SCHEMA_COMPILES_TOTAL: &str = "schemagate_schema_compiles_total";
pub const SCHEMA_COMPILE_DURATION_SECONDS: &str = "schemagate_schema_compile_duration_seconds";
pub const SCHEMA_COMPILE_FAILURES_TOTAL: &str = "schemagate_schema_compile_failures_total";
pub const REQUEST_ERRORS_TOTAL: &str = "schemagate_request_errors_total";
pub const POLICY_RELOADS_TOTAL: &str = "schemagate_policy_reloads_total";
pub const SERIES_FOLDED_TOTAL: &str = "schemagate_series_folded_total";
pub const SHED_TOTAL: &str = "schemagate_shed_total";
pub const CANCELLED_TOTAL: &str = "schemagate_cancelled_total";
pub const CONNECTIONS_OPEN: &str = "schemagate_connections_open";
pub const CONNECTIONS_REFUSED_TOTAL: &str = "schemagate_connections_refused_total";
pub const CONNECTIONS_CLOSED_TOTAL: &str = "schemagate_connections_closed_total";
pub const AUTH_FAILURES_TOTAL: &str = "schemagate_auth_failures_total";
pub const REGISTRY_ERRORS_TOTAL: &str = "schemagate_registry_errors_total";
pub const REGISTRY_CONNECTED: &str = "schemagate_registry_connected";
pub const REGISTRY_RESYNCS_TOTAL: &str = "schemagate_registry_resyncs_total";
pub const PROXY_MESSAGES_TOTAL: &str = "schemagate_proxy_messages_total";
pub const CONTRACT_CHANGES_TOTAL: &str = "schemagate_contract_changes_total";
pub const SHADOW_VALIDATIONS_TOTAL: &str = "schemagate_shadow_validations_total";
pub const RECORD_LINES_TOTAL: &str = "schemagate_record_lines_total";

/// The `reason` values of `schemagate_auth_failures_total`.
pub const AUTH_FAILURE_REASONS: [&str; 4] = ["missing", "unknown", "scope", "server"];

/// What kind of series a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    /// In seconds.
    Histogram,
}

/// One series: its name, kind and description (its `# HELP` line).
#[derive(Debug, Clone, Copy)]
pub struct Series {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

/// Every series schemagate exports: the one table names, descriptions and [`ALL`] come from.
pub const SERIES: [Series; 27] = [
    Series { name: VALIDATIONS_TOTAL, kind: Kind::Counter, help: "Checks by server, tool, tier, payload (result|arguments|instance), attempt (first|retry) and outcome (valid|invalid|skipped|tool_error|unchecked)." },
    Series { name: FIELD_FAILURES_TOTAL, kind: Kind::Counter, help: "Failing fields by server, tool, payload, instance path (array indices folded to *) and keyword." },
    Series { name: VALIDATION_DURATION_SECONDS, kind: Kind::Histogram, help: "Time to answer one check, by transport." },
    Series { name: TEXT_DRIFT_TOTAL, kind: Kind::Counter, help: "Results whose text copy in content parses as JSON and is a different value from structuredContent." },
    Series { name: CACHE_HITS_TOTAL, kind: Kind::Counter, help: "Checks whose compiled schema was already in the cache." },
    Series { name: CACHE_MISSES_TOTAL, kind: Kind::Counter, help: "Checks that had to compile their schema." },
    Series { name: CACHE_EVICTIONS_TOTAL, kind: Kind::Counter, help: "Compiled schemas evicted for size or idleness." },
    Series { name: CACHE_ENTRIES, kind: Kind::Gauge, help: "Compiled schemas in the cache." },
    Series { name: SCHEMA_COMPILES_TOTAL, kind: Kind::Counter, help: "Schema compilations (successful or not)." },
    Series { name: SCHEMA_COMPILE_DURATION_SECONDS, kind: Kind::Histogram, help: "Time to compile one schema." },
    Series { name: SCHEMA_COMPILE_FAILURES_TOTAL, kind: Kind::Counter, help: "Schemas that did not compile (the failure is cached)." },
    Series { name: REQUEST_ERRORS_TOTAL, kind: Kind::Counter, help: "Checks refused before a verdict, by transport and error code." },
    Series { name: POLICY_RELOADS_TOTAL, kind: Kind::Counter, help: "Policy reloads by result (ok|error)." },
    Series { name: SERIES_FOLDED_TOTAL, kind: Kind::Counter, help: "Counts that went to an _other series (a label value past --metrics-label-limit, or a label combination past --metrics-series-limit), by metric family." },
    Series { name: SHED_TOTAL, kind: Kind::Counter, help: "Requests refused at once as overloaded (503 overloaded, gRPC RESOURCE_EXHAUSTED) because the work admitted was at --max-queued-checks or --max-queued-bytes, or (gateway) an initialize found a stdio route's processes at --stdio-max-processes, all in use; by transport." },
    Series { name: CANCELLED_TOTAL, kind: Kind::Counter, help: "Checks never started because their request went away first (client disconnected, call cancelled, deadline passed), by transport." },
    Series { name: CONNECTIONS_OPEN, kind: Kind::Gauge, help: "Open client connections, by transport." },
    Series { name: CONNECTIONS_REFUSED_TOTAL, kind: Kind::Counter, help: "Connections closed on accept because --max-connections were open, by transport." },
    Series { name: AUTH_FAILURES_TOTAL, kind: Kind::Counter, help: "Requests refused for their credentials, by transport and reason (missing: no token; unknown: a token not in force; scope: a token without the scope needed; server: a token not allowed that server)." },
    Series { name: REGISTRY_ERRORS_TOTAL, kind: Kind::Counter, help: "Failed operations on the shared registry (--registry redis://...), by op (write: a registration or removal, refused as registry_unavailable; read_through: a check's lookup of a name this replica did not hold; sync: reading changes or everything; subscribe: following changes, reconnected after; remember: sharing an inline schema's text). Only with --registry." },
    Series { name: REGISTRY_CONNECTED, kind: Kind::Gauge, help: "1 while this replica follows the shared registry's changes and has read it in full since; 0 while it reconnects (known contracts are still served; registrations may be refused). Only with --registry." },
    Series { name: REGISTRY_RESYNCS_TOTAL, kind: Kind::Counter, help: "Full reads of the shared registry: one at start-up and one after each lost subscription. Only with --registry." },
    Series { name: PROXY_MESSAGES_TOTAL, kind: Kind::Counter, help: "MCP messages schemagate read on the MCP wire, by transport (proxy: schemagate proxy, stdio; gateway: schemagate gateway, Streamable HTTP), direction (to_server|to_client) and kind (forwarded: as received; not_json_rpc: forwarded as received, though not a JSON-RPC message; oversized: past --max-message-bytes, not forwarded; replaced: a tool result replaced by an isError result; answered: a request answered by schemagate, not forwarded). Only in schemagate proxy and schemagate gateway." },
    Series { name: CONTRACT_CHANGES_TOTAL, kind: Kind::Counter, help: "Changes to registered tools' contracts, by server, tool, schema (output|input|annotations) and class (identical|compatible|breaking|unknown, from the consumer's side). Counted by the replica that took the registration." },
    Series { name: RECORD_LINES_TOTAL, kind: Kind::Counter, help: "Lines of recorded sessions (--record), by transport (proxy|gateway) and outcome (written; queue_full: the writer was behind, dropped without slowing the relay; file_full: past --record-max-bytes; dir_full: past --record-max-total-bytes with no closed recording left to remove; write_error). Only with --record." },
    Series { name: SHADOW_VALIDATIONS_TOTAL, kind: Kind::Counter, help: "Checks also judged by the tool's shadow (candidate) schema, by server, tool and outcome (valid|invalid): how the candidate would have judged live traffic. Never enforced." },
    Series { name: CONNECTIONS_CLOSED_TOTAL, kind: Kind::Counter, help: "Connections closed by schemagate, by transport and reason (idle: no request for --idle-timeout-secs; write_timeout: an answer not read for --write-timeout-secs)." },
];

/// Every series name, for documentation checks.
pub const ALL: [&str; SERIES.len()] = {
    let mut names = [""; SERIES.len()];
    let mut i = 0;
    while i < SERIES.len() {
        names[i] = SERIES[i].name;
        i += 1;
    }
    names
};

/// Label value for a check that names no server or tool.
pub const NONE_LABEL: &str = "_none";
/// Label value that stands for every value past a label's bound.
pub const OTHER_LABEL: &str = "_other";
