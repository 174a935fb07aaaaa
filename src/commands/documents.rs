//! Document family: `DOC.*` commands over BSON collections (SPEC §5). The collection name sits
//! in the key position so cluster-aware clients and `COMMAND GETKEYS` find it.

use crate::commands::spec::{acl, family, flag::*, CommandSpec};
use crate::commands::{doc_query, is, syntax_error, text, wrong_arity, Ctx};
use crate::documents::capped::{self, CappedSpec};
use crate::documents::catalog::Totals;
use crate::documents::collection::{CollectionMeta, CollectionShard};
use crate::documents::index::ScanStats;
use crate::documents::projection::Projection;
use crate::documents::query::{self, Node};
use crate::documents::sort::Sort;
use crate::documents::update::{self, Update};
use crate::documents::{codec, json, keys};
use crate::protocol::Reply;
use crate::server::ttl;
use crate::store::ttl_monitor::Expired;
use crate::store::Store;
use crate::util::num::{parse_i64, NOT_AN_INTEGER};
use bson::{oid::ObjectId, Bson, DateTime, Document, RawDocumentBuf};
use bytes::Bytes;

const DOC: CommandSpec = family("document", acl::DOCUMENT);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    DOC.cmd("doc.insert", -3, legacy!(doc_insert)).flags(WRITE | DENYOOM).key()
        .doc("1.0.0", "Inserts one or more documents (Extended JSON, or raw BSON with BSON) and returns their _ids; all or nothing.")
        .complexity("O(N) where N is the number of documents inserted, times the number of indexes")
        .args("collection:key [BSON] document... [J]"),
    DOC.cmd("doc.find", -3, legacy!(doc_find)).flags(WRITE).key().acl(acl::READ)
        .doc("1.0.0", "Returns the documents matching a MongoDB query filter; TOUCH refreshes their TTL-indexed dates in the same step.")
        .complexity("O(log N + M) with an index, O(N) for a collection scan, where M is the number of documents returned")
        .args("collection:key [BSON] filter [PROJECTION=projection] [SORT=sort] [SKIP=skip:integer] [LIMIT=limit:integer] [TOUCH]"),
    DOC.cmd("doc.findone", -3, legacy!(doc_findone)).flags(WRITE).key().acl(acl::READ)
        .doc("1.0.0", "Returns the first document matching a filter, or null; TOUCH refreshes its TTL-indexed dates.")
        .complexity("O(log N) with an index or by _id, O(N) for a collection scan")
        .args("collection:key [BSON] filter [PROJECTION=projection] [SORT=sort] [TOUCH]"),
    DOC.cmd("doc.count", -3, legacy!(doc_count)).flags(READONLY).key()
        .doc("1.0.0", "Counts the documents matching a filter.")
        .complexity("O(log N + M) with an index, O(N) for a collection scan")
        .args("collection:key [BSON] filter"),
    DOC.cmd("doc.touch", -3, legacy!(doc_touch)).flags(WRITE).key()
        .doc("1.0.0", "Sets the date of every TTL index of the collection (or just FIELD) to now on every matching document; returns how many were touched.")
        .complexity("O(M) where M is the number of matching documents, plus the cost of finding them")
        .args("collection:key [BSON] filter [FIELD=field] [J]"),
    DOC.cmd("doc.update", -4, legacy!(doc_update)).flags(WRITE | DENYOOM).key()
        .doc("1.0.0", "Updates the first (or with MULTI every) matching document with update operators or a replacement; UPSERT inserts when nothing matches. Replies [matched, modified, upserted _id or null].")
        .complexity("O(M) where M is the number of documents updated, plus the cost of finding them")
        .args("collection:key [BSON] filter update [MULTI] [UPSERT] [J]"),
    DOC.cmd("doc.delete", -3, legacy!(doc_delete)).flags(WRITE).key()
        .doc("1.0.0", "Deletes the matching documents (with LIMIT 1, only the first) and returns how many were deleted.")
        .complexity("O(M) where M is the number of documents deleted, plus the cost of finding them")
        .args("collection:key [BSON] filter [LIMIT=limit:integer] [J]"),
    DOC.cmd("doc.expireindex", 4, legacy!(doc_expireindex)).flags(WRITE).key()
        .doc("1.0.0", "Creates a TTL index on a date field, or changes the expireAfterSeconds of the existing one (MongoDB's collMod); returns the index name.")
        .complexity("O(N) to build a new index, O(1) to change expireAfterSeconds")
        .args("collection:key field seconds:integer"),
    DOC.cmd("doc.createindex", -3, legacy!(doc_query::doc_createindex)).flags(WRITE | DENYOOM).key()
        .doc("1.0.0", "Creates a secondary index (single-field or compound, ascending or descending, optionally unique or TTL); returns its name.")
        .complexity("O(N log N) where N is the number of documents in the collection")
        .args("collection:key keys [UNIQUE] [NAME=name] [EXPIREAFTER=seconds:integer]"),
    DOC.cmd("doc.dropindex", 3, legacy!(doc_query::doc_dropindex)).flags(WRITE).key()
        .doc("1.0.0", "Drops an index by name; dropping a TTL index stops expiry through it.")
        .complexity("O(N) where N is the number of entries in the index")
        .args("collection:key name"),
    DOC.cmd("doc.indexes", 2, legacy!(doc_query::doc_indexes)).flags(READONLY).key()
        .doc("1.0.0", "Lists the indexes of a collection as JSON specs (name, key, unique, expireAfterSeconds).")
        .complexity("O(I) where I is the number of indexes").args("collection:key"),
    DOC.cmd("doc.explain", -3, legacy!(doc_query::doc_explain)).flags(READONLY).key()
        .doc("1.0.0", "Runs a query and returns its plan as JSON: plan, index, keysExamined, docsExamined, nReturned, executionTimeMicros, shards.")
        .complexity("The cost of the query it explains")
        .args("collection:key [BSON] filter [SORT=sort] [SKIP=skip:integer] [LIMIT=limit:integer]"),
    DOC.cmd("doc.aggregate", -3, legacy!(doc_query::doc_aggregate)).flags(READONLY).key()
        .doc("1.0.0", "Runs an aggregation pipeline ($match $project $addFields $set $unset $group $sort $skip $limit $count $unwind) and returns the resulting documents.")
        .complexity("O(N) in the documents entering the pipeline")
        .args("collection:key [BSON] pipeline"),
    DOC.cmd("doc.create", -2, legacy!(doc_create)).flags(WRITE | DENYOOM).key()
        .doc("1.0.0", "Creates a collection explicitly, optionally capped by SIZE bytes and MAX documents; errors if it exists.")
        .args("collection:key [capped:{CAPPED SIZE=bytes:integer [MAX=docs:integer]}]"),
    DOC.cmd("doc.drop", 2, legacy!(doc_drop)).flags(WRITE).key()
        .doc("1.0.0", "Drops a collection with its documents and indexes; returns 1 if it existed, else 0.")
        .complexity("O(N) where N is the number of documents").args("collection:key"),
    DOC.cmd("doc.rename", -3, legacy!(doc_rename)).flags(WRITE).keys(1, 2, 1)
        .doc("1.0.0", "Renames a collection atomically, keeping its indexes, TTL indexes and capped state; errors if the target exists unless DROPTARGET.")
        .args("source:key destination:key [DROPTARGET]"),
    DOC.cmd("doc.collections", 1, legacy!(doc_collections)).flags(READONLY)
        .doc("1.0.0", "Lists the collections of the selected database.")
        .complexity("O(C) where C is the number of collections"),
    DOC.cmd("doc.stats", 2, legacy!(doc_stats)).flags(READONLY).key()
        .doc("1.0.0", "Returns collection statistics as JSON: count, size, avgObjSize, capped, max, indexes with sizes, ttl counters.")
        .complexity("O(S) where S is the number of shards").args("collection:key"),
];

