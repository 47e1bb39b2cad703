//! The process's own figures, read from `/proc` when the metrics page is
//! rendered, under the names Prometheus's client libraries use:
//! `process_resident_memory_bytes`, `process_cpu_seconds_total`,
//! `process_open_fds`, `process_start_time_seconds`. Nothing is recorded
//! where `/proc` is missing.

/// Resident memory, bytes. Gauge.
pub const RESIDENT_MEMORY: &str = "process_resident_memory_bytes";
/// User and system CPU time, seconds. A gauge set from the kernel's total
/// (the `metrics` facade's counters are whole numbers); it only grows.
pub const CPU_SECONDS: &str = "process_cpu_seconds_total";
/// Open file descriptors. Gauge.
pub const OPEN_FDS: &str = "process_open_fds";
/// Start time, seconds since the Unix epoch. Gauge.
pub const START_TIME: &str = "process_start_time_seconds";

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux
/// whatever the kernel's own tick).
const TICKS_PER_SECOND: f64 = 100.0;

/// The `# HELP` lines.
pub fn describe() {
    use metrics::{describe_gauge, Unit};
    describe_gauge!(RESIDENT_MEMORY, Unit::Bytes, "Resident memory size.");
    describe_gauge!(CPU_SECONDS, Unit::Seconds, "User and system CPU time.");
    describe_gauge!(OPEN_FDS, "Open file descriptors.");
    describe_gauge!(
        START_TIME,
        Unit::Seconds,
        "Start time of the process since the Unix epoch."
    );
}

/// Reads `/proc` and sets the series (those it could read).
pub fn record() {
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    let times = stat.as_deref().and_then(stat_times);
    if let Some(times) = times {
        metrics::gauge!(CPU_SECONDS).set(times.cpu_seconds);
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| boot_time(&s));
        if let Some(boot) = boot {
            metrics::gauge!(START_TIME).set(boot + times.start_after_boot);
        }
    }
    if let Some(rss) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| resident_bytes(&s))
    {
        metrics::gauge!(RESIDENT_MEMORY).set(rss as f64);
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        // The directory handle itself is one of the entries.
        metrics::gauge!(OPEN_FDS).set(fds.count().saturating_sub(1) as f64);
    }
}

/// CPU time and start time of `/proc/self/stat`.
#[derive(Debug, PartialEq)]
struct StatTimes {
    cpu_seconds: f64,
    start_after_boot: f64,
}

/// Fields 14 (utime), 15 (stime) and 22 (starttime) of a `stat` line; the
/// command name (field 2) may hold blanks and parentheses, so fields are
/// counted after its last `)`.
fn stat_times(stat: &str) -> Option<StatTimes> {
    let (_, rest) = stat.rsplit_once(") ")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field =
        |n: usize| -> Option<f64> { fields.get(n - 3)?.parse::<u64>().ok().map(|v| v as f64) };
    Some(StatTimes {
        cpu_seconds: (field(14)? + field(15)?) / TICKS_PER_SECOND,
        start_after_boot: field(22)? / TICKS_PER_SECOND,
    })
}

/// `btime` of `/proc/stat`: boot time, seconds since the epoch.
fn boot_time(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|v| v as f64)
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn resident_bytes(status: &str) -> Option<u64> {
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_stat_line_past_an_odd_command_name() {
        let line = "4242 (a) b) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 12345 1000 200 18446744073709551615";
        assert_eq!(
            stat_times(line),
            Some(StatTimes {
                cpu_seconds: 3.0,
                start_after_boot: 123.45
            })
        );
        assert_eq!(stat_times("garbage"), None);
    }

    #[test]
    fn reads_boot_time_and_resident_memory() {
        assert_eq!(boot_time("cpu 1 2\nbtime 1700000000\n"), Some(1.7e9));
        assert_eq!(
            resident_bytes("Name:\tx\nVmRSS:\t    2048 kB\n"),
            Some(2 * 1024 * 1024)
        );
        assert_eq!(resident_bytes("Name:\tx\n"), None);
    }

    #[test]
    fn this_process_has_figures() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(stat_times(&stat).is_some());
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(resident_bytes(&status).unwrap() > 0);
    }
}
