//! What blocking commands share: their timeout argument, and how a command that found its
//! keys empty blocks its client (see `state::blocking` for the registry and the serving).
use crate::commands::args::{CommandError, CommandResult};
use crate::commands::spec::{flag::WRITE, CmdResult};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::blocking::{Attempt, WaitOn};
use bytes::Bytes;
use std::time::{Duration, Instant};

/// A blocking timeout in seconds (fractions allowed, 0 = forever), as Redis's
/// `getTimeoutFromObjectOrReply`: `None` for no deadline.
pub fn parse_timeout(b: &[u8]) -> CommandResult<Option<Instant>> {
    let secs = crate::util::num::parse_f64(b)
        .filter(|s| s.is_finite())
        .ok_or_else(|| CommandError::msg("ERR timeout is not a float or out of range"))?;
    // Rounded up as Redis's `ceill`: a tiny positive timeout (0.0001, 1e-320) is a 1 ms
    // wait, not 0 (which means "block for ever" and left such a client stuck).
    let ms = (secs * 1000.0).ceil();
    if ms < 0.0 {
        return Err(CommandError::msg("ERR timeout is negative"));
    }
    if ms == 0.0 {
        return Ok(None);
    }
    // Far beyond any real wait (about 3 years), still a deadline rather than "forever".
    if ms >= 1e14 {
        return Err(CommandError::msg("ERR timeout is out of range"));
    }
    Ok(Some(Instant::now() + Duration::from_millis(ms as u64)))
}

/// Blocks the client on `keys` until `attempt` succeeds for one of them, the deadline
/// passes (`timeout_reply`) or CLIENT UNBLOCK. Inside MULTI (or a script) a command does not
/// block: it answers as if it had timed out, as Redis does.
pub fn block_on(
    ctx: &mut Ctx<'_>,
    keys: Vec<Bytes>,
    attempt: Attempt,
    timeout_reply: Reply,
    deadline: Option<Instant>,
) -> CmdResult {
    if ctx.client.in_exec {
        return Ok(timeout_reply);
    }
    // Only a read-only command of a READONLY client may stay blocked on a replica.
    let replica_read = ctx.client.cluster_readonly
        && crate::commands::find_command(ctx.client.last_cmd.as_bytes())
            .is_some_and(|s| !s.has(WRITE));
    let blocked = ctx.server.blocking.block(
        ctx.client.id(),
        WaitOn {
            db: ctx.client.db,
            keys,
            replica_read,
        },
        attempt,
        timeout_reply,
        deadline,
    );
    ctx.client.blocked = Some(blocked);
    Ok(Reply::NoReply)
}