// ---------------------------------------------------------------------------------------
// Handlers. Parsing lives here and stays thin; the semantics live in `crate::documents`.

/// The shards a filter can match in: the `_id`'s one for an `_id` equality, else every one.
pub(crate) fn shards_for(store: &Store, filter: &Node) -> Vec<usize> {
    match filter.id_equality() {
        Some(id) => vec![store.shard_of(&keys::encode(id))],
        None => (0..store.shard_count()).collect(),
    }
}

/// The `J` write concern promises the write is on disk; until the journal exists it is
/// refused rather than accepted and ignored.
pub(crate) const NO_JOURNAL: &str = "ERR J (journaled write concern) is not available: this version of tidecache has no journal, so no write can be acknowledged as on disk";

/// Options shared by the commands: the collection, the BSON flag and the current time.
pub(crate) struct Common<'a> {
    pub(crate) coll: String,
    pub(crate) bson: bool,
    /// The arguments after the collection and the optional `BSON` flag.
    pub(crate) rest: &'a [Bytes],
    pub(crate) now: DateTime,
}

pub(crate) fn common(args: &[Bytes]) -> Result<Common<'_>, Reply> {
    let coll = text(&args[1]);
    // MongoDB's collection name rules: not empty, no `$`, no NUL.
    if coll.is_empty() || coll.contains(['$', '\0']) {
        return Err(Reply::error(format!(
            "ERR Invalid collection name: '{coll}'"
        )));
    }
    let bson = args.len() > 3 && is(&args[2], "BSON");
    Ok(Common {
        coll,
        bson,
        rest: &args[if bson { 3 } else { 2 }..],
        now: DateTime::now(),
    })
}

pub(crate) fn parse_doc(arg: &[u8], c: &Common<'_>) -> Result<Document, Reply> {
    let mut d = codec::parse(arg, c.bson).map_err(err)?;
    codec::replace_now(&mut d, c.now);
    Ok(d)
}

/// Codec errors come without a prefix; everything from `crate::documents` else has one.
pub(crate) fn err(e: String) -> Reply {
    if e.starts_with("ERR ") || e.starts_with("DUPKEY ") {
        Reply::error(e)
    } else {
        Reply::error(format!("ERR {e}"))
    }
}

pub(crate) fn parse_filter(arg: &[u8], c: &Common<'_>) -> Result<Node, Reply> {
    query::parse(&parse_doc(arg, c)?).map_err(err)
}

pub(crate) fn max_doc_size(ctx: &Ctx<'_>) -> usize {
    ctx.server.config.read().get_u64("max-document-size") as usize
}

pub(crate) fn doc_reply(doc: Document, raw: Option<RawDocumentBuf>, bson: bool) -> Reply {
    if bson {
        match raw {
            Some(r) => Reply::bulk(r.into_bytes()),
            None => match RawDocumentBuf::try_from(&doc) {
                Ok(r) => Reply::bulk(r.into_bytes()),
                Err(e) => Reply::error(format!("ERR cannot encode document: {e}")),
            },
        }
    } else {
        // The stored bytes, when the caller kept them, are the document: no decode needed.
        match raw.as_deref().and_then(json::raw_doc_json) {
            Some(text) => Reply::bulk(text),
            None => Reply::bulk(codec::doc_json_owned(doc)),
        }
    }
}

fn id_reply(id: &Bson) -> Reply {
    Reply::bulk(codec::value_json(id))
}

fn dup_key(db: usize, coll: &str, id: &Bson) -> Reply {
    Reply::error(format!(
        "DUPKEY E11000 duplicate key error collection: {db}.{coll} index: _id_ dup key: {}",
        codec::dup_key_text(id)
    ))
}

/// Gives a document its `_id` (a new ObjectId, first) when it has none.
fn ensure_id(doc: Document) -> Document {
    if doc.contains_key("_id") {
        return doc;
    }
    let mut out = Document::new();
    out.insert("_id", ObjectId::new());
    out.extend(doc);
    out
}

/// A document ready to store: validated, encoded, with its `_id`, KeyString and shard.
struct Prepared {
    id: Bson,
    key: Vec<u8>,
    shard: usize,
    raw: RawDocumentBuf,
}

fn prepare(ctx: &Ctx<'_>, doc: Document, max: usize) -> Result<Prepared, Reply> {
    let doc = ensure_id(doc);
    codec::validate_stored(&doc).map_err(err)?;
    let raw = codec::to_raw(&doc, max).map_err(err)?;
    let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
    let key = keys::encode(&id);
    let shard = ctx.server.store.shard_of(&key);
    Ok(Prepared {
        id,
        key,
        shard,
        raw,
    })
}

