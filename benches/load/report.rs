//! What a leg measured, how it prints, and the targets judged on a run's figures.

/// What one leg measured.
pub(crate) struct Leg {
    pub(crate) name: String,
    pub(crate) checks: u64,
    /// Bytes of check JSON carried (payload throughput, so legs of different item sizes compare).
    pub(crate) bytes: u64,
    pub(crate) seconds: f64,
    /// Per request (a request may carry many checks), in microseconds.
    pub(crate) latencies: Vec<u32>,
    pub(crate) server_cpu: f64,
    /// NaN when the client is the server (in-process legs).
    pub(crate) client_cpu: f64,
}

impl Leg {
    pub(crate) fn rate(&self) -> f64 {
        self.checks as f64 / self.seconds
    }
    pub(crate) fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.seconds / 1e6
    }
    pub(crate) fn percentile(&self, p: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let mut l = self.latencies.clone();
        l.sort_unstable();
        let i = ((l.len() as f64 - 1.0) * p).round() as usize;
        f64::from(l[i]) / 1000.0
    }
    pub(crate) fn per_k(&self, cpu: f64) -> String {
        if cpu.is_nan() {
            "-".to_owned()
        } else {
            format!("{:.4}", cpu / self.checks.max(1) as f64 * 1000.0)
        }
    }
    /// One row; `ceiling` is NaN when the run did not measure it (no in-process legs), and the
    /// last column then says `-` rather than a ratio to nothing.
    pub(crate) fn print(&self, ceiling: f64) {
        let of_ceiling = if ceiling.is_nan() {
            "-".to_owned()
        } else {
            format!("{:.2}x", self.rate() / ceiling)
        };
        println!(
            "{:<44} {:>9.0} {:>7.1} {:>8.3} {:>8.3} {:>10} {:>10} {:>8}",
            self.name,
            self.rate(),
            self.mb_per_s(),
            self.percentile(0.5),
            self.percentile(0.99),
            self.per_k(self.server_cpu),
            self.per_k(self.client_cpu),
            of_ceiling
        );
    }
}

/// What the proxy and gateway legs measure of each path they call: the latency one call at a
/// time, and with many calls in flight the rate and the CPU microseconds per call of the client,
/// the process it talks to and the one behind that.
pub(crate) struct Timing {
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) rate: f64,
    pub(crate) cpu_us: [f64; 3],
}

impl Timing {
    /// The microseconds this path adds at p50 to `direct`'s.
    pub(crate) fn added_p50_us(&self, direct: &Timing) -> f64 {
        self.p50_us - direct.p50_us
    }

    /// The direct path's row, `label` in a column `width` wide: nothing added, no relay.
    pub(crate) fn direct_row(&self, width: usize, label: &str) -> String {
        let cpu = format!("{:.1}, -, {:.1}", self.cpu_us[0], self.cpu_us[1]);
        self.row(width, label, None, &cpu)
    }

    /// A relayed path's row, `label` in a column `width` wide: with what it adds to `direct`'s
    /// percentiles.
    pub(crate) fn relayed_row(&self, width: usize, label: &str, direct: &Timing) -> String {
        self.row(width, label, Some(direct), &self.three_cpu())
    }

    /// A relayed path's row with nothing to compare it to (the added columns blank).
    pub(crate) fn relay_row(&self, width: usize, label: &str) -> String {
        self.row(width, label, None, &self.three_cpu())
    }

    fn three_cpu(&self) -> String {
        let [client, relay, server] = self.cpu_us;
        format!("{client:.1}, {relay:.1}, {server:.1}")
    }

    /// Every row's columns: the label, the percentiles and the rate, what they add to `direct`'s
    /// (blank without it), then `cpu`.
    fn row(&self, width: usize, label: &str, direct: Option<&Timing>, cpu: &str) -> String {
        let (added_p50, added_p99) = direct.map_or((String::new(), String::new()), |d| {
            (
                format!("{:.1}", self.added_p50_us(d)),
                format!("{:.1}", self.p99_us - d.p99_us),
            )
        });
        format!(
            "{label:<width$} {:>10.1} {:>10.1} {:>12.0} {added_p50:>14} {added_p99:>14}   {cpu}",
            self.p50_us, self.p99_us, self.rate
        )
    }
}

