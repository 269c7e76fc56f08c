//! Turns a schema's text into a validator, refusing what could hurt the service: schemas that
//! are too large or too deep, `$ref`s that would need a fetch or do not resolve, schemas whose
//! evaluation could fan out past the work limit, and regular expressions that would hold more
//! memory than a schema may.

use crate::core::check::measure;
use crate::core::document::DocumentJson;
use crate::core::error::CheckError;
use crate::core::policy::{CompileOptions, RegexEngine};
use crate::core::schema::analysis::{self, CostError, RefusedUri};
use jsonschema::{PatternOptions, Validator};
use regex_automata::meta;
use serde_json::Value;

/// Backtracking steps a `pattern` may take on one string before it is reported as failing.
pub const REGEX_BACKTRACK_LIMIT: usize = 100_000;
/// Largest compiled program a `pattern` may produce.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Largest lazy-DFA cache a `pattern` may grow while it matches (per thread that runs it).
pub const REGEX_DFA_SIZE_LIMIT: usize = 1 << 20;
/// What a pattern the linear engine cannot read (look-around, back-references) is assumed to
/// hold: its parts are compiled by fancy-regex, which reports no size.
const FANCY_PATTERN_BYTES: usize = 64 * 1024;

/// The limits a compile enforces.
#[derive(Debug, Clone, Copy)]
pub struct CompileLimits {
    pub max_schema_bytes: usize,
    pub max_depth: usize,
    /// Most subschema evaluations one instance position may imply.
    pub max_schema_cost: u64,
    /// Most heap bytes a schema's compiled regular expressions may hold together.
    pub max_schema_regex_bytes: usize,
}

/// A compiled schema and what the checks need to know about it.
#[derive(Debug)]
pub struct CompiledSchema {
    /// Judges documents in the core's own representation.
    pub validator: Validator<DocumentJson>,
    /// Upper bound on subschema evaluations at one instance position.
    pub cost_per_position: u64,
    /// Upper bound on regular expressions run on the strings at one instance position; a check
    /// costs this much per byte of its payload's strings (and keys).
    pub patterns_per_position: u64,
    /// The root is `"type": "object"` (MCP requires it of an outputSchema).
    pub root_is_object: bool,
    /// Length of the schema text, which weighs the cache entry.
    pub source_len: usize,
    /// Heap bytes held by the schema's compiled regular expressions, which weigh the entry too.
    pub regex_bytes: usize,
}

impl CompiledSchema {
    /// The most subschema evaluations a check of `doc` can cost: every subschema at every
    /// position, plus every regular expression over every byte of its strings.
    pub fn work(&self, nodes: u64, string_bytes: u64) -> u64 {
        nodes
            .saturating_mul(self.cost_per_position)
            .saturating_add(string_bytes.saturating_mul(self.patterns_per_position))
    }
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
        if crate::core::error::is_too_deep(&e) {
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
        CostError::Remote(uri) => CheckError::RemoteRef(uri),
        CostError::Unresolved(message) => {
            CheckError::SchemaInvalid(crate::core::verdict::clip(message, 512))
        }
    })?;
    let regex_bytes = weigh_patterns(
        &cost.patterns,
        options.regex_engine,
        limits.max_schema_regex_bytes,
    )?;

    let refused = RefusedUri::default();
    let retriever = refused.clone();
    let mut builder = jsonschema::options_for::<DocumentJson>()
        .with_retriever(retriever)
        .should_validate_formats(options.assert_formats);
    builder = match options.regex_engine {
        RegexEngine::BoundedBacktracking => builder.with_pattern_options(
            PatternOptions::fancy_regex()
                .backtrack_limit(REGEX_BACKTRACK_LIMIT)
                .size_limit(REGEX_SIZE_LIMIT)
                .dfa_size_limit(REGEX_DFA_SIZE_LIMIT),
        ),
        RegexEngine::Linear => builder.with_pattern_options(
            PatternOptions::regex()
                .size_limit(REGEX_SIZE_LIMIT)
                .dfa_size_limit(REGEX_DFA_SIZE_LIMIT),
        ),
    };
    let validator = builder.build(&schema).map_err(|e| match refused.take() {
        Some(uri) => CheckError::RemoteRef(uri),
        None => CheckError::SchemaInvalid(crate::core::verdict::clip(e.to_string(), 512)),
    })?;
    Ok(CompiledSchema {
        validator,
        cost_per_position: cost.per_position,
        patterns_per_position: cost.patterns_per_position,
        root_is_object: root_is_object(&schema),
        source_len: text.len(),
        regex_bytes,
    })
}

