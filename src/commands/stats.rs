//! Statistics seen from the command side: how a run or a refusal is counted
//! (`state::cmdstats` keeps the counters), the `INFO commandstats`, `errorstats` and
//! `latencystats` sections, and the LATENCY family (`HISTOGRAM`, and the latency monitor's
//! `LATEST`, `HISTORY`, `RESET`, `DOCTOR`, `GRAPH`).

use crate::commands::args::{Args, CommandError};
use crate::commands::spec::{family, flag::*, CmdResult, CommandSpec};
use crate::commands::{help_reply, table, text, Ctx};
use crate::protocol::Reply;
use crate::state::client::ClientState;
use crate::state::{cmdstats, slowlog};
use bytes::Bytes;
use std::fmt::Write;

const SRV: CommandSpec = family("server", 0);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    SRV.cmd("latency", -2, container)
        .doc("2.8.13", "A container for latency diagnostics commands.")
        .complexity("Depends on subcommand.").subs(LATENCY_SUBCOMMANDS),
];

#[rustfmt::skip]
static LATENCY_SUBCOMMANDS: &[CommandSpec] = &[
    SRV.cmd("latency|doctor", 2, latency_doctor).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.8.13", "Returns a human-readable latency analysis report."),
    SRV.cmd("latency|graph", 3, latency_graph).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.8.13", "Returns a latency graph for an event.").args("event"),
    SRV.cmd("latency|help", 2, latency_help).flags(LOADING | STALE)
        .doc("2.8.13", "Returns helpful text about the different subcommands."),
    SRV.cmd("latency|histogram", -2, latency_histogram).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("7.0.0", "Returns the cumulative distribution of latencies of a subset or all commands.")
        .complexity("O(N) where N is the number of commands with latency information being retrieved.")
        .args("[command...]"),
    SRV.cmd("latency|history", 3, latency_history).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.8.13", "Returns timestamp-latency samples for an event.").args("event"),
    SRV.cmd("latency|latest", 2, latency_latest).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.8.13", "Returns the latest latency samples for all events."),
    SRV.cmd("latency|reset", -2, latency_reset).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.8.13", "Resets the latency data for one or more events.")
        .complexity("O(1)").args("[event...]"),
];

// ---- counting ----

/// Starts timing a command run (see [`finish`]).
#[inline]
pub fn start() -> (u32, u64) {
    (cmdstats::enter(), crate::util::clock::stamp())
}

/// Counts a run of `spec` begun with [`start`] that answered `reply`: a call, its time, a
/// failure if it answered an error, its latency (when a blocked command is answered, if it
/// blocked), and a latency-monitor sample if it was slow.
#[inline]
pub fn finish(
    client: &mut ClientState,
    spec: &'static CommandSpec,
    args: &[Bytes],
    begun: (u32, u64),
    reply: &Reply,
) {
    let nanos = crate::util::clock::stamp_elapsed_ns(begun.1);
    let idx = crate::commands::stat_index(spec);
    let blocked = client.blocked.is_some();
    if blocked {
        client.blocked_stat = Some((idx, nanos));
        // Logged when answered, with the time it ran (Redis's updateStatsOnUnblock): a
        // script's run time is only known then, so the arguments are kept while the log is on.
        if !spec.has(SKIP_SLOWLOG) && slowlog::enabled() {
            client.blocked_slow = Some(slow_argv(spec, args));
        }
    } else if !spec.has(SKIP_SLOWLOG) && slowlog::wanted(nanos / 1000) {
        log_slow(client, spec, args, nanos / 1000);
    }
    let error = match reply {
        Reply::Error(e) => Some(e.as_str()),
        _ => None,
    };
    cmdstats::leave(idx, begun.0, nanos, error, blocked);
    let event = if spec.has(FAST) {
        "fast-command"
    } else {
        "command"
    };
    cmdstats::latency_sample(event, nanos);
}

