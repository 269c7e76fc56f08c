//! Turns a schema's text into a validator, refusing what could hurt the service: schemas that
//! are too large or too deep, `$ref`s that would need a fetch, and schemas whose evaluation could
//! fan out past the work limit.

use crate::analysis::{self, CostError};
use crate::check::measure;
use crate::error::CheckError;
use crate::policy::{CompileOptions, RegexEngine};
use jsonschema::{PatternOptions, Retrieve, Uri, Validator};
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// Backtracking steps a `pattern` may take on one string before it is reported as failing.
pub const REGEX_BACKTRACK_LIMIT: usize = 100_000;
/// Largest compiled program a `pattern` may produce.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// The limits a compile enforces.
#[derive(Debug, Clone, Copy)]
pub struct CompileLimits {
    pub max_schema_bytes: usize,
    pub max_depth: usize,
    /// Most subschema evaluations one instance position may imply.
    pub max_schema_cost: u64,
}

/// A compiled schema and what the checks need to know about it.
#[derive(Debug)]
pub struct CompiledSchema {
    pub validator: Validator,
    /// Upper bound on subschema evaluations at one instance position.
    pub cost_per_position: u64,
    /// The root is `"type": "object"` (MCP requires it of an outputSchema).
    pub root_is_object: bool,
    /// Length of the schema text, which weighs the cache entry.
    pub source_len: usize,
}

/// Compiles `text` under `options`. Never fetches anything and never panics on hostile input.
pub fn compile(
    text: &[u8],
    options: CompileOptions,
    limits: &CompileLimits,
) -> Result<CompiledSchema, CheckError> {
    if text.len() > limits.max_schema_bytes {
        return Err(CheckError::SchemaTooLarge {
            size: text.len(),
            limit: limits.max_schema_bytes,
        });
    }
    let schema: Value = serde_json::from_slice(text).map_err(|e| {
        if e.to_string().starts_with("recursion limit exceeded") {
            CheckError::TooDeep {
                what: "schema",
                limit: limits.max_depth,
            }
        } else {
            CheckError::MalformedJson(format!("schema is not valid JSON: {e}"))
        }
    })?;
    if measure(&schema).0 > limits.max_depth {
        return Err(CheckError::TooDeep {
            what: "schema",
            limit: limits.max_depth,
        });
    }
    let cost = analysis::analyse(&schema, limits.max_schema_cost).map_err(|e| match e {
        CostError::Cycle(_) | CostError::FanOut { .. } | CostError::TooManySubschemas(_) => {
            CheckError::SchemaTooComplex(e.to_string())
        }
    })?;

    let refused = Arc::new(Mutex::new(None));
    let retriever = RefuseAll {
        first: Arc::clone(&refused),
    };
    let mut builder = jsonschema::options()
        .with_retriever(retriever)
        .should_validate_formats(options.assert_formats);
    builder = match options.regex_engine {
        RegexEngine::BoundedBacktracking => builder.with_pattern_options(
            PatternOptions::fancy_regex()
                .backtrack_limit(REGEX_BACKTRACK_LIMIT)
                .size_limit(REGEX_SIZE_LIMIT),
        ),
        RegexEngine::Linear => {
            builder.with_pattern_options(PatternOptions::regex().size_limit(REGEX_SIZE_LIMIT))
        }
    };
    let validator = builder.build(&schema).map_err(|e| {
        let uri = refused.lock().ok().and_then(|mut first| first.take());
        match uri {
            Some(uri) => CheckError::RemoteRef(uri),
            None => CheckError::SchemaInvalid(crate::verdict::clip(e.to_string(), 512)),
        }
    })?;
    Ok(CompiledSchema {
        validator,
        cost_per_position: cost.per_position,
        root_is_object: root_is_object(&schema),
        source_len: text.len(),
    })
}

fn root_is_object(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.len() == 1 && types[0] == "object",
        _ => false,
    }
}

/// A retriever that fetches nothing and remembers the first URI it was asked for, so the error
/// can name it.
struct RefuseAll {
    first: Arc<Mutex<Option<String>>>,
}

