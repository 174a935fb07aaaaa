//! Handlers of the document commands that work through indexes: `DOC.CREATEINDEX`,
//! `DOC.DROPINDEX`, `DOC.INDEXES`, `DOC.EXPLAIN` and `DOC.AGGREGATE`, and the index checks
//! the write commands run before they change anything (unique keys across shards, parallel
//! arrays). Their table entries live in `documents.rs` with the rest of the family.

use crate::commands::documents::{
    common, doc_reply, ensure_collection, err, parse_doc, parse_filter, shards_for, Common,
};
use crate::commands::{is, syntax_error, text, Ctx};
use crate::documents::aggregate::{self, Partial, Pipeline};
use crate::documents::codec;
use crate::documents::collection::{CollectionShard, IndexShard};
use crate::documents::index::{IndexSpec, OrderedIndex, ScanStats};
use crate::documents::query::Node;
use crate::documents::sort::Sort;
use crate::protocol::Reply;
use crate::store::ShardData;
use crate::util::num::{parse_i64, NOT_AN_INTEGER};
use bson::{Bson, Document, RawDocumentBuf};
use bytes::Bytes;
use parking_lot::MutexGuard;
use std::sync::Arc;
use std::time::Instant;

/// Slots indexed per lock hold while building an index, so other clients' commands on the
/// shard run between batches.
const BUILD_BATCH: u32 = 1024;

type Guards<'a> = Vec<(usize, MutexGuard<'a, ShardData>)>;

/// The secondary index specs of a collection as one shard's catalog holds them (every shard
/// holds the same), in creation order.
pub fn specs_of(cs: &CollectionShard) -> Vec<Arc<IndexSpec>> {
    cs.indexes
        .iter()
        .filter_map(IndexShard::as_ordered)
        .map(|ix| ix.spec.clone())
        .collect()
}

/// Peeks at a collection's index specs (one shard's lock, briefly).
pub fn peek_specs(ctx: &Ctx<'_>, db: usize, coll: &str) -> Vec<Arc<IndexSpec>> {
    let g = ctx.server.store.lock(0);
    g.dbs[db]
        .collections
        .get(coll)
        .map(specs_of)
        .unwrap_or_default()
}

/// Whether writes to a collection with these indexes must hold every shard: a unique key may
/// collide with a document on any shard.
pub fn needs_all_shards(specs: &[Arc<IndexSpec>]) -> bool {
    specs.iter().any(|s| s.unique)
}

fn dup_key_error(db: usize, coll: &str, spec: &IndexSpec, doc: &Document) -> Reply {
    Reply::error(format!(
        "DUPKEY E11000 duplicate key error collection: {db}.{coll} index: {} dup key: {}",
        spec.name,
        spec.dup_key_text(doc)
    ))
}

