//! `DOC.DUMP DOC.RESTORE DOC.RESTORE-ASKING`: a collection serialized whole, and created
//! whole from that serialization. MIGRATE moves a collection named in its keys with them
//! (`DOC.RESTORE-ASKING` in cluster mode, on the slot the target imports, as it sends
//! `RESTORE-ASKING` for a key), so `redis-cli --cluster reshard` moves collections too.
//!
//! **The payload is the journal's records of the collection**, as a rewrite's base and a
//! full resynchronisation already write it (`CollDef::encode`): `DOC.CREATE` with its capped
//! bounds and change stream, a `DOC.CREATEINDEX` per index (`EXPIREAFTER` for a TTL index),
//! a `DOC.JOURNALPUT` per document (raw BSON, `_id` and dates as stored, so TTL indexes go on
//! expiring from the same dates), then a footer as DUMP's: a magic, a version and a CRC64 of
//! everything before it. The target reads each record with the parser of the command it
//! names, so a collection has one serialization, kept in step with every collection option
//! in one place, rather than a second format to maintain beside it.
//!
//! **One command, one step on the target**, rather than the records sent as commands one by
//! one: the target builds the collection aside and puts it in place in one critical section
//! (`Store::build_collection`, `install_collection`), so a transfer cut short leaves nothing
//! that would make a retry answer BUSYKEY, no client sees a collection half built, the
//! BUSYKEY check and REPLACE are one step with the install, and the documents are not
//! reported as inserts (no change stream entries, no journal record each: the command is
//! journaled as itself). The price: the whole collection travels as one bulk string, within
//! `proto-max-bulk-len` (512 MB by default, the bound a RESTORE of one big key has too), and
//! is held once in memory on each side while it moves.
use super::indexes::parse_createindex;
use super::lifecycle::parse_create;
use super::parse::{coll_name, fail};
use crate::commands::args::{Args, CommandError};
use crate::commands::spec::CmdResult;
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::store::collections::{Definition, Image, BUSY};
use crate::store::journal::aof;
use bson::Document;
use bytes::{Bytes, BytesMut};

/// The footer's magic, before its version and CRC64.
const MAGIC: &[u8; 8] = b"TIDECOLL";
/// The payload format's version: a target refuses one it does not know.
const VERSION: u16 = 1;
/// Magic, version (u16 LE), CRC64 (u64 LE) of everything before the CRC.
const FOOTER: usize = 8 + 2 + 8;

/// Redis's RESTORE texts, which a Redis user knows.
const BAD_FOOTER: &str = "ERR DUMP payload version or checksum are wrong";
const BAD_DATA: &str = "ERR Bad data format";

/// A collection read for a move, serialized (see the module's doc).
pub fn payload(image: &Image) -> Vec<u8> {
    let name = image.def.name.as_bytes();
    let docs: usize = image.docs.iter().map(|d| d.len() + name.len() + 48).sum();
    let mut out = Vec::with_capacity(docs + 256);
    image.def.encode(&mut out);
    for d in &image.docs {
        aof::encode(&mut out, &[b"DOC.JOURNALPUT", name, d]);
    }
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let crc = crate::store::rdb::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// `DOC.DUMP coll`: the collection serialized, or nil when there is none.
pub fn doc_dump(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let coll = coll_name(args)?;
    args.finish()?;
    let image = ctx.server.store.collection_image(ctx.client.db, &coll);
    Ok(image.map_or(Reply::Nil, |i| Reply::bulk(payload(&i))))
}

/// What a payload describes.
struct Decoded {
    def: Definition,
    docs: Vec<Document>,
}

/// The records of a payload whose footer checks out.
fn records(payload: &[u8]) -> Result<&[u8], CommandError> {
    let Some(body_len) = payload.len().checked_sub(FOOTER) else {
        return Err(CommandError::msg(BAD_FOOTER));
    };
    let (body, footer) = payload.split_at(body_len);
    let crc_at = FOOTER - 8;
    let version = u16::from_le_bytes([footer[8], footer[9]]);
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&footer[crc_at..]);
    if &footer[..8] != MAGIC
        || version != VERSION
        || crate::store::rdb::crc64(0, &payload[..body_len + crc_at]) != u64::from_le_bytes(crc)
    {
        return Err(CommandError::msg(BAD_FOOTER));
    }
    Ok(body)
}

/// A payload's error, with what was wrong after Redis's text.
fn bad(detail: impl std::fmt::Display) -> CommandError {
    CommandError::msg(format!("{BAD_DATA}: {detail}"))
}