/// Makes sure every shard has its part of `coll` in `db`, creating the collection (under
/// all shards' locks, so the metadata is the same everywhere) on first use.
pub(crate) fn ensure_collection(ctx: &Ctx<'_>, db: usize, coll: &str) {
    let store = &ctx.server.store;
    if store.lock(0).dbs[db].collections.contains_key(coll) {
        return;
    }
    let all: Vec<usize> = (0..store.shard_count()).collect();
    let mut guards = store.lock_many(&all);
    if guards[0].1.dbs[db].collections.contains_key(coll) {
        return;
    }
    let meta = CollectionMeta::default();
    for (_, g) in guards.iter_mut() {
        let part = g.new_collection(meta.clone());
        g.dbs[db]
            .collections
            .entry(coll.to_string())
            .or_insert(part);
    }
}

fn doc_insert(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let c = match common(args) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let docs = c.rest;
    if docs.len() > 1 && is(&docs[docs.len() - 1], "J") {
        return Reply::error(NO_JOURNAL);
    }
    if docs.is_empty() {
        return wrong_arity("doc.insert");
    }
    let db = ctx.client.db;
    let max = max_doc_size(ctx);
    // Everything is parsed and validated before anything is stored.
    let mut batch = Vec::with_capacity(docs.len().min(1024));
    for d in docs {
        let doc = match parse_doc(d, &c) {
            Ok(d) => d,
            Err(e) => return e,
        };
        match prepare(ctx, doc, max) {
            Ok(p) => batch.push(p),
            Err(e) => return e,
        }
    }
    {
        let mut seen = hashbrown::HashSet::with_capacity(batch.len());
        for p in &batch {
            if !seen.insert(p.key.as_slice()) {
                return dup_key(db, &c.coll, &p.id);
            }
        }
    }
    let store = &ctx.server.store;
    let _catalog = store.catalog_read();
    // A unique secondary index makes an insert hold every shard (a key may collide with a
    // document anywhere): the catalog is read under the locks, which widen when it has one.
    // So does a capped collection (its bound and insertion order are collection-wide); the
    // catalog lock keeps the collection as it is meanwhile.
    let mut all = false;
    let mut guards = loop {
        let shards: Vec<usize> = if all {
            (0..store.shard_count()).collect()
        } else {
            batch.iter().map(|p| p.shard).collect()
        };
        let guards = store.lock_many(&shards);
        let wide = guards[0].1.dbs[db]
            .collections
            .get(&c.coll)
            .map(|cs| cs.is_capped() || doc_query::needs_all_shards(&doc_query::specs_of(cs)));
        match wide {
            None => {
                // First insert: create the collection under all shards' locks, then lock again.
                drop(guards);
                ensure_collection(ctx, db, &c.coll);
            }
            Some(true) if !all => {
                drop(guards);
                all = true;
            }
            _ => break guards,
        }
    };
    {
        let writes: Vec<(&RawDocumentBuf, Option<(usize, u32)>)> =
            batch.iter().map(|p| (&p.raw, None)).collect();
        if let Err(e) = doc_query::check_writes(&guards, db, &c.coll, &writes) {
            return e;
        }
    }
    let capped = capped_of(&guards, db, &c.coll);
    if let Some(spec) = &capped {
        for p in &batch {
            if let Err(e) = capped::check_fits(spec, p.raw.as_bytes().len()) {
                return err(e);
            }
        }
    }
    let pos = |s: usize, g: &[(usize, _)]| g.iter().position(|(i, _)| *i == s);
    let mut purged = Expired {
        db,
        collection: c.coll.clone(),
        ids: Vec::new(),
    };
    for p in &batch {
        let Some(i) = pos(p.shard, &guards) else {
            return Reply::error("ERR internal: shard not locked");
        };
        let Some(cs) = guards[i].1.dbs[db].collections.get_mut(&c.coll) else {
            continue;
        };
        // An expired document is gone for every read and write, a duplicate check included.
        purged.ids.extend(cs.expire_if_due(&p.key));
        if cs.contains_id(&p.key) {
            drop(guards);
            ttl::publish(ctx.server, &purged);
            return dup_key(db, &c.coll, &p.id);
        }
    }
    let mut ids = Vec::with_capacity(batch.len());
    for p in batch {
        let Some(i) = pos(p.shard, &guards) else {
            continue;
        };
        let cs = guards[i].1.dbs[db]
            .collections
            .entry(c.coll.clone())
            .or_default();
        cs.insert(p.key, p.raw);
        ids.push(id_reply(&p.id));
    }
    if capped.is_some() {
        enforce_capped(&mut guards, db, &c.coll);
    }
    drop(guards);
    ttl::publish(ctx.server, &purged);
    Reply::Array(ids)
}

/// The parsed options of a find.
struct FindOpts {
    filter: Node,
    projection: Option<Projection>,
    sort: Option<Sort>,
    skip: usize,
    limit: Option<usize>,
    touch: bool,
    /// `SORT {"$natural": -1}`: newest first (see `run_find`).
    reverse: bool,
}

fn parse_find(c: &Common<'_>, one: bool) -> Result<FindOpts, Reply> {
    let Some(f) = c.rest.first() else {
        return Err(wrong_arity(if one { "doc.findone" } else { "doc.find" }));
    };
    let filter = parse_filter(f, c)?;
    let mut o = FindOpts {
        filter,
        projection: None,
        sort: None,
        skip: 0,
        limit: None,
        touch: false,
        reverse: false,
    };
    let mut i = 1;
    let rest = c.rest;
    while i < rest.len() {
        let a = &rest[i];
        let has_val = i + 1 < rest.len();
        if is(a, "PROJECTION") && has_val {
            let d = parse_doc(&rest[i + 1], c)?;
            o.projection = Some(Projection::parse(&d).map_err(err)?);
            i += 2;
        } else if is(a, "SORT") && has_val {
            let d = parse_doc(&rest[i + 1], c)?;
            match capped::natural_sort(&d).map_err(err)? {
                Some(reverse) => o.reverse = reverse,
                None => o.sort = Some(Sort::parse(&d).map_err(err)?),
            }
            i += 2;
        } else if !one && is(a, "SKIP") && has_val {
            match parse_i64(&rest[i + 1]) {
                Some(n) if n >= 0 => o.skip = n as usize,
                Some(_) => return Err(Reply::error("ERR SKIP must be non-negative")),
                None => return Err(Reply::error(NOT_AN_INTEGER)),
            }
            i += 2;
        } else if !one && is(a, "LIMIT") && has_val {
            match parse_i64(&rest[i + 1]) {
                // MongoDB: limit 0 means no limit; a negative limit is its absolute value.
                Some(0) => o.limit = None,
                Some(n) => o.limit = Some(n.unsigned_abs().min(usize::MAX as u64) as usize),
                None => return Err(Reply::error(NOT_AN_INTEGER)),
            }
            i += 2;
        } else if is(a, "TOUCH") {
            o.touch = true;
            i += 1;
        } else {
            return Err(syntax_error());
        }
    }
    if one {
        o.limit = Some(1);
    }
    Ok(o)
}