/// Checks documents about to be written against the collection's indexes, under the locks
/// the write holds: every index must be able to key them (no parallel arrays), and a unique
/// index must not hold their keys for another document (on any locked shard) nor may two
/// of them share a key. `writes` pairs each new document with the (shard, slot) it replaces.
/// The caller holds every shard when the collection has a unique index.
pub fn check_writes(
    guards: &Guards<'_>,
    db: usize,
    coll: &str,
    writes: &[(&RawDocumentBuf, Option<(usize, u32)>)],
) -> Result<(), Reply> {
    let Some(specs) = guards
        .first()
        .and_then(|(_, g)| g.dbs[db].collections.get(coll))
        .map(specs_of)
    else {
        return Ok(());
    };
    for spec in &specs {
        let mut batch: hashbrown::HashSet<Vec<u8>> = hashbrown::HashSet::new();
        for (raw, replaces) in writes {
            let doc = &spec.project(raw);
            let ks = spec.keys_of(doc).map_err(err)?;
            if !spec.unique {
                continue;
            }
            for k in &ks {
                if !batch.insert(k.clone()) {
                    return Err(dup_key_error(db, coll, spec, doc));
                }
            }
            for (shard, g) in guards {
                let Some(ix) = g.dbs[db]
                    .collections
                    .get(coll)
                    .and_then(|cs| cs.ordered_index(&spec.name))
                else {
                    continue;
                };
                let except = replaces.and_then(|(s, slot)| (s == *shard).then_some(slot));
                if ix.has_other(&ks, except) {
                    return Err(dup_key_error(db, coll, spec, doc));
                }
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// DOC.CREATEINDEX coll keys [UNIQUE] [NAME n] [EXPIREAFTER s]

/// Parses `DOC.CREATEINDEX`'s arguments into a spec.
fn parse_createindex(args: &[Bytes]) -> Result<IndexSpec, Reply> {
    let keys = codec::parse_json(&args[2]).map_err(err)?;
    let fields = IndexSpec::parse_keys(&keys).map_err(err)?;
    let (mut unique, mut name, mut expire) = (false, None, None);
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "UNIQUE") {
            unique = true;
            i += 1;
        } else if is(&args[i], "NAME") && i + 1 < args.len() {
            let n = text(&args[i + 1]);
            if n.is_empty() {
                return Err(Reply::error("ERR index name cannot be empty"));
            }
            name = Some(n);
            i += 2;
        } else if is(&args[i], "EXPIREAFTER") && i + 1 < args.len() {
            expire = Some(
                crate::documents::ttl::parse_expire_after(&args[i + 1]).map_err(Reply::error)?,
            );
            i += 2;
        } else {
            return Err(syntax_error());
        }
    }
    if expire.is_some() {
        if fields.len() != 1 {
            return Err(Reply::error(
                "ERR TTL indexes are single-field indexes, compound indexes do not support TTL",
            ));
        }
        if fields[0].name == "_id" {
            return Err(Reply::error(
                "ERR The field 'expireAfterSeconds' is not valid for an _id index specification",
            ));
        }
    }
    Ok(IndexSpec {
        name: name.unwrap_or_else(|| IndexSpec::default_name(&fields)),
        fields,
        unique,
        expire_after: expire,
    })
}

pub fn doc_createindex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let spec = match parse_createindex(args) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let coll = text(&args[1]);
    // The collection name rules of every DOC command (see `documents::common`).
    if coll.is_empty() || coll.contains(['$', '\0']) {
        return Reply::error(format!("ERR Invalid collection name: '{coll}'"));
    }
    let db = ctx.client.db;
    let server = ctx.server;
    let _catalog = server.store.catalog_read();
    create_index(ctx, db, &coll, spec)
}

/// Creates (and builds) an index from a validated spec and answers its name: the one way
/// an ordered index comes to exist, for `DOC.CREATEINDEX` and for TTL indexes (a TTL index
/// is an ordered index whose spec has `expire_after`, so it also serves queries).
pub fn create_index(ctx: &Ctx<'_>, db: usize, coll: &str, spec: IndexSpec) -> Reply {
    let coll = coll.to_string();
    // The `_id` index always exists.
    if spec.fields.len() == 1
        && spec.fields[0].name == "_id"
        && !spec.fields[0].descending
        && (spec.unique || spec.name == "_id_" || spec.name == "_id_1")
    {
        return Reply::bulk(Bytes::from_static(b"_id_"));
    }
    if spec.name == "_id_" {
        return Reply::error("ERR The index name '_id_' is reserved for the _id index");
    }
    ensure_collection(ctx, db, &coll);
    let store = &ctx.server.store;
    let all: Vec<usize> = (0..store.shard_count()).collect();
    let spec = Arc::new(spec);
    // Attach the (not yet ready) index to every shard at once: from here on every write
    // maintains it, and the build below only has to cover the documents already there.
    {
        let mut guards = store.lock_many(&all);
        let Some(existing) = guards[0].1.dbs[db].collections.get(&coll).map(specs_of) else {
            return Reply::error("ERR collection dropped during index creation");
        };
        for e in &existing {
            if e.name == spec.name {
                if e.same_key(&spec.fields)
                    && e.unique == spec.unique
                    && e.expire_after == spec.expire_after
                {
                    return Reply::bulk(Bytes::from(spec.name.clone()));
                }
                return Reply::error(format!(
                    "ERR An existing index has the same name as the requested index but a different key or options: {}",
                    spec.name
                ));
            }
            if e.same_key(&spec.fields) {
                return Reply::error(format!(
                    "ERR Index already exists with a different name: {}",
                    e.name
                ));
            }
        }
        if existing.len() >= 63 {
            return Reply::error("ERR add index fails, too many indexes (the limit is 64)");
        }
        let capped = guards[0].1.dbs[db]
            .collections
            .get(&coll)
            .is_some_and(CollectionShard::is_capped);
        if capped && spec.expire_after.is_some() {
            return Reply::error(crate::documents::capped::TTL_ON_CAPPED);
        }
        let now = crate::util::now_ms();
        for (_, g) in guards.iter_mut() {
            if let Some(cs) = g.dbs[db].collections.get_mut(&coll) {
                cs.indexes
                    .push(IndexShard::Ordered(OrderedIndex::new(spec.clone())));
                // A TTL index: its wheel expires documents from now on, while the ordered
                // part builds.
                if let Some(secs) = spec.expire_after {
                    cs.set_ttl_index(&spec.name, &spec.fields[0].name, secs, now);
                }
            }
        }
    }
    if let Err(e) = build(ctx, db, &coll, &spec) {
        drop_by_spec(ctx, db, &coll, &spec);
        return e;
    }
    Reply::bulk(Bytes::from(spec.name.clone()))
}

/// The index of `spec` in one shard's part (the very same spec: a drop and re-create
/// in the middle of a build is a different index).
fn find_mut<'a>(
    cs: &'a mut CollectionShard,
    spec: &Arc<IndexSpec>,
) -> Option<&'a mut OrderedIndex> {
    cs.indexes
        .iter_mut()
        .filter_map(IndexShard::as_ordered_mut)
        .find(|ix| Arc::ptr_eq(&ix.spec, spec))
}