/// The heap bytes the validator's compiled forms of `patterns` will hold, measured by compiling
/// each as the validator does (ECMA-262 translated, cheap forms recognised) on the engine that
/// reports its size, and refused as soon as the total passes `budget`, before the validator
/// compiles any of them.
fn weigh_patterns(
    patterns: &[String],
    engine: RegexEngine,
    budget: usize,
) -> Result<usize, CheckError> {
    let mut total = 0usize;
    for pattern in patterns {
        total = total.saturating_add(pattern_bytes(pattern, engine));
        if total > budget {
            return Err(CheckError::SchemaTooComplex(format!(
                "its regular expressions would hold more than {budget} bytes once compiled (see --max-schema-regex-bytes), the pattern {} among them: use fewer or smaller patterns (a bounded repetition such as {{999}} is compiled as that many copies)",
                crate::core::verdict::clip(format!("{pattern:?}"), 80)
            )));
        }
    }
    Ok(total)
}

/// The heap bytes of one compiled pattern (0 for one the validator matches without a regex).
fn pattern_bytes(pattern: &str, engine: RegexEngine) -> usize {
    if engine == RegexEngine::BoundedBacktracking
        && jsonschema_regex::analyze_pattern(pattern).is_some()
    {
        return 0;
    }
    let Ok(translated) = jsonschema_regex::to_rust_regex(pattern) else {
        // The validator refuses it; its error says why.
        return 0;
    };
    let compiled = match jsonschema_regex::search_form(pattern, &translated) {
        Some(jsonschema_regex::Search::RepeatedClass(_)) => return 0,
        Some(jsonschema_regex::Search::Collapsed(collapsed)) => regex_bytes(&collapsed),
        None => regex_bytes(&translated),
    };
    match compiled {
        Some(bytes) => bytes,
        None => match jsonschema_regex::split_leading_lookaheads(pattern) {
            Some(parts) => parts
                .iter()
                .map(|part| {
                    jsonschema_regex::to_rust_regex(part)
                        .ok()
                        .and_then(|t| regex_bytes(&t))
                        .unwrap_or(FANCY_PATTERN_BYTES)
                })
                .sum(),
            None => FANCY_PATTERN_BYTES,
        },
    }
}

/// The heap bytes of `translated` compiled by the linear engine under the size limit; `None`
/// when that engine cannot read it, `REGEX_SIZE_LIMIT` when it passes the limit (the validator
/// then refuses it).
fn regex_bytes(translated: &str) -> Option<usize> {
    let config = meta::Regex::config().nfa_size_limit(Some(REGEX_SIZE_LIMIT));
    match meta::Regex::builder().configure(config).build(translated) {
        Ok(regex) => Some(regex.memory_usage()),
        Err(e) if e.size_limit().is_some() => Some(REGEX_SIZE_LIMIT),
        Err(_) => None,
    }
}

