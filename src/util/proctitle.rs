//! The process title: what `ps` and `/proc/PID/cmdline` show, as Redis's setproctitle.c.
//!
//! Why it is written here: Linux shows, as a process's command line, the memory where its
//! argument strings were placed at exec (followed by the environment strings); a title is
//! set by overwriting that memory. No crate does this on Linux (`proctitle` sets the
//! 15-byte thread name, /proc/PID/comm, not the command line). As Redis does, `init` first
//! moves the environment strings to the heap (so `environ` no longer points into the area)
//! and then owns the whole argv+environ area; `set` writes a title into it.
//!
//! `init` must run once, at the start of `main`, before any other thread exists (it rewrites
//! `environ`, which other threads may read) and after `main` has read its arguments:
//! `std::env::args` reads the same memory and would return the title afterwards.

use std::sync::Mutex;

/// Redis's `SPT_MAXTITLE`: longer titles are cut.
const MAX_TITLE: usize = 255;

struct Area {
    /// Start of argv[0], and the number of bytes from there to the end of the last
    /// environment string that follows the arguments.
    base: usize,
    len: usize,
    /// The area has been cleared once (the first title wipes all of it).
    reset: bool,
}

static AREA: Mutex<Option<Area>> = Mutex::new(None);
static ARG0: Mutex<String> = Mutex::new(String::new());

/// Takes over the argv+environ area; see the module comment for when to call it. An error
/// (not Linux, /proc not mounted, an unexpected layout) leaves everything as it was, and
/// `set` then fails.
pub fn init(arg0: &str) -> Result<(), String> {
    *ARG0.lock().unwrap_or_else(|e| e.into_inner()) = arg0.to_string();
    imp::init().map(|(base, len)| {
        *AREA.lock().unwrap_or_else(|e| e.into_inner()) = Some(Area {
            base,
            len,
            reset: false,
        });
    })
}

/// The command's name as it was started (argv[0]): the template's `{title}`.
pub fn arg0() -> String {
    ARG0.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Writes `title` as the process title (cut to 255 bytes, and to the area's size).
pub fn set(title: &str) -> Result<(), String> {
    let mut guard = AREA.lock().unwrap_or_else(|e| e.into_inner());
    let area = guard
        .as_mut()
        .ok_or("the process title cannot be set on this system")?;
    let bytes = title.as_bytes();
    let clear = if area.reset {
        area.len.min(MAX_TITLE + 1)
    } else {
        area.reset = true;
        area.len
    };
    let n = bytes.len().min(MAX_TITLE).min(area.len - 1);
    imp::write(area.base, clear, &bytes[..n]);
    Ok(())
}

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::{c_char, CStr};

    extern "C" {
        static mut environ: *mut *mut c_char;
    }
    #[cfg(target_env = "gnu")]
    extern "C" {
        static mut program_invocation_name: *mut c_char;
        static mut program_invocation_short_name: *mut c_char;
    }

    /// The argv area and the environment area that follows it, from the kernel's own
    /// record of them (/proc/self/stat fields 48 to 51: arg_start, arg_end, env_start,
    /// env_end), so no guess about the layout is made.
    fn areas() -> Result<[usize; 4], String> {
        let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| e.to_string())?;
        // The name (field 2) may hold spaces and parentheses: fields count from the last ')'.
        let after = stat
            .rfind(')')
            .map(|i| &stat[i + 1..])
            .ok_or("unreadable /proc/self/stat")?;
        let fields: Vec<&str> = after.split_whitespace().collect();
        // Field 3 is fields[0].
        let get = |n: usize| -> Result<usize, String> {
            fields
                .get(n - 3)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| format!("/proc/self/stat has no field {n}"))
        };
        Ok([get(48)?, get(49)?, get(50)?, get(51)?])
    }

    /// A heap copy of a C string, never freed: it replaces a string of the area for the
    /// rest of the process's life.
    ///
    /// SAFETY: `p` points to a NUL-terminated string.
    unsafe fn leak_copy(p: *mut c_char) -> *mut c_char {
        unsafe { CStr::from_ptr(p) }.to_owned().into_raw()
    }

    pub fn init() -> Result<(usize, usize), String> {
        let [arg_start, arg_end, env_start, env_end] = areas()?;
        if arg_start == 0 || arg_end <= arg_start {
            return Err("no argument area".into());
        }
        // The environment strings extend the area only when they follow the arguments
        // directly (as exec lays them out); the kernel reads a title past arg_end only then.
        let end = if env_start == arg_end && env_end > env_start {
            env_end
        } else {
            arg_end
        };
        let inside = |p: *mut c_char| (arg_start..end).contains(&(p as usize));
        // SAFETY: no other thread exists yet (the caller's contract), so nothing reads
        // `environ` or the glibc names while they change; each entry of `environ` up to its
        // null is a NUL-terminated string, and each is replaced by an equal copy.
        unsafe {
            let env = environ;
            if !env.is_null() {
                let mut i = 0;
                loop {
                    let p = *env.add(i);
                    if p.is_null() {
                        break;
                    }
                    if inside(p) {
                        *env.add(i) = leak_copy(p);
                    }
                    i += 1;
                }
            }
            #[cfg(target_env = "gnu")]
            {
                // glibc's names of the program point into argv[0] (its error messages use
                // them).
                if inside(program_invocation_name) {
                    program_invocation_name = leak_copy(program_invocation_name);
                }
                if inside(program_invocation_short_name) {
                    program_invocation_short_name = leak_copy(program_invocation_short_name);
                }
            }
        }
        Ok((arg_start, end - arg_start))
    }

    /// Zeroes `clear` bytes at `base` and copies `title` there (`title` is shorter than the
    /// area, so a NUL always follows it).
    pub fn write(base: usize, clear: usize, title: &[u8]) {
        // SAFETY: [base, base + clear) lies in the argv+environ area `init` found, which the
        // process owns for its whole life and nothing reads any more (the environment
        // strings were moved, and `main` read its arguments before `init`); writes are
        // serialized by `AREA`'s lock.
        unsafe {
            std::ptr::write_bytes(base as *mut u8, 0, clear);
            std::ptr::copy_nonoverlapping(title.as_ptr(), base as *mut u8, title.len());
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub fn init() -> Result<(usize, usize), String> {
        Err("setting the process title is only supported on Linux".into())
    }

    pub fn write(_base: usize, _clear: usize, _title: &[u8]) {}
}