/// Indexes the documents already stored, one shard at a time and `BUILD_BATCH` slots per
/// lock hold; then checks uniqueness across shards and marks the index ready, under every
/// shard's lock.
fn build(ctx: &Ctx<'_>, db: usize, coll: &str, spec: &Arc<IndexSpec>) -> Result<(), Reply> {
    let store = &ctx.server.store;
    let aborted =
        || Reply::error("ERR index build aborted: the index or its collection was dropped");
    for s in 0..store.shard_count() {
        let mut from = 0u32;
        loop {
            let mut g = store.lock(s);
            let Some(cs) = g.dbs[db].collections.get_mut(coll) else {
                return Err(aborted());
            };
            let end = cs.slot_count().min(from.saturating_add(BUILD_BATCH));
            let mut docs: Vec<(u32, Document)> = Vec::with_capacity((end - from) as usize);
            for slot in from..end {
                if let Some(raw) = cs.get(slot) {
                    docs.push((slot, spec.project(raw)));
                }
            }
            let Some(ix) = find_mut(cs, spec) else {
                return Err(aborted());
            };
            for (slot, d) in &docs {
                if let Err(e) = spec.keys_of(d) {
                    return Err(err(e));
                }
                ix.insert_doc(*slot, d);
            }
            let total = cs.slot_count();
            drop(g);
            if end >= total {
                break;
            }
            from = end;
        }
    }
    let all: Vec<usize> = (0..store.shard_count()).collect();
    let mut guards = store.lock_many(&all);
    if spec.unique {
        if let Some((shard, slot)) = cross_shard_duplicate(&guards, db, coll, spec) {
            let doc = guards
                .iter()
                .find(|(i, _)| *i == shard)
                .and_then(|(_, g)| g.dbs[db].collections.get(coll))
                .and_then(|cs| cs.get(slot))
                .and_then(|r| Document::try_from(r).ok())
                .unwrap_or_default();
            return Err(dup_key_error(db, coll, spec, &doc));
        }
    }
    for (_, g) in guards.iter_mut() {
        match g.dbs[db]
            .collections
            .get_mut(coll)
            .and_then(|cs| find_mut(cs, spec))
        {
            Some(ix) => ix.ready = true,
            None => return Err(aborted()),
        }
        // The built index counts in `used_memory` from now on.
        if let Some(cs) = g.dbs[db].collections.get_mut(coll) {
            cs.sync_memory();
        }
    }
    Ok(())
}

