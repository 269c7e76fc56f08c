//! Paths held inside directories: a path (or `file://` URI) resolved lexically (`.` and `..`
//! folded, never through the file system) and compared by whole segments with each directory.
//! What cannot be resolved (a relative path, a URI of another scheme, `..` above the root, an
//! escape that does not decode) is never inside.

use crate::core::verdict::pointer_token;
use serde_json::Value;

/// Why a path cannot be judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved(pub String);

/// The absolute path `text` names (a path, or a `file://` URI), its `.` and `..` folded, as
/// segments; an error says why it names none.
pub fn resolve(text: &str) -> Result<Vec<String>, Unresolved> {
    let path = match text.strip_prefix("file://") {
        Some(rest) => {
            // file:///a/b or file://localhost/a/b; any other host is not this machine's.
            let path = match rest.strip_prefix("localhost") {
                Some(after) if after.starts_with('/') => after,
                _ => rest,
            };
            if !path.starts_with('/') {
                return Err(Unresolved(format!("{text:?} names a file on another host")));
            }
            // A query or fragment would be read as part of the path by a server that takes
            // the value literally: never judged.
            if path.contains(['?', '#']) {
                return Err(Unresolved(format!(
                    "{text:?}: a file URI with `?` or `#` cannot be judged"
                )));
            }
            percent_encoding::percent_decode_str(path)
                .decode_utf8()
                .map_err(|_| Unresolved(format!("{text:?}: its escapes are not UTF-8")))?
                .into_owned()
        }
        None if text.contains("://") => {
            return Err(Unresolved(format!("{text:?} is a URI, not a file path")))
        }
        None => text.to_owned(),
    };
    if !path.starts_with('/') {
        return Err(Unresolved(format!(
            "{text:?} is a relative path: only an absolute path can be held within the roots"
        )));
    }
    if path.contains('\0') {
        return Err(Unresolved(format!("{text:?} holds a NUL byte")));
    }
    // A backslash separates segments for some servers (on Windows, or normalising it).
    if path.contains('\\') {
        return Err(Unresolved(format!("{text:?} holds a backslash")));
    }
    let mut segments: Vec<String> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err(Unresolved(format!("{text:?} climbs above /")));
                }
            }
            other => segments.push(other.to_owned()),
        }
    }
    Ok(segments)
}

/// Whether `path` lies in one of `dirs` (itself or below), both resolved lexically; an error
/// when `path` cannot be resolved. A directory that cannot be resolved holds nothing.
pub fn within<'a>(path: &str, dirs: impl IntoIterator<Item = &'a str>) -> Result<bool, Unresolved> {
    let path = resolve(path)?;
    Ok(dirs.into_iter().any(|dir| {
        resolve(dir).is_ok_and(|dir| dir.len() <= path.len() && path[..dir.len()] == dir[..])
    }))
}

/// A JSON pointer whose `*` segments stand for every item of an array (or member of an object):
/// the paths a `paths` rule holds within the roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPointer {
    text: String,
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Any,
}

