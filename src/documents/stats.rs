//! What `DOC.STATS` and `INFO documents` report about whole collections: index sizes and
//! totals over the shards' parts.

use crate::documents::collection::{CollectionShard, IndexShard, TtlStats};
use bson::{doc, Document};

/// Index name → estimated bytes of one part: `_id_` first, then the secondary and TTL
/// indexes.
pub fn index_sizes(cs: &CollectionShard) -> Vec<(String, usize)> {
    let mut out = vec![("_id_".to_string(), cs.id_index_bytes())];
    for ix in &cs.indexes {
        match ix {
            IndexShard::Ordered(o) => out.push((o.spec.name.clone(), ix.bytes())),
        }
    }
    // A TTL index's wheel counts with its ordered part.
    for (name, t) in &cs.ttl {
        match out.iter_mut().find(|(n, _)| n == name) {
            Some((_, b)) => *b += t.memory_bytes(),
            None => out.push((name.clone(), t.memory_bytes())),
        }
    }
    out
}

/// Sums over every shard's part of one collection (`DOC.STATS`) or over everything
/// (`INFO documents`).
#[derive(Debug, Default)]
pub struct Totals {
    pub collections: usize,
    pub documents: u64,
    pub document_bytes: u64,
    pub index_bytes: u64,
    /// Index name → bytes, in first-seen order.
    pub indexes: Vec<(String, u64)>,
    /// The TTL monitor's figures, combined as [`TtlStats::combine`] does (per collection).
    pub ttl: TtlStats,
    parts: usize,
}

impl Totals {
    pub fn add(&mut self, cs: &CollectionShard) {
        self.documents += cs.len() as u64;
        self.document_bytes += cs.bytes() as u64;
        for (name, b) in index_sizes(cs) {
            self.index_bytes += b as u64;
            match self.indexes.iter_mut().find(|(n, _)| *n == name) {
                Some((_, t)) => *t += b as u64,
                None => self.indexes.push((name, b as u64)),
            }
        }
        self.ttl = match self.parts {
            0 => cs.ttl_stats,
            _ => TtlStats::combine([self.ttl, cs.ttl_stats]),
        };
        self.parts += 1;
    }

    /// `DOC.STATS`'s document (MongoDB's `collStats` names where one exists).
    pub fn stats(&self, ns: &str, cs: &CollectionShard) -> Document {
        let mut d = doc! {
            "ns": ns,
            "count": self.documents as i64,
            "size": self.document_bytes as i64,
            "avgObjSize": self.document_bytes.checked_div(self.documents).unwrap_or(0) as i64,
            "capped": cs.is_capped(),
        };
        if let Some(c) = &cs.meta.capped {
            if let Some(m) = c.max_docs {
                d.insert("max", m.min(i64::MAX as u64) as i64);
            }
            d.insert("maxSize", c.max_size.min(i64::MAX as u64) as i64);
        }
        let mut ix = Document::new();
        for (name, b) in &self.indexes {
            ix.insert(name.clone(), *b as i64);
        }
        d.insert("nindexes", self.indexes.len() as i64);
        d.insert("indexes", ix);
        d.insert("totalIndexSize", self.index_bytes as i64);
        d.insert(
            "ttl",
            doc! {
                "passes": self.ttl.passes as i64,
                "deletedDocuments": self.ttl.deleted_documents as i64,
            },
        );
        d
    }
}