/// Reads a payload's records: one `DOC.CREATE` first, then `DOC.CREATEINDEX` and
/// `DOC.JOURNALPUT` records, each parsed as its command parses it.
fn decode(payload: &[u8]) -> Result<Decoded, CommandError> {
    let mut buf = BytesMut::from(records(payload)?);
    let mut state = crate::protocol::ParseState::default();
    let limits = crate::protocol::ParseLimits {
        max_bulk_len: u64::MAX,
        unauthenticated: false,
    };
    let mut def: Option<Definition> = None;
    let mut docs = Vec::new();
    loop {
        let rec: Vec<Bytes> = match crate::protocol::parse_request(&mut buf, &mut state, limits) {
            Ok(Some(r)) => r,
            Ok(None) if buf.is_empty() => break,
            Ok(None) => return Err(bad("a record is cut short")),
            Err(e) => return Err(bad(e.0)),
        };
        let Some(name) = rec.first() else { continue };
        let reason = |e: CommandError| match e.into_reply(&String::from_utf8_lossy(name)) {
            Reply::Error(t) => bad(t),
            _ => bad("a record does not parse"),
        };
        match (&mut def, name.to_ascii_uppercase().as_slice()) {
            (None, b"DOC.CREATE") if rec.len() >= 2 => {
                let (capped, changes) = parse_create(&mut Args::new(&rec, 2)).map_err(reason)?;
                def = Some(Definition {
                    capped,
                    changes,
                    indexes: Vec::new(),
                });
            }
            (Some(d), b"DOC.CREATEINDEX") if rec.len() >= 3 => {
                d.indexes
                    .push(parse_createindex(&mut Args::new(&rec, 2)).map_err(reason)?);
            }
            (Some(_), b"DOC.JOURNALPUT") if rec.len() == 3 => {
                docs.push(Document::from_reader(&rec[2][..]).map_err(bad)?);
            }
            _ => {
                return Err(bad(format!(
                    "unexpected record {}",
                    String::from_utf8_lossy(name)
                )))
            }
        }
    }
    match def {
        Some(def) => Ok(Decoded { def, docs }),
        None => Err(bad("no DOC.CREATE record")),
    }
}

/// `DOC.RESTORE coll payload [REPLACE]` and `DOC.RESTORE-ASKING` (the same, on a slot this
/// cluster node imports): the collection of a `DOC.DUMP` payload (what MIGRATE sends),
/// built aside and put in place in one step. Checked in RESTORE's order: options,
/// BUSYKEY, the payload's footer, its contents.
pub fn doc_restore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let coll = coll_name(args)?;
    let payload = args.next_arg()?.clone();
    let mut replace = false;
    while !args.is_empty() {
        if args.eat("REPLACE") {
            replace = true;
        } else {
            return Err(CommandError::syntax());
        }
    }
    let db = ctx.client.db;
    let store = &ctx.server.store;
    // Before the build, which may be long; the install checks again.
    if !replace && store.has_collection(db, &coll) {
        return Err(CommandError::msg(BUSY));
    }
    let Decoded { def, docs } = decode(&payload)?;
    let max = crate::documents::codec::max_size();
    let built = store
        .build_collection(db, &coll, def, docs, max)
        .map_err(fail)?;
    store
        .install_collection(db, &coll, built, replace)
        .map_err(fail)?;
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_payload_is_refused_before_it_is_read() {
        let store = crate::store::Store::new(2, 1);
        let built = store
            .build_collection(
                0,
                "c",
                Definition {
                    capped: None,
                    changes: None,
                    indexes: Vec::new(),
                },
                vec![bson::doc! {"_id": 1}],
                1 << 20,
            )
            .expect("build");
        store
            .install_collection(0, "c", built, false)
            .expect("install");
        let image = store.collection_image(0, "c").expect("image");
        let good = payload(&image);
        let d = decode(&good).expect("decodes");
        assert_eq!(d.docs.len(), 1);
        assert!(d.def.capped.is_none() && d.def.indexes.is_empty());
        let mut flipped = good.clone();
        flipped[3] ^= 1;
        assert!(matches!(decode(&flipped), Err(CommandError::Msg(m)) if m == BAD_FOOTER));
        assert!(matches!(decode(&good[..10]), Err(CommandError::Msg(m)) if m == BAD_FOOTER));
        assert!(matches!(decode(b""), Err(CommandError::Msg(m)) if m == BAD_FOOTER));
    }
}