/// Runs a find: each shard keeps at most `skip + limit` matches (in sort order when sorted),
/// then the shards' survivors are merged, sorted stably and cut.
fn run_find(
    ctx: &Ctx<'_>,
    db: usize,
    coll: &str,
    o: &FindOpts,
    keep_raw: bool,
) -> Vec<(Document, Option<RawDocumentBuf>)> {
    let keep = o.limit.map(|l| l.saturating_add(o.skip));
    let store = &ctx.server.store;
    let shards = shards_for(store, &o.filter);
    let mut natural = false;
    // (sort key, shard, slot order) keeps the merge stable and deterministic.
    let mut found: Vec<(Vec<Bson>, Document, Option<RawDocumentBuf>)> = Vec::new();
    for s in shards {
        let guard = store.lock(s);
        let Some(cs) = guard.dbs[db].collections.get(coll) else {
            continue;
        };
        let mut mine: Vec<(Vec<Bson>, Document, Option<RawDocumentBuf>)> = Vec::new();
        // An unsorted find of a capped collection returns insertion order: the key is the
        // document's sequence, and every shard's matches are merged by it (so no shard may
        // stop at its first `skip + limit` matches in storage order; nor for `$natural: -1`).
        natural = o.sort.is_none() && cs.is_capped();
        let scan_keep = keep.filter(|_| !natural && !o.reverse);
        // With the sort, an index that provides it lets the shard stop at `skip + limit`.
        let sort_keys = o.sort.as_ref().map(|s| s.keys()).unwrap_or_default();
        let mut stats = ScanStats::default();
        cs.scan_planned(
            &o.filter,
            sort_keys,
            scan_keep,
            &mut stats,
            &mut |slot, raw| {
                // Replied from the stored bytes as they are: nothing reads the decoded
                // document (no sort, no capped order, no touch).
                if keep_raw && o.sort.is_none() && !o.touch && !natural && !o.reverse {
                    mine.push((Vec::new(), Document::new(), Some(raw.clone())));
                    return scan_keep.is_none_or(|k| mine.len() < k);
                }
                let Ok(doc) = Document::try_from(raw.as_ref()) else {
                    return true;
                };
                let key = match &o.sort {
                    Some(s) => s.key(&doc),
                    None if natural => vec![Bson::Int64(cs.order.seq_of(slot) as i64)],
                    None => Vec::new(),
                };
                // The stored bytes are only copied when they are the reply (BSON, no projection).
                mine.push((key, doc, keep_raw.then(|| raw.clone())));
                match (&o.sort, keep) {
                    // Unsorted: the first `skip + limit` matches of the shard are enough.
                    (None, Some(k)) if !natural && !o.reverse => mine.len() < k,
                    (None, Some(k)) if natural && mine.len() >= 2 * k.max(16) => {
                        natural_order(&mut mine, o.reverse);
                        mine.truncate(k);
                        true
                    }
                    (Some(sort), Some(k)) if mine.len() >= 2 * k.max(16) => {
                        mine.sort_by(|a, b| sort.compare(&a.0, &b.0));
                        mine.truncate(k);
                        true
                    }
                    _ => true,
                }
            },
        );
        drop(guard);
        if let Some(sort) = &o.sort {
            mine.sort_by(|a, b| sort.compare(&a.0, &b.0));
        } else if natural {
            natural_order(&mut mine, o.reverse);
        }
        if let Some(k) = keep.filter(|_| natural || !o.reverse) {
            mine.truncate(k);
        }
        found.extend(mine);
        if o.sort.is_none() && !natural && !o.reverse && keep.is_some_and(|k| found.len() >= k) {
            break;
        }
    }
    if let Some(sort) = &o.sort {
        found.sort_by(|a, b| sort.compare(&a.0, &b.0));
    } else if natural {
        natural_order(&mut found, o.reverse);
    } else if o.reverse {
        // Natural order of an uncapped collection is storage order (shard, then slot).
        found.reverse();
    }
    let it = found.into_iter().skip(o.skip);
    let it: Box<dyn Iterator<Item = _>> = match o.limit {
        Some(l) => Box::new(it.take(l)),
        None => Box::new(it),
    };
    it.map(|(_, d, r)| (d, r)).collect()
}

fn render(o: &FindOpts, doc: Document, raw: Option<RawDocumentBuf>, bson: bool) -> Reply {
    match &o.projection {
        Some(p) => doc_reply(p.apply(&doc), None, bson),
        None => doc_reply(doc, raw, bson),
    }
}

/// `DOC.FIND` and `DOC.FINDONE`: the rendered documents (at most one for FINDONE), touched
/// first when asked.
fn find_replies(ctx: &Ctx<'_>, args: &[Bytes], one: bool) -> Result<Vec<Reply>, Reply> {
    let c = common(args)?;
    let o = parse_find(&c, one)?;
    let _catalog = ctx.server.store.catalog_read();
    let db = ctx.client.db;
    let mut found = run_find(
        ctx,
        db,
        &c.coll,
        &o,
        o.projection.is_none() && (c.bson || !o.touch),
    );
    if o.touch {
        found = touch_found(ctx, db, &c, found);
    }
    Ok(found
        .into_iter()
        .map(|(d, r)| render(&o, d, r, c.bson))
        .collect())
}

fn doc_find(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    match find_replies(ctx, args, false) {
        Ok(docs) => Reply::Array(docs),
        Err(e) => e,
    }
}

fn doc_findone(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    match find_replies(ctx, args, true) {
        Ok(docs) => docs.into_iter().next().unwrap_or(Reply::Nil),
        Err(e) => e,
    }
}