/// An error unless `relay` answered a conforming call with the direct path's answer, unchanged.
pub(crate) fn unchanged(relay: &str, direct: &str, relayed: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        direct == relayed,
        "the {relay} changed a conforming result:\n direct:  {}\n relayed: {}",
        direct.trim_end(),
        relayed.trim_end()
    );
    Ok(())
}

/// The `p` percentile of `sorted`, in microseconds; NaN when it is empty.
pub(crate) fn percentile(sorted: &[std::time::Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(i).map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
}

/// One line of the closing summary: a target, the figures that decide it, and whether it is met.
pub(crate) fn verdict_line(target: &str, figures: String, met: bool) {
    println!(
        "  [{}] {target}: {figures}",
        if met { "met" } else { "NOT MET" }
    );
}

/// The targets, judged on this run's figures.
pub(crate) fn summary(legs: &[Leg], ceiling: f64) {
    let find = |prefix: &str| legs.iter().find(|l| l.name.starts_with(prefix));
    println!();
    println!("targets:");
    if let Some(batch) = find("REST batch 100,") {
        let target = "REST batches of 100 >= 0.6x the ceiling on all threads";
        if ceiling.is_nan() {
            println!(
                "  [not judged] {target}: {:.0} checks/s; the ceiling is measured by the in-process legs, not in this run",
                batch.rate()
            );
        } else {
            let ratio = batch.rate() / ceiling;
            verdict_line(
                target,
                format!("{:.0} checks/s = {ratio:.2}x", batch.rate()),
                ratio >= 0.6,
            );
        }
    }
    if let (Some(single), Some(healthz)) = (find("REST single"), find("REST GET /healthz")) {
        let ratio = single.rate() / healthz.rate();
        let p99 = single.percentile(0.99);
        verdict_line(
            "REST single >= 0.75x the same server's GET /healthz at 32 connections, p99 < 2 ms",
            format!(
                "{:.0} checks/s vs {:.0} requests/s = {ratio:.2}x, p99 {p99:.2} ms",
                single.rate(),
                healthz.rate()
            ),
            ratio >= 0.75 && p99 < 2.0,
        );
    }
    if let (Some(unary), Some(single)) = (find("gRPC unary"), find("REST single")) {
        let ratio = unary.rate() / single.rate();
        verdict_line(
            "gRPC unary >= 0.6x REST single",
            format!(
                "{:.0} vs {:.0} checks/s = {ratio:.2}x",
                unary.rate(),
                single.rate()
            ),
            ratio >= 0.6,
        );
    }
    if let (Some(stream), Some(batch)) = (find("gRPC stream"), find("REST batch 100,")) {
        verdict_line(
            "gRPC stream >= REST batch 100",
            format!(
                "{:.0} vs {:.0} checks/s ({:.2}x)",
                stream.rate(),
                batch.rate(),
                stream.rate() / batch.rate()
            ),
            stream.rate() >= batch.rate(),
        );
    }
    for (what, invalid, valid) in [
        ("in-process core", "core, ", "core, "),
        (
            "REST batch 100",
            "REST batch 100, invalid",
            "REST batch 100, valid",
        ),
    ] {
        let invalid = legs
            .iter()
            .find(|l| l.name.starts_with(invalid) && l.name.ends_with("invalid only"));
        let valid = legs.iter().find(|l| {
            l.name.starts_with(valid)
                && l.name.ends_with("valid only")
                && !l.name.ends_with("invalid only")
        });
        if let (Some(invalid), Some(valid)) = (invalid, valid) {
            let by_checks = invalid.rate() / valid.rate();
            let mean_kb = |leg: &Leg| leg.bytes as f64 / leg.checks.max(1) as f64 / 1024.0;
            verdict_line(
                &format!("{what}: all invalid (errors collected) >= 0.5x all valid"),
                format!(
                    "{by_checks:.2}x in checks/s ({:.2}x in MB/s; the invalid items average {:.1} KB, the valid {:.1} KB)",
                    invalid.mb_per_s() / valid.mb_per_s(),
                    mean_kb(invalid),
                    mean_kb(valid)
                ),
                by_checks >= 0.5,
            );
        }
    }
}
