//! A run summed up: checks by outcome, first-attempt compliance and retry resolution per server,
//! tool and payload (the ratios the dashboards read from `schemagate_validations_total`), the
//! fields that fail most, and the input errors. Written as a table, as JSON, or as JUnit (one
//! test case per server and tool, failing when the policy would reject any of its checks).

use super::sink::{InputError, Kept, Note};
use super::tally::{ratio, Row, Tally, OTHER};
use crate::core::metrics::Attempt;
use crate::core::verdict::Outcome;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::time::Duration;

/// Valid and invalid checks of one attempt kind.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ValidInvalid {
    pub valid: u64,
    pub invalid: u64,
}

/// The counts of a row, or of the whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Counts {
    pub checks: u64,
    pub valid: u64,
    pub invalid: u64,
    pub skipped: u64,
    pub tool_error: u64,
    pub unchecked: u64,
    /// Checks the policy would reject (on the MCP wire: withhold).
    pub rejected: u64,
    pub first_attempt: ValidInvalid,
    pub retries: ValidInvalid,
    /// valid / (valid + invalid) over first attempts; `null` when none was judged.
    pub first_attempt_compliance: Option<f64>,
    /// valid / (valid + invalid) over retries; `null` when none was judged.
    pub retry_resolution: Option<f64>,
}

impl Counts {
    fn of(row: &Row) -> Self {
        let (first, retry) = (row.judged(Attempt::First), row.judged(Attempt::Retry));
        Counts {
            checks: row.checks(),
            valid: row.outcome(Outcome::Valid),
            invalid: row.outcome(Outcome::Invalid),
            skipped: row.outcome(Outcome::Skipped),
            tool_error: row.outcome(Outcome::ToolError),
            unchecked: row.outcome(Outcome::Unchecked),
            rejected: row.rejected,
            first_attempt: ValidInvalid {
                valid: first.0,
                invalid: first.1,
            },
            retries: ValidInvalid {
                valid: retry.0,
                invalid: retry.1,
            },
            first_attempt_compliance: ratio(first),
            retry_resolution: ratio(retry),
        }
    }
}

/// One server, tool and payload.
#[derive(Debug, Serialize)]
pub struct ToolCounts {
    pub server: String,
    pub tool: String,
    pub payload: &'static str,
    #[serde(flatten)]
    pub counts: Counts,
}

/// A field that fails, and how often.
#[derive(Debug, Serialize)]
pub struct Field {
    pub server: String,
    pub tool: String,
    pub payload: &'static str,
    /// The instance path, array indices folded to `*` (as `schemagate_field_failures_total`).
    pub path: String,
    pub keyword: String,
    pub count: u64,
}

/// What `schemagate check` reports.
#[derive(Debug, Serialize)]
pub struct Report {
    pub logs: Vec<String>,
    pub seconds: f64,
    pub total: Counts,
    pub tools: Vec<ToolCounts>,
    pub top_fields: Vec<Field>,
    /// Lines (and tools-file entries) that could not be checked.
    pub input_errors: u64,
    /// Transcript lines that are no JSON-RPC message, passed over as the proxy relays them.
    pub passed_over: u64,
    /// Payloads of calls (on the MCP wire) to tools no listing and no tools file names.
    pub unknown_tools: u64,
    /// The first input errors.
    pub errors: Vec<InputError>,
    #[serde(skip)]
    notes: HashMap<(String, String), Vec<Note>>,
}

impl Report {
    pub fn new(
        tally: &Tally,
        kept: Kept,
        logs: &[String],
        elapsed: Duration,
        top_fields: usize,
    ) -> Self {
        let tools = tally
            .sorted_rows()
            .into_iter()
            .map(|((server, tool, payload), row)| ToolCounts {
                server: server.clone(),
                tool: tool.clone(),
                payload: payload.as_str(),
                counts: Counts::of(row),
            })
            .collect();
        let top_fields = tally
            .top_fields(top_fields)
            .into_iter()
            .map(|((server, tool, payload, path, keyword), count)| Field {
                server: server.clone(),
                tool: tool.clone(),
                payload: payload.as_str(),
                path: path.clone(),
                keyword: keyword.clone(),
                count,
            })
            .collect();
        Report {
            logs: logs.to_vec(),
            seconds: elapsed.as_secs_f64(),
            total: Counts::of(&tally.total()),
            tools,
            top_fields,
            input_errors: tally.input_errors,
            passed_over: tally.passed_over,
            unknown_tools: tally.unknown_tools,
            errors: kept.errors,
            notes: kept.notes,
        }
    }

