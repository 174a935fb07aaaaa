//! Document family: the `DOC.*` commands over BSON collections (SPEC §5), their table rows
//! here and their handlers by concern: CRUD (`crud.rs`), explain and aggregation
//! (`query.rs`), indexes and TTL indexes (`indexes.rs`), the collection lifecycle
//! (`lifecycle.rs`), and what they all parse alike (`parse.rs`). Handlers parse and format;
//! what a read or write means lives in `store::collections`.
//!
//! The collection name sits in the key position, so cluster-aware clients, `COMMAND GETKEYS`
//! and (later) ACL key patterns treat it as the key.

mod crud;
mod indexes;
mod lifecycle;
mod parse;
mod query;
pub(crate) mod transfer;

use crate::commands::spec::{acl, family, flag::*, CommandSpec};

const DOC: CommandSpec = family("document", acl::DOCUMENT).flags(COLLECTION);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    DOC.cmd("doc.insert", -3, crud::doc_insert).flags(WRITE | DENYOOM).key()
        .doc("1.0.0", "Inserts one or more documents (Extended JSON, or raw BSON with BSON) and returns their _ids; all or nothing.")
        .complexity("O(N) where N is the number of documents inserted, times the number of indexes")
        .args("collection:key [BSON] document... [J]"),
    DOC.cmd("doc.find", -3, crud::doc_find).flags(WRITE).key().acl(acl::READ)
        .doc("1.0.0", "Returns the documents matching a MongoDB query filter; TOUCH refreshes their TTL-indexed dates in the same step.")
        .complexity("O(log N + M) with an index, O(N) for a collection scan, where M is the number of documents returned")
        .args("collection:key [BSON] filter [PROJECTION=projection] [SORT=sort] [SKIP=skip:integer] [LIMIT=limit:integer] [TOUCH]"),
    DOC.cmd("doc.findone", -3, crud::doc_findone).flags(WRITE).key().acl(acl::READ)
        .doc("1.0.0", "Returns the first document matching a filter, or null; TOUCH refreshes its TTL-indexed dates.")
        .complexity("O(log N) with an index or by _id, O(N) for a collection scan")
        .args("collection:key [BSON] filter [PROJECTION=projection] [SORT=sort] [TOUCH]"),
    DOC.cmd("doc.count", -3, crud::doc_count).flags(READONLY).key()
        .doc("1.0.0", "Counts the documents matching a filter.")
        .complexity("O(log N + M) with an index, O(N) for a collection scan")
        .args("collection:key [BSON] filter"),
    DOC.cmd("doc.touch", -3, crud::doc_touch).flags(WRITE).key()
        .doc("1.0.0", "Sets the date of every TTL index of the collection (or just FIELD) to now on every matching document; returns how many were touched.")
        .complexity("O(M) where M is the number of matching documents, plus the cost of finding them")
        .args("collection:key [BSON] filter [FIELD=field] [J]"),
    DOC.cmd("doc.update", -4, crud::doc_update).flags(WRITE | DENYOOM).key()
        .doc("1.0.0", "Updates the first (or with MULTI every) matching document with update operators or a replacement; UPSERT inserts when nothing matches. Replies [matched, modified, upserted _id or null].")
        .complexity("O(M) where M is the number of documents updated, plus the cost of finding them")
        .args("collection:key [BSON] filter update [MULTI] [UPSERT] [J]"),
    DOC.cmd("doc.delete", -3, crud::doc_delete).flags(WRITE).key()
        .doc("1.0.0", "Deletes the matching documents (with LIMIT 1, only the first) and returns how many were deleted.")
        .complexity("O(M) where M is the number of documents deleted, plus the cost of finding them")
        .args("collection:key [BSON] filter [LIMIT=limit:integer] [J]"),
    DOC.cmd("doc.expireindex", 4, indexes::doc_expireindex).flags(WRITE | JOURNAL_SELF).key()
        .doc("1.0.0", "Creates a TTL index on a date field, or changes the expireAfterSeconds of the existing one (MongoDB's collMod); returns the index name.")
        .complexity("O(N) to build a new index, O(1) to change expireAfterSeconds")
        .args("collection:key field seconds:integer"),
    DOC.cmd("doc.createindex", -3, indexes::doc_createindex).flags(WRITE | DENYOOM | JOURNAL_SELF).key()
        .doc("1.0.0", "Creates a secondary index (single-field or compound, ascending or descending, optionally unique or TTL); returns its name.")
        .complexity("O(N log N) where N is the number of documents in the collection")
        .args("collection:key keys [UNIQUE] [NAME=name] [EXPIREAFTER=seconds:integer]"),
    DOC.cmd("doc.dropindex", 3, indexes::doc_dropindex).flags(WRITE | JOURNAL_SELF).key()
        .doc("1.0.0", "Drops an index by name; dropping a TTL index stops expiry through it.")
        .complexity("O(N) where N is the number of entries in the index")
        .args("collection:key name"),
    DOC.cmd("doc.indexes", 2, indexes::doc_indexes).flags(READONLY).key()
        .doc("1.0.0", "Lists the indexes of a collection as JSON specs (name, key, unique, expireAfterSeconds).")
        .complexity("O(I) where I is the number of indexes").args("collection:key"),
    DOC.cmd("doc.explain", -3, query::doc_explain).flags(READONLY).key()
        .doc("1.0.0", "Runs a query and returns its plan as JSON: plan, index, keysExamined, docsExamined, nReturned, executionTimeMicros, shards.")
        .complexity("The cost of the query it explains")
        .args("collection:key [BSON] filter [SORT=sort] [SKIP=skip:integer] [LIMIT=limit:integer]"),
    DOC.cmd("doc.aggregate", -3, query::doc_aggregate).flags(READONLY).key()
        .doc("1.0.0", "Runs an aggregation pipeline ($match $project $addFields $set $unset $group $sort $skip $limit $count $unwind) and returns the resulting documents.")
        .complexity("O(N) in the documents entering the pipeline")
        .args("collection:key [BSON] pipeline"),
    DOC.cmd("doc.create", -2, lifecycle::doc_create).flags(WRITE | DENYOOM | JOURNAL_SELF).key()
        .doc("1.0.0", "Creates a collection explicitly, optionally capped by SIZE bytes and MAX documents, optionally appending one entry per document change to the stream CHANGES (op, ns, _id, doc: the document after an insert, update or replace); errors if it exists.")
        .args("collection:key [capped:{CAPPED SIZE=bytes:integer [MAX=docs:integer]}] [CHANGES=changes:{stream:key [MAXLEN=maxlen:{[operator:(equal='='|approximately='~')] threshold:integer}]}]"),
    DOC.cmd("doc.collmod", -4, lifecycle::doc_collmod).flags(WRITE | JOURNAL_SELF).key()
        .doc("1.0.0", "Sets the stream a collection's changes are appended to (one entry per insert, update, replace, delete, expiry; trimmed by MAXLEN as XADD), or with CHANGES OFF stops appending (MongoDB's collMod).")
        .complexity("O(1)")
        .args("collection:key CHANGES=changes:(OFF|target:{stream:key [MAXLEN=maxlen:{[operator:(equal='='|approximately='~')] threshold:integer}]})"),
    DOC.cmd("doc.drop", 2, lifecycle::doc_drop).flags(WRITE | JOURNAL_SELF).key()
        .doc("1.0.0", "Drops a collection with its documents and indexes; returns 1 if it existed, else 0.")
        .complexity("O(N) where N is the number of documents").args("collection:key"),
    DOC.cmd("doc.rename", -3, lifecycle::doc_rename).flags(WRITE | JOURNAL_SELF).keys(1, 2, 1)
        .doc("1.0.0", "Renames a collection atomically, keeping its indexes, TTL indexes and capped state; errors if the target exists unless DROPTARGET.")
        .args("source:key destination:key [DROPTARGET]"),
    DOC.cmd("doc.collections", 1, lifecycle::doc_collections).flags(READONLY)
        .doc("1.0.0", "Lists the collections of the selected database.")
        .complexity("O(C) where C is the number of collections"),
    DOC.cmd("doc.dump", 2, transfer::doc_dump).flags(READONLY).key()
        .doc("1.0.0", "Returns a collection serialized whole (options, indexes, documents) for DOC.RESTORE, as DUMP serializes a key; nil when there is no collection.")
        .complexity("O(N) where N is the number of documents")
        .args("collection:key"),
    DOC.cmd("doc.restore", -3, transfer::doc_restore).flags(WRITE | DENYOOM | JOURNAL_SELF).key().acl(acl::DANGEROUS)
        .doc("1.0.0", "Creates a collection whole from a DOC.DUMP payload (what MIGRATE sends for a collection), in one step; BUSYKEY if it exists, unless REPLACE.")
        .complexity("O(N log N) where N is the number of documents, times the number of indexes")
        .args("collection:key serialized-value [REPLACE]"),
    DOC.cmd("doc.restore-asking", -3, transfer::doc_restore).flags(WRITE | DENYOOM | ASKING | JOURNAL_SELF).key().acl(acl::DANGEROUS)
        .doc("1.0.0", "An internal command for migrating collections in a cluster: DOC.RESTORE on a slot being imported.")
        .complexity("O(N log N) where N is the number of documents, times the number of indexes")
        .args("collection:key serialized-value [REPLACE]"),
    DOC.cmd("doc.stats", 2, lifecycle::doc_stats).flags(READONLY).key()
        .doc("1.0.0", "Returns collection statistics as JSON: count, size, avgObjSize, capped, max, indexes with sizes, ttl counters.")
        .complexity("O(S) where S is the number of shards").args("collection:key"),
];