/// A key held twice across the shards' parts of a unique index (a k-way merge of the
/// shards' sorted keys): the shard and slot of one holder.
fn cross_shard_duplicate(
    guards: &Guards<'_>,
    db: usize,
    coll: &str,
    spec: &Arc<IndexSpec>,
) -> Option<(usize, u32)> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    type Entries<'a> = Box<dyn Iterator<Item = (&'a [u8], u32)> + 'a>;
    let mut iters: Vec<(usize, Entries<'_>)> = Vec::new();
    for (shard, g) in guards {
        let Some(ix) = g.dbs[db].collections.get(coll).and_then(|cs| {
            cs.indexes
                .iter()
                .filter_map(IndexShard::as_ordered)
                .find(|ix| Arc::ptr_eq(&ix.spec, spec))
        }) else {
            continue;
        };
        iters.push((*shard, Box::new(ix.entries_with_slots())));
    }
    let mut heap = BinaryHeap::new();
    for (i, (_, it)) in iters.iter_mut().enumerate() {
        if let Some((k, slot)) = it.next() {
            heap.push(Reverse((k, i, slot)));
        }
    }
    let mut prev: Option<&[u8]> = None;
    while let Some(Reverse((k, i, slot))) = heap.pop() {
        if prev == Some(k) {
            return Some((iters[i].0, slot));
        }
        prev = Some(k);
        if let Some((k2, s2)) = iters[i].1.next() {
            heap.push(Reverse((k2, i, s2)));
        }
    }
    None
}

/// Removes the index of `spec` from every shard (a failed build).
fn drop_by_spec(ctx: &Ctx<'_>, db: usize, coll: &str, spec: &Arc<IndexSpec>) {
    let store = &ctx.server.store;
    let all: Vec<usize> = (0..store.shard_count()).collect();
    let mut dropped = Vec::new();
    {
        let mut guards = store.lock_many(&all);
        for (_, g) in guards.iter_mut() {
            if let Some(cs) = g.dbs[db].collections.get_mut(coll) {
                if let Some(p) = cs.indexes.iter().position(
                    |ix| matches!(ix, IndexShard::Ordered(o) if Arc::ptr_eq(&o.spec, spec)),
                ) {
                    dropped.push(cs.indexes.remove(p));
                    if spec.expire_after.is_some() {
                        cs.drop_ttl_index(&spec.name);
                    }
                    cs.sync_memory();
                }
            }
        }
    }
    // Freed outside the locks.
    drop(dropped);
}

// ---------------------------------------------------------------------------------------
// DOC.DROPINDEX coll name / DOC.INDEXES coll

pub fn doc_dropindex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let coll = text(&args[1]);
    let name = text(&args[2]);
    let db = ctx.client.db;
    if name == "_id_" {
        return Reply::error("ERR cannot drop _id index");
    }
    let store = &ctx.server.store;
    let _catalog = store.catalog_read();
    let all: Vec<usize> = (0..store.shard_count()).collect();
    let mut dropped = Vec::new();
    {
        let mut guards = store.lock_many(&all);
        if !guards[0].1.dbs[db].collections.contains_key(&coll) {
            return Reply::error(format!("ERR ns not found {db}.{coll}"));
        }
        let exists = guards[0].1.dbs[db]
            .collections
            .get(&coll)
            .is_some_and(|cs| name == "*" || cs.ordered_index(&name).is_some());
        if !exists {
            return Reply::error(format!("ERR index not found with name [{name}]"));
        }
        for (_, g) in guards.iter_mut() {
            if let Some(cs) = g.dbs[db].collections.get_mut(&coll) {
                let (gone, kept): (Vec<IndexShard>, Vec<IndexShard>) = std::mem::take(
                    &mut cs.indexes,
                )
                .into_iter()
                .partition(
                    |ix| matches!(ix, IndexShard::Ordered(o) if name == "*" || o.spec.name == name),
                );
                cs.indexes = kept;
                for ix in gone.iter().filter_map(IndexShard::as_ordered) {
                    // Dropping a TTL index stops expiry through it.
                    cs.drop_ttl_index(&ix.spec.name);
                }
                cs.sync_memory();
                dropped.extend(gone);
            }
        }
    }
    drop(dropped);
    Reply::Simple("OK")
}

pub fn doc_indexes(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let coll = text(&args[1]);
    let db = ctx.client.db;
    let (exists, specs) = {
        let g = ctx.server.store.lock(0);
        match g.dbs[db].collections.get(&coll) {
            // `expireAfterSeconds` as in force now (`DOC.EXPIREINDEX` changes it in the
            // wheels, MongoDB's collMod).
            Some(cs) => (
                true,
                specs_of(cs)
                    .into_iter()
                    .map(|s| {
                        let mut d = s.to_doc();
                        if let Some((_, t)) = cs.ttl.iter().find(|(n, _)| *n == s.name) {
                            d.insert("expireAfterSeconds", t.expire_after_secs);
                        }
                        d
                    })
                    .collect::<Vec<_>>(),
            ),
            None => (false, Vec::new()),
        }
    };
    if !exists {
        return Reply::Array(Vec::new());
    }
    let mut out = vec![Reply::bulk(codec::doc_json(
        &bson::doc! {"name": "_id_", "key": {"_id": 1}, "unique": true},
    ))];
    out.extend(specs.iter().map(|d| Reply::bulk(codec::doc_json(d))));
    Reply::Array(out)
}