    /// The summary as tables.
    pub fn write_text(&self, out: &mut dyn Write) -> io::Result<()> {
        let t = &self.total;
        let rate = if self.seconds > 0.0 {
            format!(" ({:.0} checks/s)", t.checks as f64 / self.seconds)
        } else {
            String::new()
        };
        let logs = plural(self.logs.len() as u64, "log");
        writeln!(
            out,
            "{} from {logs} in {:.2} s{rate}",
            plural(t.checks, "check"),
            self.seconds
        )?;
        writeln!(out)?;
        self.write_outcomes(out)?;
        self.write_tools(out)?;
        self.write_top_fields(out)?;
        writeln!(out)?;
        write!(
            out,
            "{} of {} would be rejected under the policy; {} could not be checked",
            t.rejected,
            plural(t.checks, "check"),
            plural(self.input_errors, "line")
        )?;
        if self.unknown_tools > 0 {
            write!(
                out,
                "; {} of tools no listing names (unknown_tool: the server answers them)",
                plural(self.unknown_tools, "payload")
            )?;
        }
        if self.passed_over > 0 {
            write!(
                out,
                "; {} passed over (not JSON-RPC, relayed unjudged as the proxy relays them)",
                plural(self.passed_over, "line")
            )?;
        }
        writeln!(out)
    }

    /// The outcomes table, and the run's compliance and resolution.
    fn write_outcomes(&self, out: &mut dyn Write) -> io::Result<()> {
        let t = &self.total;
        let mut rows = vec![cells(&["outcome", "checks", "first attempt", "retry"])];
        for (name, n) in [
            ("valid", t.valid),
            ("invalid", t.invalid),
            ("tool_error", t.tool_error),
            ("skipped", t.skipped),
            ("unchecked", t.unchecked),
        ] {
            let (first, retry) = match name {
                "valid" => (t.first_attempt.valid, t.retries.valid),
                "invalid" => (t.first_attempt.invalid, t.retries.invalid),
                _ => (u64::MAX, u64::MAX),
            };
            let shown = |n: u64| {
                if n == u64::MAX {
                    String::new()
                } else {
                    n.to_string()
                }
            };
            rows.push(vec![
                name.to_owned(),
                n.to_string(),
                shown(first),
                shown(retry),
            ]);
        }
        table(out, &rows, &[false, true, true, true])?;
        writeln!(out)?;
        writeln!(
            out,
            "first-attempt compliance {}, retry resolution {}",
            percent(t.first_attempt_compliance, t.first_attempt),
            percent(t.retry_resolution, t.retries)
        )?;
        writeln!(out)?;
        Ok(())
    }

    /// One row per server, tool and payload.
    fn write_tools(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut rows = vec![cells(&[
            "server/tool",
            "payload",
            "checks",
            "invalid",
            "rejected",
            "first-attempt compliance",
            "retry resolution",
        ])];
        for row in &self.tools {
            let c = &row.counts;
            rows.push(vec![
                tool_name(&row.server, &row.tool),
                row.payload.to_owned(),
                c.checks.to_string(),
                c.invalid.to_string(),
                c.rejected.to_string(),
                percent(c.first_attempt_compliance, c.first_attempt),
                percent(c.retry_resolution, c.retries),
            ]);
        }
        table(out, &rows, &[false, false, true, true, true, false, false])?;
        Ok(())
    }

    /// The fields that fail most, if any do.
    fn write_top_fields(&self, out: &mut dyn Write) -> io::Result<()> {
        if !self.top_fields.is_empty() {
            writeln!(out)?;
            writeln!(out, "fields that fail most")?;
            let mut rows = vec![cells(&[
                "count",
                "server/tool",
                "payload",
                "path",
                "keyword",
            ])];
            for f in &self.top_fields {
                rows.push(vec![
                    f.count.to_string(),
                    tool_name(&f.server, &f.tool),
                    f.payload.to_owned(),
                    f.path.clone(),
                    f.keyword.clone(),
                ]);
            }
            table(out, &rows, &[true, false, false, false, false])?;
        }
        Ok(())
    }

