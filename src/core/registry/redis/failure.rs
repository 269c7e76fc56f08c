//! How the shared registry's failures read: a write refused as `registry_unavailable`, why
//! following Redis stopped, and a Redis URL as messages and logs show it (no password).

use crate::core::error::CheckError;

/// A write Redis did not take, refused to the caller.
pub(super) fn unavailable(e: impl std::fmt::Display) -> CheckError {
    CheckError::RegistryUnavailable(e.to_string())
}

/// The URL with its password, if any, replaced by `***`, for messages and logs.
pub fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Why following Redis stopped (the follower then connects and reads everything again).
#[derive(Debug, thiserror::Error)]
pub(super) enum FollowError {
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("Redis sent what schemagate cannot read: {0}")]
    Parse(#[from] redis::ParsingError),
    #[error("Redis did not answer in time ({0})")]
    Timeout(&'static str),
    #[error("the subscription connection was closed")]
    Closed,
    #[error("{0}")]
    Apply(String),
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redacted("redis://user:s3cret@redis:6379/2"),
            "redis://user:***@redis:6379/2"
        );
        assert_eq!(
            redacted("rediss://:s3cret@redis/0"),
            "rediss://:***@redis/0"
        );
        assert_eq!(redacted("redis://redis:6379"), "redis://redis:6379");
    }
}
