//! CPU seconds per thread and resident size, read from /proc; pinning threads to cores.

/// Pins the calling thread to `cpus` (no-op where that is not possible).
pub(crate) fn pin_current_thread(cpus: &[usize]) {
    // SAFETY: `set` is a plain bit set, initialised by CPU_ZERO before use; the call only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// CPU seconds used so far by this process's threads whose name starts with one of `prefixes`.
pub(crate) fn thread_cpu(prefixes: &[&str]) -> f64 {
    let ticks = 100.0; // USER_HZ on Linux
    let mut total = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !prefixes.iter().any(|p| comm.starts_with(p)) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        total += stat_cpu_ticks(&stat);
    }
    total as f64 / ticks
}

/// utime + stime from a /proc stat line.
pub(crate) fn stat_cpu_ticks(stat: &str) -> u64 {
    // Fields after the command name (which is in parentheses): utime is 14th, stime 15th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let t = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    t(11) + t(12)
}

/// CPU seconds used so far by this process, all threads.
pub(crate) fn process_cpu() -> f64 {
    cpu_of("self")
}

/// CPU seconds used so far by process `pid` (a number, or `self`), all threads; NaN when it
/// cannot be read.
pub(crate) fn cpu_of(pid: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_or(f64::NAN, |stat| stat_cpu_ticks(&stat) as f64 / 100.0)
}

pub(crate) const CLIENT_THREADS: [&str; 1] = ["sg-client"];

pub(crate) fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}