impl Retrieve for RefuseAll {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert_with(|| uri.as_str().to_owned());
        }
        Err(format!("schemagate does not fetch {uri}").into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: CompileLimits = CompileLimits {
        max_schema_bytes: 1 << 20,
        max_depth: 64,
        max_schema_cost: 10_000,
    };
    const OPTIONS: CompileOptions = CompileOptions {
        assert_formats: true,
        regex_engine: RegexEngine::BoundedBacktracking,
    };

    fn code(text: &str) -> &'static str {
        compile(text.as_bytes(), OPTIONS, &LIMITS)
            .unwrap_err()
            .code()
    }

    #[test]
    fn compiles_ordinary_schemas() {
        let compiled = compile(
            br#"{"type": "object", "required": ["id"]}"#,
            OPTIONS,
            &LIMITS,
        )
        .expect("compiles");
        assert!(compiled.root_is_object);
        assert!(!compiled.validator.is_valid(&serde_json::json!({})));
    }

    #[test]
    fn refuses_remote_and_file_refs_without_fetching() {
        let err = compile(
            br#"{"$ref": "https://example.com/schema.json"}"#,
            OPTIONS,
            &LIMITS,
        )
        .unwrap_err();
        assert_eq!(err.code(), "schema_ref_not_allowed");
        assert!(
            err.to_string().contains("https://example.com/schema.json"),
            "{err}"
        );
        assert_eq!(
            code(r#"{"$ref": "file:///etc/passwd"}"#),
            "schema_ref_not_allowed"
        );
    }

    #[test]
    fn metaschema_refs_resolve_offline() {
        compile(
            br#"{"$ref": "https://json-schema.org/draft/2020-12/schema"}"#,
            OPTIONS,
            &LIMITS,
        )
        .expect("the draft metaschemas are built in");
    }

    #[test]
    fn refuses_broken_and_hostile_schemas() {
        assert_eq!(code(r#"{"type": "strnig"}"#), "schema_invalid");
        assert_eq!(code(r#"{"type": "#), "malformed_json");
        let deep = format!(
            "{}{}",
            r#"{"items":"#.repeat(80),
            "{}".to_owned() + &"}".repeat(80)
        );
        assert_eq!(code(&deep), "nesting_too_deep");
        let chain = crate::analysis::tests_support::doubling_chain(30).to_string();
        assert_eq!(code(&chain), "schema_too_complex");
        let small = CompileLimits {
            max_schema_bytes: 10,
            ..LIMITS
        };
        let err = compile(br#"{"type": "object"}"#, OPTIONS, &small).unwrap_err();
        assert_eq!(err.code(), "schema_too_large");
    }

    #[test]
    fn format_assertion_follows_the_options() {
        let schema = br#"{"type": "string", "format": "date-time"}"#;
        let asserted = compile(schema, OPTIONS, &LIMITS).expect("compiles");
        assert!(!asserted.validator.is_valid(&serde_json::json!("yesterday")));
        let annotated = CompileOptions {
            assert_formats: false,
            ..OPTIONS
        };
        let lenient = compile(schema, annotated, &LIMITS).expect("compiles");
        assert!(lenient.validator.is_valid(&serde_json::json!("yesterday")));
        // Internationalised formats are checked too (they need jsonschema's `idna` feature).
        let idn = compile(br#"{"format": "idn-hostname"}"#, OPTIONS, &LIMITS).expect("compiles");
        assert!(idn.validator.is_valid(&serde_json::json!("실례.테스트")));
        assert!(!idn
            .validator
            .is_valid(&serde_json::json!("\u{302e}실례.테스트")));
        let email = compile(br#"{"format": "idn-email"}"#, OPTIONS, &LIMITS).expect("compiles");
        assert!(!email.validator.is_valid(&serde_json::json!("2962")));
    }

    #[test]
    fn catastrophic_patterns_stay_bounded() {
        let compiled = compile(
            br#"{"type": "string", "pattern": "^(a+)+$"}"#,
            OPTIONS,
            &LIMITS,
        )
        .expect("compiles");
        let hostile = format!("{}!", "a".repeat(64));
        assert!(!compiled.validator.is_valid(&serde_json::json!(hostile)));
    }
}
