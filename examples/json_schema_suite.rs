//! Runs the official JSON Schema test suite (github.com/json-schema-org/JSON-Schema-Test-Suite)
//! through the service's own path: each schema compiled as a check's schema is (hostile-schema
//! limits, no remote `$ref`), each instance read into the core's document representation and
//! judged by it. Not part of `cargo test`: the suite is not in this repository.
//!
//! ```sh
//! cargo run --release --example json_schema_suite -- PATH/tests/draft2020-12 [FILE.json ...]
//! ```
//!
//! With only the directory, every file in it is run (not `optional/`); name files (relative to
//! the directory, e.g. `optional/bignum.json`) to run those. Prints each failing test and a
//! count; exits 1 if any test fails. Tests whose schema needs a remote document are counted as
//! skipped: the service never fetches one.

use schemagate::core::document::Document;
use schemagate::core::policy::{CompileOptions, RegexEngine};
use schemagate::core::schema::compile::{compile, CompileLimits};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const LIMITS: CompileLimits = CompileLimits {
    max_schema_bytes: 1 << 20,
    max_depth: 120,
    max_schema_cost: 1_000_000,
    max_schema_regex_bytes: 64 << 20,
};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: json_schema_suite PATH/tests/draft2020-12 [FILE.json ...]");
        return ExitCode::from(2);
    };
    let mut files: Vec<PathBuf> = args.map(|f| dir.join(f)).collect();
    if files.is_empty() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("cannot read {}", dir.display());
            return ExitCode::from(2);
        };
        files = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
    }
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for file in &files {
        let (p, f, s) = run_file(file);
        passed += p;
        failed += f;
        skipped += s;
    }
    println!("{passed} passed, {failed} failed, {skipped} skipped (remote documents)");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn run_file(file: &Path) -> (usize, usize, usize) {
    let name = file
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let Ok(text) = std::fs::read_to_string(file) else {
        eprintln!("cannot read {}", file.display());
        return (0, 1, 0);
    };
    let Ok(Value::Array(groups)) = serde_json::from_str::<Value>(&text) else {
        eprintln!("{name}: not a suite file");
        return (0, 1, 0);
    };
    // Formats are asserted only in the optional format files, as the suite expects.
    let options = CompileOptions {
        assert_formats: file.components().any(|c| c.as_os_str() == "format"),
        regex_engine: RegexEngine::BoundedBacktracking,
    };
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for group in &groups {
        let description = group["description"].as_str().unwrap_or("");
        let tests = group["tests"].as_array().map_or(&[][..], Vec::as_slice);
        let schema_text = group["schema"].to_string();
        let compiled = match compile(schema_text.as_bytes(), options, &LIMITS) {
            Ok(compiled) => compiled,
            Err(e) if e.code() == "schema_ref_not_allowed" => {
                skipped += tests.len();
                continue;
            }
            Err(e) => {
                println!("FAIL {name}: {description}: the schema was refused: {e}");
                failed += tests.len();
                continue;
            }
        };
        for test in tests {
            let expected = test["valid"].as_bool().unwrap_or(false);
            let instance = test["data"].to_string();
            let verdict = Document::read(instance.as_bytes(), 120)
                .map(|doc| compiled.validator.is_valid(doc.root()));
            match verdict {
                Ok(valid) if valid == expected => passed += 1,
                Ok(valid) => {
                    failed += 1;
                    println!(
                        "FAIL {name}: {description}: {}: judged {}, expected {}",
                        test["description"].as_str().unwrap_or(""),
                        if valid { "valid" } else { "invalid" },
                        if expected { "valid" } else { "invalid" },
                    );
                }
                Err(e) => {
                    failed += 1;
                    println!("FAIL {name}: {description}: the instance was refused: {e}");
                }
            }
        }
    }
    (passed, failed, skipped)
}