    /// JUnit XML: one test case per server and tool, failing when the policy would reject one
    /// of its checks (the first rejections listed), and one test case `input` erring when a line
    /// could not be checked.
    pub fn write_junit(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut tools: BTreeMap<(&str, &str), Vec<&ToolCounts>> = BTreeMap::new();
        for row in &self.tools {
            tools
                .entry((row.server.as_str(), row.tool.as_str()))
                .or_default()
                .push(row);
        }
        let failures = tools
            .values()
            .filter(|rows| rows.iter().any(|r| r.counts.rejected > 0))
            .count();
        let errors = usize::from(self.input_errors > 0);
        let tests = tools.len() + errors;
        writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
        let suite = format!(
            r#"name="schemagate check" tests="{tests}" failures="{failures}" errors="{errors}" time="{:.3}""#,
            self.seconds
        );
        writeln!(out, "<testsuites {suite}>")?;
        writeln!(out, "  <testsuite {suite}>")?;
        for ((server, tool), rows) in &tools {
            writeln!(
                out,
                r#"    <testcase classname="{}" name="{}" time="0">"#,
                xml(server),
                xml(tool)
            )?;
            let checks: u64 = rows.iter().map(|r| r.counts.checks).sum();
            let rejected: u64 = rows.iter().map(|r| r.counts.rejected).sum();
            if rejected > 0 {
                let text = self.rejections_text(server, tool, rejected);
                writeln!(
                    out,
                    r#"      <failure type="rejected" message="{rejected} of {checks} checks would be rejected">{}</failure>"#,
                    xml(&text)
                )?;
            }
            let mut counts = String::new();
            for row in rows {
                let c = &row.counts;
                counts.push_str(&format!(
                    "{}: {} checks, {} valid, {} invalid, {} tool_error, {} skipped, {} unchecked; first-attempt compliance {}, retry resolution {}\n",
                    row.payload, c.checks, c.valid, c.invalid, c.tool_error, c.skipped, c.unchecked,
                    percent(c.first_attempt_compliance, c.first_attempt),
                    percent(c.retry_resolution, c.retries),
                ));
            }
            writeln!(out, "      <system-out>{}</system-out>", xml(&counts))?;
            writeln!(out, "    </testcase>")?;
        }
        if errors > 0 {
            self.write_input_case(out)?;
        }
        writeln!(out, "  </testsuite>")?;
        writeln!(out, "</testsuites>")
    }

    /// The first rejections of `server`'s `tool` (of `rejected`), a line each, and how many
    /// more.
    fn rejections_text(&self, server: &str, tool: &str, rejected: u64) -> String {
        let notes = self
            .notes
            .get(&(server.to_owned(), tool.to_owned()))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut text = String::new();
        for note in notes {
            let call = note
                .call_id
                .as_deref()
                .map(|id| format!(", call {id}"))
                .unwrap_or_default();
            text.push_str(&format!(
                "{}: {} (attempt {}{call}): {}\n",
                note.place,
                note.payload.as_str(),
                note.attempt,
                note.feedback
            ));
        }
        let unlisted = rejected.saturating_sub(notes.len() as u64);
        if unlisted > 0 {
            text.push_str(&format!("... and {unlisted} more\n"));
        }
        text
    }

    /// The test case `input`, erring with the lines that could not be checked.
    fn write_input_case(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut text = String::new();
        for error in &self.errors {
            text.push_str(&format!("{error}\n"));
        }
        let unlisted = self.input_errors.saturating_sub(self.errors.len() as u64);
        if unlisted > 0 {
            text.push_str(&format!("... and {unlisted} more\n"));
        }
        writeln!(
            out,
            r#"    <testcase classname="schemagate" name="input" time="0">"#
        )?;
        writeln!(
            out,
            r#"      <error type="input" message="{} lines or entries could not be checked">{}</error>"#,
            self.input_errors,
            xml(&text)
        )?;
        writeln!(out, "    </testcase>")?;
        Ok(())
    }
}

fn cells(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

/// `server/tool`, or the tool alone for a check that named no server.
fn tool_name(server: &str, tool: &str) -> String {
    match (server, tool) {
        (OTHER, OTHER) => OTHER.to_owned(),
        ("-", tool) => tool.to_owned(),
        (server, tool) => format!("{server}/{tool}"),
    }
}

/// `92.1% (350/380)`, or `-` when nothing was judged.
fn percent(ratio: Option<f64>, judged: ValidInvalid) -> String {
    match ratio {
        Some(r) => format!(
            "{:.1}% ({}/{})",
            r * 100.0,
            judged.valid,
            judged.valid + judged.invalid
        ),
        None => "-".to_owned(),
    }
}

/// Rows in columns, each as wide as its widest cell; `right[i]` aligns column `i` right.
fn table(out: &mut dyn Write, rows: &[Vec<String>], right: &[bool]) -> io::Result<()> {
    let mut widths = vec![0usize; right.len()];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            if i > 0 {
                line.push_str("  ");
            }
            if right[i] {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// `text` escaped for XML text and attributes; characters XML 1.0 does not allow at all become
/// U+FFFD.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// `n` and `noun`, plural unless `n` is 1: "1 line", "2 lines".
fn plural(n: u64, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        _ => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_replaces_what_xml_forbids() {
        assert_eq!(xml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(xml("bell\u{7}\ttab"), "bell\u{FFFD}\ttab");
    }

    #[test]
    fn columns_align() {
        let mut out = Vec::new();
        let rows = vec![cells(&["a", "n"]), cells(&["long", "12"])];
        table(&mut out, &rows, &[false, true]).expect("writes");
        assert_eq!(
            String::from_utf8(out).expect("UTF-8"),
            "a      n\nlong  12\n"
        );
    }
}
