//! Newtypes for the names a check carries: each is built by a `parse` that says what is wrong.

use std::fmt;

/// Longest server id or tool name accepted.
pub const MAX_NAME_LEN: usize = 128;

/// A protocol version schemagate does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown MCP protocol version {0:?}: expected \"2025-06-18\", \"2025-11-25\" or \"2026-07-28\" (or none, for the newest)")]
pub struct UnknownProtocol(pub String);

/// Why a name or hash was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{what} must not be empty")]
    Empty { what: &'static str },
    #[error("{what} is {len} bytes long; the limit is {MAX_NAME_LEN}")]
    TooLong { what: &'static str, len: usize },
    #[error("{what} {value:?} holds a control character or white space; use letters, digits and punctuation")]
    BadCharacter { what: &'static str, value: String },
    #[error("schema_hash {0:?} is not a schema hash: expected 64 lowercase hex digits as returned in `schema_hash`")]
    BadHash(String),
}

fn parse_name(what: &'static str, value: &str) -> Result<(), NameError> {
    if value.is_empty() {
        return Err(NameError::Empty { what });
    }
    if value.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong {
            what,
            len: value.len(),
        });
    }
    if value.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(NameError::BadCharacter {
            what,
            value: value.chars().take(MAX_NAME_LEN).collect(),
        });
    }
    Ok(())
}

/// The id of an MCP server, as the orchestrator names it (`crm`, `partner-payments`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerId(String);

impl ServerId {
    pub fn parse(value: &str) -> Result<Self, NameError> {
        Self::check(value).map(|()| Self(value.to_owned()))
    }
    /// Whether `value` would parse, without building the id (the hot path keeps its `&str`).
    pub fn check(value: &str) -> Result<(), NameError> {
        parse_name("server", value)
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The name of a tool on a server (`get_customer`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolName(String);

impl ToolName {
    pub fn parse(value: &str) -> Result<Self, NameError> {
        Self::check(value).map(|()| Self(value.to_owned()))
    }
    /// Whether `value` would parse, without building the name.
    pub fn check(value: &str) -> Result<(), NameError> {
        parse_name("tool", value)
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The blake3 hash of a schema's bytes as sent; shown to callers as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SchemaHash([u8; 32]);

impl SchemaHash {
    /// Hashes a schema's text exactly as it arrived (no re-serialisation, so a hit never parses it).
    pub fn of(schema_text: &[u8]) -> Self {
        Self(*blake3::hash(schema_text).as_bytes())
    }

    pub fn parse(value: &str) -> Result<Self, NameError> {
        let bad = || NameError::BadHash(value.chars().take(80).collect());
        if value.len() != 64 {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, pair) in value.as_bytes().chunks_exact(2).enumerate() {
            let digit = |b: u8| match b {
                b'0'..=b'9' => Some(b - b'0'),
                b'a'..=b'f' => Some(b - b'a' + 10),
                _ => None,
            };
            match (digit(pair[0]), digit(pair[1])) {
                (Some(hi), Some(lo)) => out[i] = hi << 4 | lo,
                _ => return Err(bad()),
            }
        }
        Ok(Self(out))
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lowercase hex digits callers see, without allocating (every verdict carries one).
    pub fn to_hex(&self) -> impl std::ops::Deref<Target = str> {
        blake3::Hash::from_bytes(self.0).to_hex()
    }
}

impl fmt::Display for SchemaHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for SchemaHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SchemaHash({self})")
    }
}

/// How far a server is trusted, which decides what a failing result leads to. Its wire names
/// (policy files, answers, metrics) are [`Tier::as_str`]'s, and only those.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Servers you run yourself: results are not validated (`skip`).
    Trusted,
    /// Partner servers: validated, failures logged and counted, action `pass` (`log`).
    SemiTrusted,
    /// Everything else: validated, failures rejected (`reject`).
    Untrusted,
}

impl<'de> serde::Deserialize<'de> for Tier {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Tier::parse(&name).map_err(serde::de::Error::custom)
    }
}

impl Tier {
    pub const ALL: [Tier; 3] = [Tier::Trusted, Tier::SemiTrusted, Tier::Untrusted];

    /// Its place in [`Tier::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn parse(value: &str) -> Result<Self, String> {
        Tier::ALL
            .into_iter()
            .find(|t| t.as_str() == value)
            .ok_or_else(|| {
                format!(
                    "unknown tier {value:?}: expected {}",
                    Tier::ALL.map(|t| format!("{:?}", t.as_str())).join(", ")
                )
            })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Trusted => "trusted",
            Tier::SemiTrusted => "semi-trusted",
            Tier::Untrusted => "untrusted",
        }
    }
}

/// An MCP revision whose result rules schemagate applies; where they differ, the revision a
/// registration or check names decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProtocolVersion {
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

impl ProtocolVersion {
    /// The newest revision schemagate knows: what a check or registration that names none follows.
    pub const NEWEST: ProtocolVersion = ProtocolVersion::V2026_07_28;
    pub const ALL: [ProtocolVersion; 3] = [
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2026_07_28,
    ];

    pub fn parse(value: &str) -> Result<Self, UnknownProtocol> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == value)
            .ok_or_else(|| UnknownProtocol(value.to_owned()))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// Whether an outputSchema's root must be an object schema: so before 2026-07-28, which
    /// allows any root (SEP-2106).
    pub fn requires_object_root(self) -> bool {
        self < ProtocolVersion::V2026_07_28
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_versions_parse_and_decide_the_root_rule() {
        for v in ProtocolVersion::ALL {
            assert_eq!(ProtocolVersion::parse(v.as_str()).ok(), Some(v));
        }
        assert!(ProtocolVersion::parse("2025-03-26").is_err());
        assert!(ProtocolVersion::V2025_06_18.requires_object_root());
        assert!(ProtocolVersion::V2025_11_25.requires_object_root());
        assert!(!ProtocolVersion::NEWEST.requires_object_root());
    }

    #[test]
    fn names_refuse_empty_long_and_blank() {
        assert!(ServerId::parse("crm").is_ok());
        assert_eq!(
            ServerId::parse(""),
            Err(NameError::Empty { what: "server" })
        );
        assert!(matches!(
            ToolName::parse(&"x".repeat(129)),
            Err(NameError::TooLong { len: 129, .. })
        ));
        assert!(matches!(
            ToolName::parse("get customer"),
            Err(NameError::BadCharacter { .. })
        ));
    }

    #[test]
    fn schema_hash_round_trips_through_hex() {
        let hash = SchemaHash::of(br#"{"type":"object"}"#);
        let text = hash.to_string();
        assert_eq!(text.len(), 64);
        assert_eq!(SchemaHash::parse(&text), Ok(hash));
        assert!(SchemaHash::parse(&text.to_uppercase()).is_err());
        assert!(SchemaHash::parse("abc").is_err());
    }

    #[test]
    fn tiers_parse_by_their_wire_names() {
        for tier in Tier::ALL {
            assert_eq!(Tier::parse(tier.as_str()), Ok(tier));
        }
        assert!(Tier::parse("semi_trusted").is_err());
    }
}