fn doc_count(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let c = match common(args) {
        Ok(c) => c,
        Err(e) => return e,
    };
    if c.rest.len() != 1 {
        return syntax_error();
    }
    let filter = match parse_filter(&c.rest[0], &c) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let db = ctx.client.db;
    let store = &ctx.server.store;
    let _catalog = store.catalog_read();
    let shards = shards_for(store, &filter);
    let mut n = 0i64;
    for s in shards {
        let guard = store.lock(s);
        if let Some(cs) = guard.dbs[db].collections.get(&c.coll) {
            cs.scan(&filter, &mut |_, _| {
                n += 1;
                true
            });
        }
    }
    Reply::Int(n)
}

fn doc_delete(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let c = match common(args) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let Some(f) = c.rest.first() else {
        return wrong_arity("doc.delete");
    };
    let mut one = false;
    let mut i = 1;
    while i < c.rest.len() {
        if is(&c.rest[i], "LIMIT") && i + 1 < c.rest.len() {
            match parse_i64(&c.rest[i + 1]) {
                Some(1) => one = true,
                Some(0) => one = false,
                Some(_) => return Reply::error("ERR LIMIT must be 0 (all) or 1"),
                None => return Reply::error(NOT_AN_INTEGER),
            }
            i += 2;
        } else if is(&c.rest[i], "J") {
            return Reply::error(NO_JOURNAL);
        } else {
            return syntax_error();
        }
    }
    let filter = match parse_filter(f, &c) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let db = ctx.client.db;
    let store = &ctx.server.store;
    let _catalog = store.catalog_read();
    let shards = shards_for(store, &filter);
    let mut n = 0i64;
    for s in shards {
        let mut guard = store.lock(s);
        let Some(cs) = guard.dbs[db].collections.get_mut(&c.coll) else {
            continue;
        };
        let mut slots = Vec::new();
        cs.scan(&filter, &mut |slot, _| {
            slots.push(slot);
            !one
        });
        for slot in slots {
            if cs.remove(slot).is_some() {
                n += 1;
            }
        }
        if one && n > 0 {
            break;
        }
    }
    Reply::Int(n)
}

fn doc_update(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let c = match common(args) {
        Ok(c) => c,
        Err(e) => return e,
    };
    if c.rest.len() < 2 {
        return wrong_arity("doc.update");
    }
    let (mut multi, mut upsert) = (false, false);
    for a in &c.rest[2..] {
        if is(a, "MULTI") {
            multi = true;
        } else if is(a, "UPSERT") {
            upsert = true;
        } else if is(a, "J") {
            return Reply::error(NO_JOURNAL);
        } else {
            return syntax_error();
        }
    }
    let filter = match parse_filter(&c.rest[0], &c) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let upd = match parse_doc(&c.rest[1], &c).and_then(|d| update::parse(&d).map_err(err)) {
        Ok(u) => u,
        Err(e) => return e,
    };
    if multi && matches!(upd, Update::Replace(_)) {
        return Reply::error("ERR multi update is not supported for replacement-style update");
    }
    let db = ctx.client.db;
    let max = max_doc_size(ctx);
    let store = &ctx.server.store;
    let _catalog = store.catalog_read();
    if upsert {
        ensure_collection(ctx, db, &c.coll);
    }
    // An upsert into a capped collection may evict: it holds every shard (see doc_insert).
    let capped = if upsert {
        capped_of(&store.lock_many(&[0]), db, &c.coll)
    } else {
        None
    };
    // Updates lock every shard they may touch at once (one shard for an `_id` equality), so
    // a MULTI update is all or nothing and an upsert's "no match, insert" is atomic.
    // A unique secondary index makes the update hold every shard (see doc_insert), and so
    // does an upsert into a capped collection (it may evict).
    let mut all =
        capped.is_some() || doc_query::needs_all_shards(&doc_query::peek_specs(ctx, db, &c.coll));
    let mut guards = loop {
        let shards: Vec<usize> = match filter.id_equality() {
            Some(id) if !all => vec![store.shard_of(&keys::encode(id))],
            _ => (0..store.shard_count()).collect(),
        };
        let guards = store.lock_many(&shards);
        let unique = guards[0].1.dbs[db]
            .collections
            .get(&c.coll)
            .is_some_and(|cs| doc_query::needs_all_shards(&doc_query::specs_of(cs)));
        if all || !unique || guards.len() == store.shard_count() {
            break guards;
        }
        drop(guards);
        all = true;
    };
    let mut changes: Vec<(usize, u32, Option<RawDocumentBuf>)> = Vec::new();
    let mut matched = 0i64;
    'shards: for (gi, (_, g)) in guards.iter().enumerate() {
        let Some(cs) = g.dbs[db].collections.get(&c.coll) else {
            continue;
        };
        let mut hits: Vec<(u32, Document)> = Vec::new();
        cs.scan(&filter, &mut |slot, raw| {
            if let Ok(doc) = Document::try_from(raw.as_ref()) {
                hits.push((slot, doc));
            }
            multi
        });
        for (slot, doc) in hits {
            matched += 1;
            let mut new = doc;
            if let Err(e) = upd.apply(&mut new, c.now, false) {
                return err(e);
            }
            if let Err(e) = codec::validate_stored(&new) {
                return err(e);
            }
            let raw = match codec::to_raw(&new, max) {
                Ok(raw) => raw,
                Err(e) => return err(e),
            };
            // Modified means the stored bytes change (a new field order or type counts,
            // as in MongoDB; `bson::Document` equality ignores order).
            if let Some(old) = cs.get(slot) {
                if let Err(e) = capped_same_size(cs, old.as_bytes().len(), raw.as_bytes().len()) {
                    return e;
                }
            }
            if cs.get(slot).map(|old| old.as_bytes()) != Some(raw.as_bytes()) {
                changes.push((gi, slot, Some(raw)));
            }
            if !multi {
                break 'shards;
            }
        }
    }
    let modified = changes.len() as i64;
    if matched == 0 && upsert {
        let mut doc = match update::upsert_base(&filter) {
            Ok(d) => d,
            Err(e) => return err(e),
        };
        if let Err(e) = upd.apply(&mut doc, c.now, true) {
            return err(e);
        }
        if let Update::Replace(_) = upd {
            if let Ok(base) = update::upsert_base(&filter) {
                if let (Some(id), false) = (base.get("_id"), doc.contains_key("_id")) {
                    let mut out = Document::new();
                    out.insert("_id", id.clone());
                    out.extend(doc);
                    doc = out;
                }
            }
        }
        let mut p = match prepare(ctx, doc, max) {
            Ok(p) => p,
            Err(e) => return e,
        };
        // The new document's shard may not be among the locked ones (an `_id` equality
        // upsert locks the id's shard, which is the new document's shard too).
        let Some(gi) = guards.iter().position(|(i, _)| *i == p.shard) else {
            return Reply::error("ERR internal: upsert shard not locked");
        };
        let cs = guards[gi].1.dbs[db]
            .collections
            .entry(c.coll.clone())
            .or_default();
        let purged = Expired {
            db,
            collection: c.coll.clone(),
            ids: cs.expire_if_due(&p.key).into_iter().collect(),
        };
        if cs.contains_id(&p.key) {
            return dup_key(db, &c.coll, &p.id);
        }
        if let Some(spec) = &capped {
            if let Err(e) = capped::check_fits(spec, p.raw.as_bytes().len()) {
                return err(e);
            }
        }
        if let Err(e) = doc_query::check_writes(&guards, db, &c.coll, &[(&p.raw, None)]) {
            return e;
        }
        let Some(cs) = guards[gi].1.dbs[db].collections.get_mut(&c.coll) else {
            return Reply::error("ERR internal: collection vanished");
        };
        let id = std::mem::replace(&mut p.id, Bson::Null);
        cs.insert(p.key, p.raw);
        if capped.is_some() {
            enforce_capped(&mut guards, db, &c.coll);
        }
        drop(guards);
        ttl::publish(ctx.server, &purged);
        return Reply::Array(vec![Reply::Int(0), Reply::Int(0), id_reply(&id)]);
    }
    {
        let writes: Vec<(&RawDocumentBuf, Option<(usize, u32)>)> = changes
            .iter()
            .filter_map(|(gi, slot, raw)| Some((raw.as_ref()?, Some((guards[*gi].0, *slot)))))
            .collect();
        if let Err(e) = doc_query::check_writes(&guards, db, &c.coll, &writes) {
            return e;
        }
    }
    for (gi, slot, raw) in changes {
        if let (Some(cs), Some(raw)) = (guards[gi].1.dbs[db].collections.get_mut(&c.coll), raw) {
            cs.replace(slot, raw);
        }
    }
    Reply::Array(vec![Reply::Int(matched), Reply::Int(modified), Reply::Nil])
}