// ---------------------------------------------------------------------------------------
// DOC.EXPLAIN coll filter [SORT s] [SKIP n] [LIMIT n]

struct QueryOpts {
    filter: Node,
    sort: Option<Sort>,
    sort_keys: Vec<(Vec<String>, bool)>,
    skip: usize,
    limit: Option<usize>,
}

fn parse_query_opts(c: &Common<'_>) -> Result<QueryOpts, Reply> {
    let Some(f) = c.rest.first() else {
        return Err(crate::commands::wrong_arity("doc.explain"));
    };
    let filter = parse_filter(f, c)?;
    let mut o = QueryOpts {
        filter,
        sort: None,
        sort_keys: Vec::new(),
        skip: 0,
        limit: None,
    };
    let rest = c.rest;
    let mut i = 1;
    while i < rest.len() {
        let has_val = i + 1 < rest.len();
        if is(&rest[i], "SORT") && has_val {
            let d = parse_doc(&rest[i + 1], c)?;
            let sort = Sort::parse(&d).map_err(err)?;
            o.sort_keys = sort.keys().to_vec();
            o.sort = Some(sort);
            i += 2;
        } else if is(&rest[i], "SKIP") && has_val {
            match parse_i64(&rest[i + 1]) {
                Some(n) if n >= 0 => o.skip = n as usize,
                Some(_) => return Err(Reply::error("ERR SKIP must be non-negative")),
                None => return Err(Reply::error(NOT_AN_INTEGER)),
            }
            i += 2;
        } else if is(&rest[i], "LIMIT") && has_val {
            match parse_i64(&rest[i + 1]) {
                Some(0) => o.limit = None,
                Some(n) => o.limit = Some(n.unsigned_abs().min(usize::MAX as u64) as usize),
                None => return Err(Reply::error(NOT_AN_INTEGER)),
            }
            i += 2;
        } else {
            return Err(syntax_error());
        }
    }
    Ok(o)
}

pub fn doc_explain(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let c = match common(args) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let o = match parse_query_opts(&c) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let db = ctx.client.db;
    let store = &ctx.server.store;
    let _catalog = store.catalog_read();
    let started = Instant::now();
    let shards = shards_for(store, &o.filter);
    let keep = o.limit.map(|l| l.saturating_add(o.skip));
    let mut stats = ScanStats::default();
    let mut plan = if o.filter.id_equality().is_some() {
        "IDHACK"
    } else {
        "COLLSCAN"
    };
    let mut index: Option<String> = None;
    let mut found: Vec<Vec<Bson>> = Vec::new();
    let mut touched = 0;
    for s in shards {
        let guard = store.lock(s);
        let Some(cs) = guard.dbs[db].collections.get(&c.coll) else {
            continue;
        };
        touched += 1;
        let mut mine: Vec<Vec<Bson>> = Vec::new();
        let mut st = ScanStats::default();
        // Unsorted (or sorted by the index), a shard needs at most skip + limit matches.
        let (p, ix, _) = cs.scan_planned(&o.filter, &o.sort_keys, keep, &mut st, &mut |_, raw| {
            let key = match (&o.sort, Document::try_from(raw)) {
                (Some(s), Ok(doc)) => s.key(&doc),
                _ => Vec::new(),
            };
            mine.push(key);
            true
        });
        drop(guard);
        plan = p;
        index = ix.or(index);
        stats.add(&st);
        if let Some(sort) = &o.sort {
            mine.sort_by(|a, b| sort.compare(a, b));
        }
        if let Some(k) = keep {
            mine.truncate(k);
        }
        found.extend(mine);
        if o.sort.is_none() && keep.is_some_and(|k| found.len() >= k) {
            break;
        }
    }
    let total = found.len();
    let returned = total
        .saturating_sub(o.skip)
        .min(o.limit.unwrap_or(usize::MAX));
    let micros = started.elapsed().as_micros() as i64;
    let mut out = Document::new();
    out.insert("plan", plan);
    out.insert("index", index.map(Bson::String).unwrap_or(Bson::Null));
    out.insert("keysExamined", stats.keys_examined as i64);
    out.insert("docsExamined", stats.docs_examined as i64);
    out.insert("nReturned", returned as i64);
    out.insert("executionTimeMicros", micros);
    out.insert("shards", touched as i64);
    Reply::bulk(codec::doc_json(&out))
}