/// A blocked command got its answer (served, timed out or unblocked).
pub fn unblocked(client: &mut ClientState, reply: &Reply) {
    if let Some((idx, nanos)) = client.blocked_stat.take() {
        let error = match reply {
            Reply::Error(e) => Some(e.as_str()),
            _ => None,
        };
        // A script: its time is what it ran on the script thread.
        let script = client.handle.script_run.take();
        let (nanos, counted) = match script {
            Some(run) => {
                cmdstats::latency_sample("command", run.nanos);
                (run.nanos, run.error_counted)
            }
            None => (nanos, false),
        };
        cmdstats::unblocked(idx, nanos, error, counted);
        if let Some(argv) = client.blocked_slow.take() {
            if slowlog::wanted(nanos / 1000) {
                push_slow(client, argv, nanos / 1000);
            }
        }
    }
}

/// Adds a slow command to the slow log (Redis's slowlogPushCurrentCommand).
#[cold]
fn log_slow(client: &ClientState, spec: &CommandSpec, args: &[Bytes], micros: u64) {
    push_slow(client, slow_argv(spec, args), micros);
}

#[cold]
fn push_slow(client: &ClientState, argv: Vec<Bytes>, micros: u64) {
    let name = client.handle.meta.lock().name.to_string();
    slowlog::push(argv, micros, client.handle.addr.to_string(), name);
}

/// The arguments as the slow log keeps them: secrets replaced by `(redacted)` as Redis's
/// `redactClientCommandArgument` calls do (AUTH, HELLO's AUTH, ACL SETUSER, CONFIG SET of a
/// password, MIGRATE's AUTH/AUTH2), then trimmed.
fn slow_argv(spec: &CommandSpec, args: &[Bytes]) -> Vec<Bytes> {
    let hidden = Bytes::from_static(b"(redacted)");
    let mut argv = slowlog::trimmed(args);
    let mut hide = |from: usize, n: usize| {
        for a in argv.iter_mut().skip(from).take(n) {
            *a = hidden.clone();
        }
    };
    match spec.name {
        "auth" => hide(1, usize::MAX),
        "acl|setuser" => hide(2, usize::MAX),
        "hello" => {
            if let Some(at) = args
                .iter()
                .skip(2)
                .position(|a| crate::commands::is(a, "AUTH"))
            {
                hide(at + 3, 2);
            }
        }
        "config|set" => {
            const SENSITIVE: &[&str] = &[
                "requirepass",
                "masterauth",
                "masteruser",
                "tls-key-file-pass",
                "tls-client-key-file-pass",
            ];
            let mut i = 2;
            while i + 1 < args.len() {
                if SENSITIVE.iter().any(|n| crate::commands::is(&args[i], n)) {
                    hide(i + 1, 1);
                }
                i += 2;
            }
        }
        "migrate" => {
            for (i, a) in args.iter().enumerate().skip(6) {
                if crate::commands::is(a, "AUTH") {
                    hide(i + 1, 1);
                } else if crate::commands::is(a, "AUTH2") {
                    hide(i + 1, 2);
                }
            }
        }
        _ => {}
    }
    argv
}

/// A request refused before it ran (`spec`, when the command is known): counted as a
/// rejected call and an error reply.
#[cold]
pub fn rejected(spec: Option<&'static CommandSpec>, reply: &Reply) {
    if let Reply::Error(e) = reply {
        cmdstats::rejected(spec.map(crate::commands::stat_index), e);
    }
}

/// For the scripting engine: `redis.call`/`redis.pcall` refused `spec` with `error` (the
/// text the script's caller would see, code first) before running it.
pub fn rejected_in_script(spec: &'static CommandSpec, error: &str) {
    cmdstats::rejected_in_script(crate::commands::stat_index(spec), error);
}

// ---- INFO sections ----

/// `cmdstat_<name>:calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..`
/// for every command that was called or refused.
pub fn info_commandstats(out: &mut String) {
    let rows = table().stat_rows();
    for (spec, t) in rows.iter().zip(cmdstats::totals()) {
        if t.calls == 0 && t.rejected == 0 && t.failed == 0 {
            continue;
        }
        let per_call = if t.calls == 0 {
            0.0
        } else {
            t.usec as f32 / t.calls as f32
        };
        let _ = write!(
            out,
            "cmdstat_{}:calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}\r\n",
            spec.name, t.calls, t.usec, per_call, t.rejected, t.failed
        );
    }
}