// ---------------------------------------------------------------------------------------
// Collection lifecycle (DOC.CREATE / DROP / RENAME / COLLECTIONS / STATS) and capped
// collections. Catalog changes hold the catalog exclusively and every shard's lock, so each
// is one step for every other command.

/// The capped bounds of `coll` in `db` as the locked shards hold them (the caller holds the
/// catalog, so the answer stays true for the rest of its command).
fn capped_of(
    guards: &[(usize, parking_lot::MutexGuard<'_, crate::store::ShardData>)],
    db: usize,
    coll: &str,
) -> Option<CappedSpec> {
    guards
        .first()
        .and_then(|(_, g)| g.dbs[db].collections.get(coll))
        .and_then(|cs| cs.meta.capped.clone())
}

/// Evicts the oldest documents of a capped collection past its bounds; `guards` hold every
/// shard.
fn enforce_capped(
    guards: &mut [(usize, parking_lot::MutexGuard<'_, crate::store::ShardData>)],
    db: usize,
    coll: &str,
) {
    let mut parts: Vec<&mut CollectionShard> = guards
        .iter_mut()
        .filter_map(|(_, g)| g.dbs[db].collections.get_mut(coll))
        .collect();
    capped::enforce(&mut parts);
}

/// Documents of a capped collection keep their size, so the bound stays exact without
/// evicting on update (MongoDB's rule and error).
fn capped_same_size(cs: &CollectionShard, old: usize, new: usize) -> Result<(), Reply> {
    if cs.is_capped() && old != new {
        return Err(Reply::error(format!(
            "ERR Cannot change the size of a document in a capped collection: {old} != {new}"
        )));
    }
    Ok(())
}

/// Merges matches of a capped collection by insertion sequence (their key), newest first
/// when `reverse`.
fn natural_order(found: &mut [(Vec<Bson>, Document, Option<RawDocumentBuf>)], reverse: bool) {
    let seq = |k: &[Bson]| match k.first() {
        Some(Bson::Int64(s)) => *s,
        _ => 0,
    };
    if reverse {
        found.sort_by_key(|(k, _, _)| std::cmp::Reverse(seq(k)));
    } else {
        found.sort_by_key(|(k, _, _)| seq(k));
    }
}

/// A collection name argument, checked as every DOC command checks it.
fn coll_name(arg: &[u8]) -> Result<String, Reply> {
    let name = text(arg);
    if name.is_empty() || name.contains(['$', '\0']) {
        return Err(Reply::error(format!(
            "ERR Invalid collection name: '{name}'"
        )));
    }
    Ok(name)
}

fn positive(arg: &[u8], what: &str) -> Result<u64, Reply> {
    match parse_i64(arg) {
        Some(n) if n > 0 => Ok(n as u64),
        Some(_) => Err(Reply::error(format!(
            "ERR {what} must be a positive integer"
        ))),
        None => Err(Reply::error(NOT_AN_INTEGER)),
    }
}

fn doc_create(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let coll = match coll_name(&args[1]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let mut meta = CollectionMeta::default();
    match &args[2..] {
        [] => {}
        [capped, size_kw, size, rest @ ..] if is(capped, "CAPPED") && is(size_kw, "SIZE") => {
            let size = match positive(size, "SIZE") {
                Ok(n) => n,
                Err(e) => return e,
            };
            let max = match rest {
                [] => None,
                [max_kw, max] if is(max_kw, "MAX") => match parse_i64(max) {
                    // MongoDB: MAX 0 means no document bound.
                    Some(n) if n >= 0 => Some(n as u64),
                    Some(_) => return Reply::error("ERR MAX must not be negative"),
                    None => return Reply::error(NOT_AN_INTEGER),
                },
                _ => return syntax_error(),
            };
            meta.capped = Some(CappedSpec::new(size, max));
        }
        _ => return syntax_error(),
    }
    let db = ctx.client.db;
    let store = &ctx.server.store;
    let _catalog = store.catalog_write();
    let all: Vec<usize> = (0..store.shard_count()).collect();
    let mut guards = store.lock_many(&all);
    if guards[0].1.dbs[db].collections.contains_key(&coll) {
        return Reply::error(format!("ERR Collection {db}.{coll} already exists."));
    }
    for (_, g) in guards.iter_mut() {
        let part = g.new_collection(meta.clone());
        g.dbs[db].collections.insert(coll.clone(), part);
    }
    Reply::ok()
}

fn doc_drop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let coll = match coll_name(&args[1]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let db = ctx.client.db;
    let store = &ctx.server.store;
    let old: Vec<CollectionShard> = {
        let _catalog = store.catalog_write();
        let all: Vec<usize> = (0..store.shard_count()).collect();
        let mut guards = store.lock_many(&all);
        guards
            .iter_mut()
            .filter_map(|(_, g)| g.dbs[db].collections.remove(&coll))
            .collect()
    };
    // Freed after the locks are released; each part takes its bytes out of its shard's
    // counter as it goes.
    let existed = !old.is_empty();
    drop(old);
    Reply::Int(existed as i64)
}

fn doc_rename(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let (from, to) = match (coll_name(&args[1]), coll_name(&args[2])) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let drop_target = match &args[3..] {
        [] => false,
        [a] if is(a, "DROPTARGET") => true,
        _ => return syntax_error(),
    };
    let db = ctx.client.db;
    let store = &ctx.server.store;
    let dropped: Vec<CollectionShard> = {
        let _catalog = store.catalog_write();
        let all: Vec<usize> = (0..store.shard_count()).collect();
        let mut guards = store.lock_many(&all);
        let cols = &guards[0].1.dbs[db].collections;
        if !cols.contains_key(&from) {
            return Reply::error("ERR source namespace does not exist");
        }
        if from == to {
            return Reply::error("ERR Can't rename a collection to itself");
        }
        if cols.contains_key(&to) && !drop_target {
            return Reply::error("ERR target namespace exists");
        }
        // Every shard's part moves in the same critical section: indexes, TTL wheels,
        // counters and capped state live in the part and move with it.
        let mut dropped = Vec::new();
        for (_, g) in guards.iter_mut() {
            let cols = &mut g.dbs[db].collections;
            if let Some(part) = cols.remove(&from) {
                if let Some(old) = cols.insert(to.clone(), part) {
                    dropped.push(old);
                }
            }
        }
        dropped
    };
    drop(dropped);
    Reply::ok()
}

fn doc_collections(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    let db = ctx.client.db;
    let store = &ctx.server.store;
    let _catalog = store.catalog_read();
    let mut names: Vec<String> = store.lock(0).dbs[db].collections.keys().cloned().collect();
    names.sort_unstable();
    Reply::Array(names.into_iter().map(Reply::bulk).collect())
}

fn doc_stats(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let coll = match coll_name(&args[1]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let db = ctx.client.db;
    let store = &ctx.server.store;
    let _catalog = store.catalog_read();
    let mut totals = Totals::default();
    let mut stats = None;
    for s in 0..store.shard_count() {
        let g = store.lock(s);
        let Some(cs) = g.dbs[db].collections.get(&coll) else {
            break;
        };
        totals.add(cs);
        if s + 1 == store.shard_count() {
            stats = Some(totals.stats(&format!("{db}.{coll}"), cs));
        }
    }
    match stats {
        Some(d) => Reply::bulk(codec::doc_json_owned(d)),
        None => Reply::error(format!("ERR ns not found {db}.{coll}")),
    }
}

/// `INFO documents`: totals over every collection of every database.
pub fn info_totals(store: &crate::store::Store) -> Totals {
    let _catalog = store.catalog_read();
    let mut t = Totals::default();
    store.for_each_shard(|s| {
        for db in &s.dbs {
            for cs in db.collections.values() {
                t.add(cs);
            }
        }
    });
    t.collections = store.lock(0).dbs.iter().map(|d| d.collections.len()).sum();
    t
}

// ---------------------------------------------------------------------------------------
// TTL indexes: DOC.EXPIREINDEX, DOC.TOUCH and FIND … TOUCH.

/// `DOC.EXPIREINDEX coll field seconds`: creates the TTL index `field_1` or changes its
/// `expireAfterSeconds` (MongoDB's `collMod`), under every shard's lock so all parts agree.
fn doc_expireindex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let c = match common(args) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let [field, seconds] = c.rest else {
        return wrong_arity("doc.expireindex");
    };
    let field = text(field);
    if let Err(e) = ttl_field_ok(&field) {
        return e;
    }
    let secs = match crate::documents::ttl::parse_expire_after(seconds) {
        Ok(s) => s,
        Err(e) => return Reply::error(e),
    };
    let db = ctx.client.db;
    let server = ctx.server;
    let _catalog = server.store.catalog_read();
    ensure_collection(ctx, db, &c.coll);
    let name = format!("{field}_1");
    // A new TTL index is an ordered index too (it serves queries on its field): created
    // through the one index path, which also sets up the wheels.
    let exists = ctx.server.store.lock(0).dbs[db]
        .collections
        .get(&c.coll)
        .is_some_and(|cs| {
            cs.ordered_index(&name).is_some() || cs.ttl.iter().any(|(n, _)| *n == name)
        });
    if !exists {
        let fields =
            match crate::documents::index::IndexSpec::parse_keys(&bson::doc! {field.clone(): 1}) {
                Ok(f) => f,
                Err(e) => return err(e),
            };
        let spec = crate::documents::index::IndexSpec {
            name,
            fields,
            unique: false,
            expire_after: Some(secs),
        };
        return doc_query::create_index(ctx, db, &c.coll, spec);
    }
    let now = crate::util::now_ms();
    let store = &ctx.server.store;
    let all: Vec<usize> = (0..store.shard_count()).collect();
    let mut guards = store.lock_many(&all);
    if capped_of(&guards, db, &c.coll).is_some() {
        return Reply::error(capped::TTL_ON_CAPPED);
    }
    for (_, g) in guards.iter_mut() {
        if let Some(cs) = g.dbs[db].collections.get_mut(&c.coll) {
            cs.set_ttl_index(&name, &field, secs, now);
            cs.sync_memory();
        }
    }
    Reply::bulk(name.into_bytes())
}

/// MongoDB refuses TTL indexes on `_id` (and on compound keys, which one field cannot be).
fn ttl_field_ok(field: &str) -> Result<(), Reply> {
    if field == "_id" {
        return Err(Reply::error(
            "ERR the _id field cannot carry a TTL index (expireAfterSeconds is not valid for an _id index)",
        ));
    }
    if field.is_empty() || field.starts_with('$') || field.split('.').any(str::is_empty) {
        return Err(Reply::error(format!(
            "ERR invalid TTL index field '{field}'"
        )));
    }
    Ok(())
}

/// The update that refreshes `fields` to `now`: `{$set: {field: now, ...}}`, the same
/// mechanism as `DOC.UPDATE` (dotted paths create subdocuments).
fn touch_update(fields: &[String], now: DateTime) -> Result<Update, Reply> {
    let mut set = Document::new();
    for f in fields {
        set.insert(f.clone(), now);
    }
    let mut u = Document::new();
    u.insert("$set", set);
    update::parse(&u).map_err(err)
}

/// Applies `upd` to the document in `slot` and stores it; returns the new document.
fn touch_slot(
    cs: &mut CollectionShard,
    slot: u32,
    upd: &Update,
    now: DateTime,
    max: usize,
) -> Result<Document, Reply> {
    let Some(raw) = cs.get(slot) else {
        return Err(Reply::error("ERR internal: touched document vanished"));
    };
    let mut doc = Document::try_from(raw.as_ref())
        .map_err(|e| Reply::error(format!("ERR cannot decode stored document: {e}")))?;
    upd.apply(&mut doc, now, false).map_err(err)?;
    let new = codec::to_raw(&doc, max).map_err(err)?;
    capped_same_size(cs, raw.as_bytes().len(), new.as_bytes().len())?;
    cs.replace(slot, new);
    Ok(doc)
}

/// `DOC.TOUCH coll filter [FIELD name] [J]`: MongoDB's
/// `update(filter, {$set: {accessTime: new Date()}}, {multi: true})` for every TTL field.
fn doc_touch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let c = match common(args) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let Some(f) = c.rest.first() else {
        return wrong_arity("doc.touch");
    };
    let mut field = None;
    let mut i = 1;
    while i < c.rest.len() {
        if is(&c.rest[i], "FIELD") && i + 1 < c.rest.len() {
            let name = text(&c.rest[i + 1]);
            if name.is_empty() || name.starts_with('$') || name == "_id" {
                return Reply::error(format!("ERR invalid FIELD '{name}'"));
            }
            field = Some(name);
            i += 2;
        } else if is(&c.rest[i], "J") {
            return Reply::error(NO_JOURNAL);
        } else {
            return syntax_error();
        }
    }
    let filter = match parse_filter(f, &c) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let db = ctx.client.db;
    let max = max_doc_size(ctx);
    let store = &ctx.server.store;
    let _catalog = store.catalog_read();
    let shards = shards_for(store, &filter);
    // With FIELD the fields are known now; otherwise they are the TTL indexes' fields, which
    // every shard's part of the collection lists alike. The general update is built only
    // for a document the in-place path cannot touch, and then once.
    let mut fields: Option<Vec<String>> = field.map(|f| vec![f]);
    let mut upd: Option<Update> = None;
    let now_ms = c.now.timestamp_millis();
    let mut n = 0i64;
    for s in shards {
        let mut guard = store.lock(s);
        let Some(cs) = guard.dbs[db].collections.get_mut(&c.coll) else {
            continue;
        };
        let fields = fields.get_or_insert_with(|| cs.ttl_fields());
        if fields.is_empty() {
            return Reply::Int(0);
        }
        let mut slots = Vec::new();
        cs.scan(&filter, &mut |slot, _| {
            slots.push(slot);
            true
        });
        for slot in slots {
            if cs.touch_dates(slot, fields, now_ms) {
                n += 1;
                continue;
            }
            let u = match &upd {
                Some(u) => u,
                None => match touch_update(fields, c.now) {
                    Ok(u) => upd.insert(u),
                    Err(e) => return e,
                },
            };
            match touch_slot(cs, slot, u, c.now, max) {
                Ok(_) => n += 1,
                Err(e) => return e,
            }
        }
    }
    Reply::Int(n)
}

/// `FIND … TOUCH`: refreshes the TTL dates of the documents a find returns and replies with
/// them as refreshed. Each document is touched under its shard's lock, found again by `_id`;
/// one removed meanwhile (expired or deleted) is left out of the reply.
fn touch_found(
    ctx: &Ctx<'_>,
    db: usize,
    c: &Common<'_>,
    found: Vec<(Document, Option<RawDocumentBuf>)>,
) -> Vec<(Document, Option<RawDocumentBuf>)> {
    let max = max_doc_size(ctx);
    let store = &ctx.server.store;
    let mut out = Vec::with_capacity(found.len());
    for (doc, raw) in found {
        let Some(id) = doc.get("_id") else { continue };
        let key = keys::encode(id);
        let mut guard = store.lock(store.shard_of(&key));
        let Some(cs) = guard.dbs[db].collections.get_mut(&c.coll) else {
            continue;
        };
        let Some(slot) = cs.slot_of(&key) else {
            continue;
        };
        if !cs.visible(slot, cs.visibility_clock()) {
            continue;
        }
        let fields = cs.ttl_fields();
        if fields.is_empty() {
            // No TTL index: nothing to refresh.
            out.push((doc, raw));
            continue;
        }
        if cs.touch_dates(slot, &fields, c.now.timestamp_millis()) {
            let new = cs
                .get(slot)
                .and_then(|r| Document::try_from(r.as_ref()).ok());
            match new {
                Some(new) => {
                    let raw = raw.and_then(|_| cs.get(slot).cloned());
                    out.push((new, raw));
                }
                None => out.push((doc, raw)),
            }
            continue;
        }
        let upd = match touch_update(&fields, c.now) {
            Ok(u) => u,
            Err(_) => {
                out.push((doc, raw));
                continue;
            }
        };
        match touch_slot(cs, slot, &upd, c.now, max) {
            // The reply carries the refreshed document (raw bytes only when asked for BSON).
            Ok(new) => {
                let raw = raw.and_then(|_| cs.get(slot).cloned());
                out.push((new, raw));
            }
            Err(_) => out.push((doc, raw)),
        }
    }
    out
}
