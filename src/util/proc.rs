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

/// CPU seconds as `getrusage` counts them, for INFO's `cpu` section.
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

/// (user, system) seconds of `who` (zeros if refused).
fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: an all-zero `rusage` is a valid value, and getrusage writes only the struct
    // it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut u) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(u.ru_utime), secs(u.ru_stime))
}

/// The process's, its children's and the calling thread's CPU time, as Redis reads them
/// (`getrusage` of `RUSAGE_SELF`, `RUSAGE_CHILDREN` and `RUSAGE_THREAD`): microseconds, where
/// `/proc`'s stat files count ticks of 1/100 s.
pub fn cpu_times() -> CpuTimes {
    let (user, sys) = rusage(libc::RUSAGE_SELF);
    let (children_user, children_sys) = rusage(libc::RUSAGE_CHILDREN);
    let (thread_user, thread_sys) = rusage(libc::RUSAGE_THREAD);
    CpuTimes {
        user,
        sys,
        children_user,
        children_sys,
        thread_user,
        thread_sys,
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
