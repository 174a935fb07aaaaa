//! DEBUG: what tests need to reach inside the server, refused unless `enable-debug-command`
//! allows it (Redis 7's rule and text). Besides Redis's `SLEEP` and `SET-ACTIVE-EXPIRE`,
//! tidecache's own `ADVANCE-CLOCK <ms>` moves wall time forward (`util::clock`), so expiry
//! tests make deadlines pass instead of sleeping past them.

use crate::commands::args::{Args, CommandError, Token};
use crate::commands::spec::{family, flag::*, CmdResult, CommandSpec};
use crate::commands::{help_reply, text, Ctx};
use crate::protocol::Reply;

const DEBUG: CommandSpec = family("server", 0);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    DEBUG.cmd("debug", -2, debug).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("1.0.0", "A container for debugging commands").complexity("Depends on subcommand."),
];

fn allowed(ctx: &Ctx<'_>) -> bool {
    match ctx.server.config.read().get("enable-debug-command") {
        "yes" => true,
        "local" => ctx.client.handle.addr.ip().is_loopback(),
        _ => false,
    }
}

fn debug(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if !allowed(ctx) {
        return Err(CommandError::msg(
            "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
        ));
    }
    let sub = args.next_arg()?;
    match (&*Token::of(sub), args.len()) {
        (b"HELP", 0) => Ok(help_reply(
            "debug",
            &[
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Setting it to 0 disables expiring keys in the background when they are not accessed (otherwise the Redis behavior). Setting it to 1 reenables back the default.",
                "ADVANCE-CLOCK <milliseconds>",
                "    Move the server's wall clock forward (deadlines, TTL dates, $$NOW, TIME).",
            ],
        )),
        // Redis reads these numbers with atof/atoi: text that is not a number means 0.
        (b"SLEEP", 1) => {
            let secs = text(args.next_arg()?).trim().parse::<f64>().unwrap_or(0.0);
            if secs.is_finite() && secs > 0.0 {
                std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
            }
            Ok(Reply::ok())
        }
        (b"SET-ACTIVE-EXPIRE", 1) => {
            let on = text(args.next_arg()?).trim().parse::<i64>().unwrap_or(0) != 0;
            crate::store::expiry::set_active(on);
            Ok(Reply::ok())
        }
        (b"ADVANCE-CLOCK", 1) => {
            let ms = args.next_i64()?;
            if ms < 0 {
                return Err(CommandError::msg("ERR the clock only moves forward"));
            }
            crate::util::clock::advance(ms);
            Ok(Reply::ok())
        }
        _ => Err(CommandError::msg(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            text(sub)
        ))),
    }
}
