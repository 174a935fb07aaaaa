//! What the operating system says of this process.

/// Resident set size of this process, from /proc (0 where unavailable).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

/// CPU seconds as `/proc` counts them, for INFO's `cpu` section.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuTimes {
    pub user: f64,
    pub sys: f64,
    pub children_user: f64,
    pub children_sys: f64,
    /// The calling thread's own time (a runtime thread that executes commands).
    pub thread_user: f64,
    pub thread_sys: f64,
}

/// utime, stime, cutime, cstime (fields 14-17) of a `/proc/.../stat` file, in clock ticks.
fn stat_ticks(path: &str) -> Option<[u64; 4]> {
    let text = std::fs::read_to_string(path).ok()?;
    // The command name may hold spaces: the fields start after its closing parenthesis.
    let rest = text.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some([get(11)?, get(12)?, get(13)?, get(14)?])
}

/// The process's, its children's and the calling thread's CPU time (zeros where `/proc`
/// is unavailable). Linux reports it in ticks of 1/100 s (`USER_HZ`).
pub fn cpu_times() -> CpuTimes {
    const HZ: f64 = 100.0;
    let p = stat_ticks("/proc/self/stat").unwrap_or_default();
    let t = stat_ticks("/proc/thread-self/stat").unwrap_or_default();
    CpuTimes {
        user: p[0] as f64 / HZ,
        sys: p[1] as f64 / HZ,
        children_user: p[2] as f64 / HZ,
        children_sys: p[3] as f64 / HZ,
        thread_user: t[0] as f64 / HZ,
        thread_sys: t[1] as f64 / HZ,
    }
}

/// Raises this process's open-files limit (soft and hard) to `want` if it is lower, as
/// Redis's `adjustOpenFilesLimit`: when `want` is refused, tries lower values in steps of
/// 16 down to the current limit. Returns (limit before, limit now).
pub fn raise_open_files(want: u64) -> std::io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let old = lim.rlim_cur;
    if old >= want {
        return Ok((old, old));
    }
    let mut best = want;
    while best > old {
        let new = libc::rlimit {
            rlim_cur: best,
            rlim_max: best.max(lim.rlim_max),
        };
        // SAFETY: setrlimit reads only the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } == 0 {
            return Ok((old, best));
        }
        best = best.saturating_sub(16);
    }
    Ok((old, old))
}
