//! What every document command parses alike: the collection and the `BSON` flag, documents
//! and filters in Extended JSON (or raw BSON), and documents written back as replies.

use crate::commands::args::{Args, CommandError, CommandResult};
use crate::commands::Ctx;
use crate::documents::{codec, json, query};
use crate::protocol::Reply;
use crate::store::collections::check_name;
use bson::{DateTime, Document, RawDocument, RawDocumentBuf};

/// The `J` write concern promises the write is on disk; until the journal exists it is
/// refused rather than accepted and ignored.
pub const NO_JOURNAL: &str = "ERR J (journaled write concern) needs the journal (appendonly yes): with it off no write can be acknowledged as on disk";

/// The collection a command works on, how its documents are encoded, and the time `$$NOW`
/// stands for in this command.
pub struct Target<'a> {
    /// Borrowed from the argument when it is valid UTF-8 (always, in practice): an owned
    /// copy was an allocation of every document command.
    pub coll: std::borrow::Cow<'a, str>,
    pub bson: bool,
    pub now: DateTime,
}

/// A store error as the command's error reply.
pub fn fail(e: String) -> CommandError {
    CommandError::msg(e)
}

/// Reads the collection name (checked as MongoDB does) and the optional `BSON` flag, which
/// counts as the flag only when something follows it.
pub fn target<'a>(args: &mut Args<'a>) -> CommandResult<Target<'a>> {
    let raw = args.next_arg()?;
    let coll = if raw.is_ascii() {
        // SAFETY: ASCII is valid UTF-8 (the usual name, read without `from_utf8`'s fixed
        // cost in every document command).
        std::borrow::Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(raw) })
    } else {
        String::from_utf8_lossy(raw)
    };
    check_name(&coll).map_err(fail)?;
    let bson = args.len() >= 2 && args.eat("BSON");
    Ok(Target {
        coll,
        bson,
        now: DateTime::from_millis(crate::util::clock::now_ms()),
    })
}

/// A collection name argument, checked as every DOC command checks it.
pub fn coll_name(args: &mut Args<'_>) -> CommandResult<String> {
    let name = args.next_text()?;
    check_name(&name).map_err(fail)?;
    Ok(name)
}

/// A document argument, with `$$NOW` resolved.
pub fn parse_doc(arg: &[u8], t: &Target) -> CommandResult<Document> {
    let mut d = codec::parse(arg, t.bson).map_err(|e| fail(with_code(e)))?;
    codec::replace_now(&mut d, t.now);
    Ok(d)
}

/// A filter argument, parsed once for the whole command (`{"<field>": v}` straight from
/// its text).
pub fn parse_filter(arg: &[u8], t: &Target) -> CommandResult<query::Node> {
    if !t.bson {
        if let Some(node) = query::parse_eq_json(arg) {
            return Ok(node);
        }
    }
    query::parse(&parse_doc(arg, t)?).map_err(|e| fail(with_code(e)))
}

pub use crate::store::collections::with_code;

/// `max-document-size` (mirrored in `codec`, kept current by the server's configuration).
pub fn max_doc_size(_ctx: &Ctx<'_>) -> usize {
    codec::max_size()
}

/// A document as a reply: relaxed Extended JSON, or raw BSON with the `BSON` flag. The
/// stored bytes, when the caller kept them, are the document: no decode needed.
pub fn doc_reply(doc: Document, raw: Option<RawDocumentBuf>, bson: bool) -> Reply {
    if let Some(r) = raw.as_deref().and_then(|r| stored_reply(r, bson)) {
        return r;
    }
    if bson {
        match RawDocumentBuf::try_from(&doc) {
            Ok(r) => Reply::bulk(r.into_bytes()),
            Err(e) => Reply::error(format!("ERR cannot encode document: {e}")),
        }
    } else {
        Reply::bulk(codec::doc_json_owned(doc))
    }
}

/// A stored document as a reply, written from its bytes (`None` if they cannot be written
/// as JSON directly; the caller decodes then).
pub fn stored_reply(raw: &RawDocument, bson: bool) -> Option<Reply> {
    if bson {
        Some(Reply::bulk(bytes::Bytes::copy_from_slice(raw.as_bytes())))
    } else {
        json::raw_doc_json(raw).map(Reply::bulk)
    }
}

/// A non-negative `SKIP`, or a `LIMIT` (MongoDB: 0 means none, a negative one its
/// absolute value).
pub fn skip_value(args: &mut Args<'_>) -> CommandResult<usize> {
    match args.next_i64()? {
        n if n >= 0 => Ok(n as usize),
        _ => Err(CommandError::msg("ERR SKIP must be non-negative")),
    }
}

pub fn limit_value(args: &mut Args<'_>) -> CommandResult<Option<usize>> {
    Ok(match args.next_i64()? {
        0 => None,
        n => Some(n.unsigned_abs().min(usize::MAX as u64) as usize),
    })
}