impl PathPointer {
    /// Reads `/a/*/b`; an error says what to write instead.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!(
                "{text:?}: a path is a JSON pointer, starting with `/` (as /path or /paths/*)"
            ));
        };
        let segments = rest
            .split('/')
            .map(|s| match s {
                "*" => Segment::Any,
                s => Segment::Key(s.replace("~1", "/").replace("~0", "~")),
            })
            .collect();
        Ok(Self {
            text: text.to_owned(),
            segments,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The root member it starts with (`None` for `/*` or the root itself).
    pub fn first_key(&self) -> Option<&str> {
        match self.segments.first() {
            Some(Segment::Key(key)) => Some(key),
            _ => None,
        }
    }

    /// The values it points at in `value`, each with its own pointer; `None` when there are
    /// more than `limit` of them (never a part of them: what is not looked at is not judged).
    pub fn find<'v>(&self, value: &'v Value, limit: usize) -> Option<Vec<(String, &'v Value)>> {
        let mut found = Vec::new();
        let mut stack = vec![(String::new(), value, 0usize)];
        while let Some((at, value, depth)) = stack.pop() {
            if found.len() > limit {
                return None;
            }
            let Some(segment) = self.segments.get(depth) else {
                found.push((at, value));
                continue;
            };
            match (segment, value) {
                (Segment::Key(key), Value::Object(map)) => {
                    if let Some(inner) = map.get(key) {
                        stack.push((format!("{at}/{}", pointer_token(key)), inner, depth + 1));
                    }
                }
                (Segment::Key(key), Value::Array(items)) => {
                    if let Some(inner) = key.parse::<usize>().ok().and_then(|i| items.get(i)) {
                        stack.push((format!("{at}/{key}"), inner, depth + 1));
                    }
                }
                (Segment::Any, Value::Array(items)) => {
                    for (i, inner) in items.iter().enumerate().rev() {
                        stack.push((format!("{at}/{i}"), inner, depth + 1));
                    }
                }
                (Segment::Any, Value::Object(map)) => {
                    let members: Vec<_> = map.iter().collect();
                    for (key, inner) in members.into_iter().rev() {
                        stack.push((format!("{at}/{}", pointer_token(key)), inner, depth + 1));
                    }
                }
                _ => {}
            }
        }
        (found.len() <= limit).then_some(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_resolve_lexically_and_by_whole_segments() {
        let roots = ["/srv/shared", "file:///home/ann/project"];
        for inside in [
            "/srv/shared",
            "/srv/shared/a.txt",
            "/srv/shared/./docs/../a.txt",
            "file:///srv/shared/a%20b.txt",
            "file://localhost/home/ann/project/src/main.rs",
            "/home/ann/project//x",
        ] {
            assert_eq!(within(inside, roots), Ok(true), "{inside}");
        }
        for outside in [
            "/srv/shared-other/a.txt",
            "/srv/shared/../../etc/passwd",
            "/srv/shared/docs/../../shared2",
            "/etc/passwd",
            "file:///etc/passwd",
            "file:///srv/shared/%2e%2e/x",
        ] {
            assert_eq!(within(outside, roots), Ok(false), "{outside}");
        }
        for unresolved in [
            "a.txt",
            "../srv/shared/a",
            "/..",
            "http://srv/shared",
            "file://evil.example/srv/shared",
            "/srv/shared/\0",
            "/srv/shared/..\\..\\etc",
            "file:///srv/shared/x?/../../etc",
            "file:///srv/shared/x#/../../etc",
        ] {
            assert!(within(unresolved, roots).is_err(), "{unresolved}");
        }
    }

    #[test]
    fn a_pointer_with_stars_finds_every_item() {
        let value =
            json!({"path": "/a", "paths": ["/b", "/c"], "edits": [{"file": "/d"}, {"file": "/e"}]});
        let find = |p: &str| -> Vec<(String, Value)> {
            PathPointer::parse(p)
                .expect("a pointer")
                .find(&value, 100)
                .expect("within the limit")
                .into_iter()
                .map(|(at, v)| (at, v.clone()))
                .collect()
        };
        assert_eq!(find("/path"), [("/path".to_owned(), json!("/a"))]);
        assert_eq!(
            find("/paths/*"),
            [
                ("/paths/0".to_owned(), json!("/b")),
                ("/paths/1".to_owned(), json!("/c"))
            ]
        );
        assert_eq!(find("/edits/*/file").len(), 2);
        assert!(find("/missing").is_empty());
        assert!(PathPointer::parse("path").is_err());
        let many = json!({"paths": vec!["/a"; 101]});
        let pointer = PathPointer::parse("/paths/*").expect("a pointer");
        assert!(
            pointer.find(&many, 100).is_none(),
            "past the limit: none judged"
        );
    }
}