fn root_is_object(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.len() == 1 && types[0] == "object",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::document::Document;

    const LIMITS: CompileLimits = CompileLimits {
        max_schema_bytes: 1 << 20,
        max_depth: 64,
        max_schema_cost: 10_000,
        max_schema_regex_bytes: 16 << 20,
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
        assert!(!compiled
            .validator
            .is_valid(Document::from_value(&serde_json::json!({})).root()));
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
        let chain = crate::core::schema::analysis::tests_support::doubling_chain(30).to_string();
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
        assert!(!asserted
            .validator
            .is_valid(Document::from_value(&serde_json::json!("yesterday")).root()));
        let annotated = CompileOptions {
            assert_formats: false,
            ..OPTIONS
        };
        let lenient = compile(schema, annotated, &LIMITS).expect("compiles");
        assert!(lenient
            .validator
            .is_valid(Document::from_value(&serde_json::json!("yesterday")).root()));
        // Internationalised formats are checked too (they need jsonschema's `idna` feature).
        let idn = compile(br#"{"format": "idn-hostname"}"#, OPTIONS, &LIMITS).expect("compiles");
        assert!(idn
            .validator
            .is_valid(Document::from_value(&serde_json::json!("실례.테스트")).root()));
        assert!(!idn
            .validator
            .is_valid(Document::from_value(&serde_json::json!("\u{302e}실례.테스트")).root()));
        let email = compile(br#"{"format": "idn-email"}"#, OPTIONS, &LIMITS).expect("compiles");
        assert!(!email
            .validator
            .is_valid(Document::from_value(&serde_json::json!("2962")).root()));
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
        assert!(!compiled
            .validator
            .is_valid(Document::from_value(&serde_json::json!(hostile)).root()));
    }

    #[test]
    fn compiled_patterns_are_weighed_and_bounded() {
        let one = compile(
            br#"{"type": "string", "pattern": "[^a]{999}"}"#,
            OPTIONS,
            &LIMITS,
        )
        .expect("one large pattern fits the budget");
        assert!(one.regex_bytes > 100_000, "{}", one.regex_bytes);
        let small = compile(br#"{"pattern": "^[a-z]+$"}"#, OPTIONS, &LIMITS).expect("compiles");
        assert!(small.regex_bytes < 100_000, "{}", small.regex_bytes);
        let many: Vec<String> = (0..1000)
            .map(|n| format!(r#"{{"pattern": "[^ab]{{{}}}"}}"#, 500 + n))
            .collect();
        let schema = format!(r#"{{"anyOf": [{}]}}"#, many.join(","));
        let err = compile(schema.as_bytes(), OPTIONS, &LIMITS).unwrap_err();
        assert_eq!(err.code(), "schema_too_complex", "{err}");
        assert!(
            err.to_string().contains("--max-schema-regex-bytes"),
            "{err}"
        );
        let linear = CompileOptions {
            regex_engine: RegexEngine::Linear,
            ..OPTIONS
        };
        let err = compile(schema.as_bytes(), linear, &LIMITS).unwrap_err();
        assert_eq!(err.code(), "schema_too_complex", "{err}");
    }

    #[test]
    fn regexes_are_charged_by_the_strings_they_run_on() {
        let schema =
            br#"{"type": "array", "items": {"anyOf": [{"pattern": "a"}, {"pattern": "b"}]}}"#;
        let compiled = compile(schema, OPTIONS, &LIMITS).expect("compiles");
        assert_eq!(compiled.patterns_per_position, 2);
        // 10 strings of 1,000 bytes: 11 nodes, 10,000 string bytes.
        assert_eq!(
            compiled.work(11, 10_000),
            11 * compiled.cost_per_position + 20_000
        );
    }

    #[test]
    fn the_panic_schema_is_a_clear_refusal() {
        let err = compile("{\"$ref\": \"#%a\u{e9}\"}".as_bytes(), OPTIONS, &LIMITS).unwrap_err();
        assert_eq!(err.code(), "schema_invalid", "{err}");
        assert!(err.to_string().contains("#%a"), "{err}");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// No bytes sent as a schema panic the compile, what compiles validates arbitrary
        /// documents without panicking, and no bytes sent as a check or batch panic the reader.
        fn never_panics(text: &[u8], doc: &[u8]) {
            if let Ok(compiled) = compile(text, OPTIONS, &LIMITS) {
                if let Ok(document) = Document::read(doc, 64) {
                    let _ = compiled.validator.is_valid(document.root());
                    let _ = compiled
                        .validator
                        .iter_errors(document.root())
                        .take(20)
                        .count();
                }
            }
            let body = bytes::Bytes::copy_from_slice(doc);
            let _ = crate::core::check::Check::from_json(&body, 64);
            let check = format!(
                r#"{{"schema": {}, "result": {{"structuredContent": {}, "content": [{{"type": "text", "text": {}}}]}}}}"#,
                String::from_utf8_lossy(text),
                String::from_utf8_lossy(doc),
                serde_json::Value::String(String::from_utf8_lossy(doc).into_owned())
            );
            let _ = crate::core::check::Check::from_json(&bytes::Bytes::from(check), 64);
            let batch = format!(r#"{{"items": [{}]}}"#, String::from_utf8_lossy(doc));
            let _ = crate::core::check::batch_from_json(&bytes::Bytes::from(batch), 64, 100);
        }

        fn inputs() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
            (
                prop_oneof![
                    any::<Vec<u8>>(),
                    any::<String>().prop_map(String::into_bytes),
                    json_text(),
                ],
                prop_oneof![any::<Vec<u8>>(), json_text()],
            )
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn arbitrary_bytes_never_panic((text, doc) in inputs()) {
                never_panics(&text, &doc);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(50_000))]

            /// The long run of the same property: `cargo test --lib -- --ignored long_run`.
            #[test]
            #[ignore = "long run: cargo test --lib -- --ignored long_run"]
            fn long_run_arbitrary_bytes_never_panic((text, doc) in inputs()) {
                never_panics(&text, &doc);
            }
        }

        /// JSON texts made of schema keywords, odd strings and numbers.
        pub(crate) fn json_text() -> impl Strategy<Value = Vec<u8>> {
            let word = prop::sample::select(vec![
                "$ref",
                "$id",
                "$anchor",
                "$dynamicRef",
                "$dynamicAnchor",
                "$defs",
                "allOf",
                "anyOf",
                "oneOf",
                "not",
                "items",
                "prefixItems",
                "properties",
                "pattern",
                "patternProperties",
                "format",
                "type",
                "enum",
                "const",
                "maximum",
                "minimum",
                "multipleOf",
                "required",
                "#",
                "#/$defs/a",
                "#%aé",
                "%",
                "a.json",
                "string",
                "object",
                "[^a]{99}",
                "(a+)+$",
                "\\d",
                "date-time",
                "email",
                "é",
                "",
            ]);
            let leaf = prop_oneof![
                word.clone()
                    .prop_map(|w| serde_json::Value::String(w.to_owned())),
                any::<String>().prop_map(serde_json::Value::String),
                any::<i64>().prop_map(serde_json::Value::from),
                any::<f64>().prop_map(serde_json::Value::from),
                any::<bool>().prop_map(serde_json::Value::Bool),
                Just(serde_json::Value::Null),
            ];
            leaf.prop_recursive(5, 48, 5, move |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
                    prop::collection::btree_map(word.clone(), inner, 0..5).prop_map(|m| {
                        serde_json::Value::Object(
                            m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
                        )
                    }),
                ]
            })
            .prop_map(|v| v.to_string().into_bytes())
        }
    }
}