// ---------------------------------------------------------------------------------------
// DOC.AGGREGATE coll [BSON] pipeline

/// The top-level `fields` of a stored document, decoded from its raw BSON, in the
/// document's order (inclusion projections keep it).
fn partial_doc(raw: &RawDocumentBuf, fields: &[String]) -> Document {
    let mut d = Document::new();
    for (k, v) in raw.iter().flatten() {
        if fields.iter().any(|f| f == k.as_str()) {
            if let Ok(b) = Bson::try_from(v) {
                d.insert(k.to_string(), b);
            }
        }
    }
    d
}

/// The pipeline argument: a JSON array of stages, or with `BSON` a raw BSON document whose
/// values are the stages in order (a BSON array).
fn parse_pipeline(arg: &[u8], c: &Common<'_>) -> Result<Vec<Bson>, Reply> {
    let mut stages = if c.bson {
        codec::parse_bson(arg)
            .map_err(err)?
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    } else {
        let value: serde_json::Value =
            serde_json::from_slice(arg).map_err(|e| err(codec::json_error(arg, &e)))?;
        if !value.is_array() {
            return Err(Reply::error(
                "ERR 'pipeline' must be an array of stage objects",
            ));
        }
        match Bson::try_from(value) {
            Ok(Bson::Array(a)) => a,
            Ok(_) => {
                return Err(Reply::error(
                    "ERR 'pipeline' must be an array of stage objects",
                ))
            }
            Err(e) => {
                return Err(Reply::error(format!(
                    "ERR invalid Extended JSON: {}",
                    e.to_string().replace(['\r', '\n'], " ")
                )))
            }
        }
    };
    for s in stages.iter_mut() {
        codec::replace_now_value(s, c.now);
    }
    Ok(stages)
}

pub fn doc_aggregate(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let c = match common(args) {
        Ok(c) => c,
        Err(e) => return e,
    };
    if c.rest.len() != 1 {
        return syntax_error();
    }
    let stages = match parse_pipeline(&c.rest[0], &c) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let mut pipeline = match Pipeline::parse(&stages, &aggregate::compile_match, c.now) {
        Ok(p) => p,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    // A leading $match goes through the planner: each shard fetches only its matches.
    let filter = match pipeline.take_leading_match() {
        Some(f) => match crate::documents::query::parse(&f) {
            Ok(n) => n,
            Err(e) => return err(e),
        },
        None => Node::And(Vec::new()),
    };
    // Only the fields the pipeline reads are decoded from the stored BSON.
    let needed = pipeline.needed_fields();
    let db = ctx.client.db;
    let store = &ctx.server.store;
    let _catalog = store.catalog_read();
    let shards = shards_for(store, &filter);
    let mut parts: Vec<Partial> = Vec::with_capacity(shards.len());
    for s in shards {
        // The shard's matches are copied out under its lock; the pipeline runs without it.
        let mut docs = Vec::new();
        {
            let guard = store.lock(s);
            if let Some(cs) = guard.dbs[db].collections.get(&c.coll) {
                cs.scan(&filter, &mut |_, raw| {
                    match &needed {
                        Some(fields) => docs.push(partial_doc(raw, fields)),
                        None => {
                            if let Ok(doc) = Document::try_from(raw) {
                                docs.push(doc);
                            }
                        }
                    }
                    true
                });
            }
        }
        match pipeline.run_shard(docs) {
            Ok(p) => parts.push(p),
            Err(e) => return Reply::error(format!("ERR {e}")),
        }
    }
    match pipeline.merge(parts) {
        Ok(docs) => Reply::Array(
            docs.into_iter()
                .map(|d| doc_reply(d, None, c.bson))
                .collect(),
        ),
        Err(e) => Reply::error(format!("ERR {e}")),
    }
}
