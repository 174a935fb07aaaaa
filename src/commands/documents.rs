//! Document family: `DOC.*` commands over BSON collections (SPEC §5). The collection name sits
//! in the key position so cluster-aware clients and `COMMAND GETKEYS` find it.

use crate::commands::spec::{flag, Arg, CommandSpec};

const COLL: Arg = Arg::key("collection");
const BSON: Arg = Arg::token("bson", "BSON").optional();
const J: Arg = Arg::token("j", "J").optional();
const FILTER: Arg = Arg::string("filter");
const PROJECTION: Arg = Arg::string("projection")
    .with_token("PROJECTION")
    .optional();
const SORT: Arg = Arg::string("sort").with_token("SORT").optional();
const SKIP: Arg = Arg::integer("skip").with_token("SKIP").optional();
const LIMIT: Arg = Arg::integer("limit").with_token("LIMIT").optional();
const TOUCH: Arg = Arg::token("touch", "TOUCH").optional();

const DOC: CommandSpec = CommandSpec {
    group: "document",
    since: "1.0.0",
    first_key: 1,
    last_key: 1,
    step: 1,
    ..CommandSpec::DEFAULT
};
const READ: &[&str] = &["document", "read", "slow"];
const WRITE: &[&str] = &["document", "write", "slow"];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "doc.insert",
        arity: -3,
        flags: flag::WRITE | flag::DENYOOM,
        acl: WRITE,
        summary: "Inserts one or more documents (Extended JSON, or raw BSON with BSON) and returns their _ids; all or nothing.",
        complexity: "O(N) where N is the number of documents inserted, times the number of indexes",
        args: &[COLL, BSON, Arg::string("document").multiple(), J],
        ..DOC
    },
    CommandSpec {
        name: "doc.find",
        arity: -3,
        flags: flag::READONLY,
        acl: READ,
        summary: "Returns the documents matching a MongoDB query filter; TOUCH refreshes their TTL-indexed dates in the same step.",
        complexity: "O(log N + M) with an index, O(N) for a collection scan, where M is the number of documents returned",
        args: &[COLL, BSON, FILTER, PROJECTION, SORT, SKIP, LIMIT, TOUCH],
        ..DOC
    },
    CommandSpec {
        name: "doc.findone",
        arity: -3,
        flags: flag::READONLY,
        acl: READ,
        summary: "Returns the first document matching a filter, or null; TOUCH refreshes its TTL-indexed dates.",
        complexity: "O(log N) with an index or by _id, O(N) for a collection scan",
        args: &[COLL, BSON, FILTER, PROJECTION, SORT, TOUCH],
        ..DOC
    },
    CommandSpec {
        name: "doc.count",
        arity: -3,
        flags: flag::READONLY,
        acl: READ,
        summary: "Counts the documents matching a filter.",
        complexity: "O(log N + M) with an index, O(N) for a collection scan",
        args: &[COLL, BSON, FILTER],
        ..DOC
    },
    CommandSpec {
        name: "doc.touch",
        arity: -3,
        flags: flag::WRITE,
        acl: WRITE,
        summary: "Sets the date of every TTL index of the collection (or just FIELD) to now on every matching document; returns how many were touched.",
        complexity: "O(M) where M is the number of matching documents, plus the cost of finding them",
        args: &[COLL, BSON, FILTER, Arg::string("field").with_token("FIELD").optional(), J],
        ..DOC
    },
    CommandSpec {
        name: "doc.update",
        arity: -4,
        flags: flag::WRITE | flag::DENYOOM,
        acl: WRITE,
        summary: "Updates the first (or with MULTI every) matching document with update operators or a replacement; UPSERT inserts when nothing matches. Replies [matched, modified, upserted _id or null].",
        complexity: "O(M) where M is the number of documents updated, plus the cost of finding them",
        args: &[
            COLL,
            BSON,
            FILTER,
            Arg::string("update"),
            Arg::token("multi", "MULTI").optional(),
            Arg::token("upsert", "UPSERT").optional(),
            J,
        ],
        ..DOC
    },
    CommandSpec {
        name: "doc.delete",
        arity: -3,
        flags: flag::WRITE,
        acl: WRITE,
        summary: "Deletes the matching documents (with LIMIT 1, only the first) and returns how many were deleted.",
        complexity: "O(M) where M is the number of documents deleted, plus the cost of finding them",
        args: &[COLL, BSON, FILTER, Arg::integer("limit").with_token("LIMIT").optional(), J],
        ..DOC
    },
    CommandSpec {
        name: "doc.expireindex",
        arity: 4,
        flags: flag::WRITE,
        acl: WRITE,
        summary: "Creates a TTL index on a date field, or changes the expireAfterSeconds of the existing one (MongoDB's collMod); returns the index name.",
        complexity: "O(N) to build a new index, O(1) to change expireAfterSeconds",
        args: &[COLL, Arg::string("field"), Arg::integer("seconds")],
        ..DOC
    },
    CommandSpec {
        name: "doc.createindex",
        arity: -3,
        flags: flag::WRITE | flag::DENYOOM,
        acl: WRITE,
        summary: "Creates a secondary index (single-field or compound, ascending or descending, optionally unique or TTL); returns its name.",
        complexity: "O(N log N) where N is the number of documents in the collection",
        args: &[
            COLL,
            Arg::string("keys"),
            Arg::token("unique", "UNIQUE").optional(),
            Arg::string("name").with_token("NAME").optional(),
            Arg::integer("seconds").with_token("EXPIREAFTER").optional(),
        ],
        ..DOC
    },
    CommandSpec {
        name: "doc.dropindex",
        arity: 3,
        flags: flag::WRITE,
        acl: WRITE,
        summary: "Drops an index by name; dropping a TTL index stops expiry through it.",
        complexity: "O(N) where N is the number of entries in the index",
        args: &[COLL, Arg::string("name")],
        ..DOC
    },
    CommandSpec {
        name: "doc.indexes",
        arity: 2,
        flags: flag::READONLY,
        acl: READ,
        summary: "Lists the indexes of a collection as JSON specs (name, key, unique, expireAfterSeconds).",
        complexity: "O(I) where I is the number of indexes",
        args: &[COLL],
        ..DOC
    },
    CommandSpec {
        name: "doc.explain",
        arity: -3,
        flags: flag::READONLY,
        acl: READ,
        summary: "Runs a query and returns its plan as JSON: plan, index, keysExamined, docsExamined, nReturned, executionTimeMicros, shards.",
        complexity: "The cost of the query it explains",
        args: &[COLL, BSON, FILTER, SORT, SKIP, LIMIT],
        ..DOC
    },
    CommandSpec {
        name: "doc.aggregate",
        arity: -3,
        flags: flag::READONLY,
        acl: READ,
        summary: "Runs an aggregation pipeline ($match $project $addFields $set $unset $group $sort $skip $limit $count $unwind) and returns the resulting documents.",
        complexity: "O(N) in the documents entering the pipeline",
        args: &[COLL, BSON, Arg::string("pipeline")],
        ..DOC
    },
    CommandSpec {
        name: "doc.create",
        arity: -2,
        flags: flag::WRITE | flag::DENYOOM,
        acl: WRITE,
        summary: "Creates a collection explicitly, optionally capped by SIZE bytes and MAX documents; errors if it exists.",
        args: &[
            COLL,
            Arg::block(
                "capped",
                &[
                    Arg::token("capped", "CAPPED"),
                    Arg::integer("bytes").with_token("SIZE"),
                    Arg::integer("docs").with_token("MAX").optional(),
                ],
            )
            .optional(),
        ],
        ..DOC
    },
    CommandSpec {
        name: "doc.drop",
        arity: 2,
        flags: flag::WRITE,
        acl: WRITE,
        summary: "Drops a collection with its documents and indexes; returns 1 if it existed, else 0.",
        complexity: "O(N) where N is the number of documents",
        args: &[COLL],
        ..DOC
    },
    CommandSpec {
        name: "doc.rename",
        arity: -3,
        flags: flag::WRITE,
        acl: WRITE,
        last_key: 2,
        summary: "Renames a collection atomically, keeping its indexes, TTL indexes and capped state; errors if the target exists unless DROPTARGET.",
        args: &[
            Arg::key("source"),
            Arg::key("destination"),
            Arg::token("droptarget", "DROPTARGET").optional(),
        ],
        ..DOC
    },
    CommandSpec {
        name: "doc.collections",
        arity: 1,
        flags: flag::READONLY,
        acl: READ,
        first_key: 0,
        last_key: 0,
        step: 0,
        summary: "Lists the collections of the selected database.",
        complexity: "O(C) where C is the number of collections",
        ..DOC
    },
    CommandSpec {
        name: "doc.stats",
        arity: 2,
        flags: flag::READONLY,
        acl: READ,
        summary: "Returns collection statistics as JSON: count, size, avgObjSize, capped, max, indexes with sizes, ttl counters.",
        complexity: "O(S) where S is the number of shards",
        args: &[COLL],
        ..DOC
    },
];
