//! What /proc says about a process: CPU time and resident memory.

/// Clock ticks per second of /proc/PID/stat (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// User + system CPU time of `pid` (its threads, not its children), in microseconds.
pub fn cpu_us(pid: u32) -> Option<f64> {
    cpu_user_system_us(pid).map(|(user, system)| user + system)
}

/// User and system CPU time of `pid` apart, in microseconds: what the process runs of
/// its own, and what the kernel does for it (system calls, and the TCP work they do).
pub fn cpu_user_system_us(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces; the fields after it are fixed.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")": field 3 (state) is index 0, so utime (14) is 11 and stime (15) is 12.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime * 1e6 / USER_HZ, stime * 1e6 / USER_HZ))
}

/// Resident set size of `pid` in KiB (`VmRSS`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// The two parts of `VmRSS` that say different things, in KiB: `RssAnon` (the
/// process's own heap and stacks) and `RssFile` (clean pages of the executable
/// and libraries, shared with the page cache, which the kernel maps as much by
/// its read-ahead as by what the process runs).
pub fn rss_split_kib(pid: u32) -> Option<(u64, u64)> {
    Some((status_kib(pid, "RssAnon:")?, status_kib(pid, "RssFile:")?))
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The direct children of `pid` (every thread's), from /proc.
pub fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return found;
    };
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            found.extend(list.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}