pub fn info_errorstats(out: &mut String) {
    for (code, n) in cmdstats::error_counts() {
        let _ = write!(out, "errorstat_{}:count={n}\r\n", safe_info(&code));
    }
}

/// Redis's `getSafeInfoString`: `:`, `\r`, `\n` would break the INFO format.
fn safe_info(s: &str) -> String {
    s.replace([':', '\r', '\n'], "_")
}

/// `latency_percentiles_usec_<name>:p50=..,p99=..,p99.9=..` for every command with
/// samples; nothing while `latency-tracking` is off.
pub fn info_latencystats(out: &mut String, percentiles: &str) {
    if !cmdstats::latency_tracking() {
        return;
    }
    let ps: Vec<f64> = percentiles
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    let rows = table().stat_rows();
    for (spec, h) in rows.iter().zip(cmdstats::histograms()) {
        let Some(h) = h else { continue };
        let _ = write!(out, "latency_percentiles_usec_{}:", spec.name);
        for (i, p) in ps.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let v = h.value_at_percentile(*p) as f64 / 1000.0;
            let _ = write!(out, "p{}={v:.3}", crate::config::percentile_name(*p));
        }
        out.push_str("\r\n");
    }
}

// ---- LATENCY ----

fn container(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Err(CommandError::WrongArity)
}

/// LATENCY HISTOGRAM [command ...]: per command, its calls and the cumulative count of
/// calls at each power-of-two bound in microseconds. A container's name stands for its
/// subcommands; unknown names are skipped.
fn latency_histogram(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let rows = table().stat_rows();
    let hists = cmdstats::histograms();
    let wanted: Vec<String> = args.rest().iter().map(|a| text(a).to_lowercase()).collect();
    let mut out = Vec::new();
    for (spec, h) in rows.iter().zip(hists.iter()) {
        let Some(h) = h else { continue };
        if !wanted.is_empty() {
            let container = spec.name.split('|').next().unwrap_or(spec.name);
            let hit = wanted
                .iter()
                .any(|w| w == spec.name || (spec.name.contains('|') && w == container));
            if !hit {
                continue;
            }
        }
        let cdf = h
            .cdf_usec()
            .into_iter()
            .map(|(us, n)| (Reply::Int(us as i64), Reply::Int(n as i64)))
            .collect();
        out.push((
            Reply::bulk_str(spec.name),
            Reply::Map(vec![
                (Reply::bulk_str("calls"), Reply::Int(h.total as i64)),
                (Reply::bulk_str("histogram_usec"), Reply::Map(cdf)),
            ]),
        ));
    }
    Ok(Reply::Map(out))
}

fn latency_latest(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(cmdstats::with_events(|events| {
        Reply::Array(
            events
                .iter()
                .filter_map(|(name, s)| {
                    let (time, ms) = *s.samples.back()?;
                    Some(Reply::Array(vec![
                        Reply::bulk(Bytes::from(name.clone())),
                        Reply::Int(time as i64),
                        Reply::Int(ms as i64),
                        Reply::Int(s.max as i64),
                    ]))
                })
                .collect(),
        )
    }))
}

fn latency_history(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let name = text(args.next_arg()?);
    Ok(cmdstats::with_events(|events| {
        Reply::Array(
            events
                .get(&name)
                .map(|s| {
                    s.samples
                        .iter()
                        .map(|(t, ms)| {
                            Reply::Array(vec![Reply::Int(*t as i64), Reply::Int(*ms as i64)])
                        })
                        .collect()
                })
                .unwrap_or_default(),
        )
    }))
}

fn latency_reset(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let names: Vec<String> = args.rest().iter().map(|a| text(a)).collect();
    Ok(Reply::Int(cmdstats::reset_events(&names) as i64))
}

