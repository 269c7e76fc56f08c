//! The in-process core over every check of a corpus, `PASSES` times: read the check, judge it,
//! write the answer. For instruction counts, which do not move with the machine:
//!
//! ```sh
//! cargo build --release --example core_passes
//! valgrind --tool=callgrind target/release/examples/core_passes ../shared/corpus 0   # the set-up alone
//! valgrind --tool=callgrind target/release/examples/core_passes ../shared/corpus 2
//! ```
//!
//! (instructions of the second − the first) / (2 × checks) = instructions per check. Leave out
//! `quanta::Calibration::calibrate` and `clock_gettime` (the metrics clock's set-up spins for a
//! time, not a count). A third argument `shadow` registers every tool's schemas again as its
//! shadow schemas, so each check is judged by the contract and by a candidate.

use schemagate_testkit::corpus;
#[path = "../benches/support/service.rs"]
#[allow(dead_code)]
mod service;

use schemagate::core::check::Check;
use schemagate::core::metrics::Transport;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(passes)) = (
        args.next(),
        args.next().and_then(|p| p.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: core_passes CORPUS_DIR PASSES");
        return ExitCode::from(2);
    };
    let corpus = match corpus::Corpus::load(std::path::Path::new(&dir)) {
        Ok(corpus) => corpus,
        Err(e) => {
            eprintln!("cannot read the corpus in {dir}: {e}");
            return ExitCode::from(2);
        }
    };
    let gate = service::gate(1, &corpus.tools);
    if args.next().as_deref() == Some("shadow") {
        service::shadow_everything(&gate, &corpus.tools);
    }
    let bodies: Vec<bytes::Bytes> = corpus
        .items
        .iter()
        .map(|item| corpus::Corpus::check_text(item).into())
        .collect();
    let mut answered = 0usize;
    for _ in 0..passes {
        for body in &bodies {
            let Ok(check) = Check::from_json(body, 64) else {
                continue;
            };
            if let Ok(verdict) = gate.check(&check, Transport::Rest) {
                let mut out = Vec::with_capacity(verdict.json_size_hint());
                if verdict.write_json(&mut out).is_ok() {
                    answered += 1;
                }
            }
        }
    }
    println!("{} checks, {answered} answered", bodies.len() * passes);
    ExitCode::SUCCESS
}