/// A short report in the spirit of Redis's: each event's worst and average latency.
fn latency_doctor(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    let threshold = ctx
        .server
        .config
        .read()
        .get_u64("latency-monitor-threshold");
    let report = cmdstats::with_events(|events| {
        if events.is_empty() {
            return "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n".to_string();
        }
        let mut r = String::from(
            "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n",
        );
        for (i, (name, s)) in events.iter().enumerate() {
            let n = s.samples.len().max(1) as u64;
            let avg = s.samples.iter().map(|x| x.1).sum::<u64>() / n;
            let _ = writeln!(
                r,
                "{}. {name}: {} latency spikes (average {avg}ms, mean deviation 0ms, period 0 sec). Worst all time event {}ms.",
                i + 1,
                s.samples.len(),
                s.max
            );
        }
        let _ = writeln!(
            r,
            "\nI have a few advices for you:\n\n- Check your latency-monitor-threshold ({threshold} ms) and the commands shown in INFO commandstats and LATENCY HISTOGRAM."
        );
        r
    });
    Ok(Reply::Verbatim(Bytes::from(report)))
}

/// An ASCII chart of an event's samples, newest to the right, as LATENCY GRAPH.
fn latency_graph(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let name = text(args.next_arg()?);
    let graph = cmdstats::with_events(|events| {
        let s = events.get(&name)?;
        let max = s.samples.iter().map(|x| x.1).max().unwrap_or(0).max(1);
        let min = s.samples.iter().map(|x| x.1).min().unwrap_or(0);
        let mut g = format!(
            "{name} - high {max} ms, low {min} ms (all time high {} ms)\n",
            s.max
        );
        g.push_str(&"-".repeat(80));
        g.push('\n');
        const ROWS: u64 = 4;
        for row in (1..=ROWS).rev() {
            let line: String = s
                .samples
                .iter()
                .map(|(_, ms)| if ms * ROWS >= max * row { '#' } else { ' ' })
                .collect();
            g.push_str(line.trim_end());
            g.push('\n');
        }
        Some(g)
    });
    match graph {
        Some(g) => Ok(Reply::Verbatim(Bytes::from(g))),
        None => Err(CommandError::msg(format!(
            "ERR No samples available for event '{name}'"
        ))),
    }
}

fn latency_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(help_reply(
        "latency",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    ))
}

// ---- SLOWLOG ----

/// SLOWLOG GET [count]: the newest `count` entries (10 by default, -1 for all).
pub fn slowlog_get(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    const RANGE: &str = "ERR count should be greater than or equal to -1";
    let count = match args.next_opt() {
        None => 10,
        Some(a) => {
            let n = crate::util::num::parse_i64(a)
                .filter(|n| *n >= -1)
                .ok_or_else(|| CommandError::msg(RANGE))?;
            if n == -1 {
                usize::MAX
            } else {
                n as usize
            }
        }
    };
    if !args.is_empty() {
        // Redis names the subcommand as it was typed.
        let sub = text(args.all().get(1).map_or(&b"get"[..], |b| &b[..]));
        return Err(CommandError::msg(format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try SLOWLOG HELP."
        )));
    }
    // A Unix-socket client's entry says `<path>:0`, as CLIENT LIST does.
    let unix_addr = crate::state::client::UNIX_LADDR.to_string();
    let unix_path = format!("{}:0", ctx.server.config.read().get("unixsocket"));
    Ok(slowlog::with_entries(count, |entries| {
        Reply::Array(
            entries
                .map(|e| {
                    let addr = if e.addr == unix_addr {
                        unix_path.as_str()
                    } else {
                        e.addr.as_str()
                    };
                    Reply::Array(vec![
                        Reply::Int(e.id as i64),
                        Reply::Int(e.time),
                        Reply::Int(e.micros as i64),
                        Reply::Array(e.argv.iter().cloned().map(Reply::Bulk).collect()),
                        Reply::bulk_str(addr),
                        Reply::bulk_str(&e.name),
                    ])
                })
                .collect(),
        )
    }))
}

pub fn slowlog_len(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Int(slowlog::len() as i64))
}

pub fn slowlog_reset(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    slowlog::reset();
    Ok(Reply::ok())
}

pub fn slowlog_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(help_reply(
        "slowlog",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    ))
}
