//! Document writes: insert, update (and upsert), delete, touch.
//!
//! Every write follows the same order so a failure changes nothing: parse and validate
//! (the caller), lock, check everything that can fail (index keys, `_id` duplicates, capped
//! bounds), claim unique keys last (the one check that reaches beyond the locked shards,
//! given back if a later claim of the same write fails), then change the parts and report
//! each change to the hooks. An expired document met on the way is purged (and reported)
//! at once, whatever happens to the write after.

use super::{
    check_keyable, check_keyable_in, with_code, Change, Coll, DocResult, Guards, Prepared,
};
use crate::documents::capped;
use crate::documents::codec;
use crate::documents::codec::{Fixed, NewDoc, SetValue};
use crate::documents::collection::{CollectionShard, InPlace, UniqueClaims};
use crate::documents::query::Node;
use crate::documents::update::{self, Update};
use bson::{Bson, DateTime, Document, RawDocument, RawDocumentBuf};

/// `DOC.UPDATE`'s reply: documents matched, documents changed, the upserted `_id`.
#[derive(Debug, PartialEq)]
pub struct UpdateOutcome {
    pub matched: u64,
    pub modified: u64,
    pub upserted: Option<Bson>,
}

/// Where a guard of `shard` sits in `guards`.
fn position(guards: &Guards<'_>, shard: usize) -> DocResult<usize> {
    guards
        .iter()
        .position(|(i, _)| *i == shard)
        .ok_or_else(|| "ERR internal: shard not locked".to_string())
}

/// Documents of a capped collection keep their size, so the bound stays exact without
/// trimming on update (MongoDB's rule and error).
fn capped_same_size(cs: &CollectionShard, old: usize, new: usize) -> DocResult<()> {
    if cs.is_capped() && old != new {
        return Err(format!(
            "ERR Cannot change the size of a document in a capped collection: {old} != {new}"
        ));
    }
    Ok(())
}

fn release_all(claims: Vec<UniqueClaims>) {
    for c in claims {
        c.release();
    }
}

impl Coll<'_> {
    /// Inserts `docs`, all or nothing; returns their `_id`s in order.
    pub fn insert(&self, docs: Vec<NewDoc>, max_size: usize) -> DocResult<Vec<Bson>> {
        let mut batch = Vec::with_capacity(docs.len().min(1024));
        for doc in docs {
            batch.push(self.store.prepare_new(doc, max_size)?);
        }
        // (One document cannot repeat its own `_id`: no set for the commonest insert.)
        if batch.len() > 1 {
            let mut seen = hashbrown::HashSet::with_capacity(batch.len());
            for p in &batch {
                if !seen.insert(p.key.as_slice()) {
                    return Err(self.dup_id(&p.id));
                }
            }
        }
        // One document, one shard: no vector for it.
        let (one, mut many);
        let shards: &[usize] = match batch.as_slice() {
            [p] => {
                one = [p.shard];
                &one
            }
            _ => {
                many = batch.iter().map(|p| p.shard).collect::<Vec<usize>>();
                many.sort_unstable();
                many.dedup();
                &many
            }
        };
        let Some(mut guards) = self.lock_for_write(shards, true, CollectionShard::is_capped) else {
            return Err("ERR internal: collection vanished".into());
        };
        self.insert_locked(&mut guards, batch)
    }

    /// The checks and changes of an insert, under the locks of every shard in `batch`.
    fn insert_locked(&self, guards: &mut Guards<'_>, batch: Vec<Prepared>) -> DocResult<Vec<Bson>> {
        let Some(first) = guards.first().and_then(|(_, g)| self.part(g)) else {
            return Err("ERR internal: collection vanished".into());
        };
        let capped = first.meta.capped.clone();
        for p in &batch {
            check_keyable_in(first, &p.raw)?;
            if let Some(spec) = &capped {
                capped::check_fits(spec, p.raw.as_bytes().len())?;
            }
        }
        // Only the claims that hold keys are kept (to give back on failure): without a
        // unique index the vector never allocates.
        let mut claims = Vec::new();
        for p in &batch {
            let i = position(guards, p.shard)?;
            let Some(cs) = self.part_mut(&mut guards[i].1) else {
                continue;
            };
            // An expired document is gone for every read and write, a duplicate check
            // included.
            self.purge_if_due(cs, &p.key);
            if cs.contains_id(&p.key) {
                release_all(claims);
                return Err(self.dup_id(&p.id));
            }
            match cs.claim_unique(&p.raw, &p.key) {
                Ok(c) if c.is_empty() => {}
                Ok(c) => claims.push(c),
                Err(spec) => {
                    release_all(claims);
                    return Err(self.dup_key(&spec, &p.raw));
                }
            }
        }
        let mut ids = Vec::with_capacity(batch.len());
        for p in batch {
            let i = position(guards, p.shard)?;
            let Some(cs) = self.part_mut(&mut guards[i].1) else {
                continue;
            };
            let slot = cs.insert(p.key, p.raw);
            if let Some(doc) = cs.get(slot) {
                self.report(&cs.meta.changes, Change::Insert(doc));
            }
            ids.push(p.id);
        }
        if capped.is_some() {
            self.trim_capped(guards);
        }
        Ok(ids)
    }

    /// Applies `upd` to the first match (every match with `multi`), inserting a document
    /// built from the filter and the update when nothing matches and `upsert` is set.
    /// Every shard the filter can match in is locked at once, so a MULTI update is all or
    /// nothing and an upsert's "no match, insert" is one step.
    pub fn update(
        &self,
        filter: &Node,
        upd: &Update,
        multi: bool,
        upsert: bool,
        now: DateTime,
        max_size: usize,
    ) -> DocResult<UpdateOutcome> {
        if multi && matches!(upd, Update::Replace(_)) {
            return Err("ERR multi update is not supported for replacement-style update".into());
        }
        let shards = self.shards_for(filter);
        // An upsert into a capped collection may trim it: it holds every shard.
        let Some(mut guards) = self.lock_for_write(&shards, upsert, |cs| upsert && cs.is_capped())
        else {
            return Ok(UpdateOutcome {
                matched: 0,
                modified: 0,
                upserted: None,
            });
        };
        if let Some(sets) = upd.scalar_sets(now) {
            if let Some(out) = self.update_by_id_in_place(&mut guards, &sets, max_size, |cs| {
                cs.lookup_id(filter).ok().flatten().map(|(slot, _)| slot)
            }) {
                return Ok(out);
            }
        }
        let mut changes: Vec<(usize, u32, RawDocumentBuf)> = Vec::new();
        let mut matched = 0u64;
        for (_, g) in guards.iter_mut() {
            if let Some(cs) = self.part_mut(g) {
                cs.prepare(filter, &[]);
            }
        }
        'shards: for (gi, (_, g)) in guards.iter().enumerate() {
            let Some(cs) = self.part(g) else { continue };
            let mut hits: Vec<(u32, Document)> = Vec::new();
            let mut hit = |slot, raw: &RawDocument| {
                if let Ok(doc) = Document::try_from(raw) {
                    hits.push((slot, doc));
                }
                multi
            };
            // By `_id` alone: one lookup of the `_id` map, as `match_slots`.
            match cs.lookup_id(filter) {
                Ok(found) => {
                    if let Some((slot, raw)) = found {
                        hit(slot, raw);
                    }
                }
                Err(_) => cs.scan(filter, &mut hit),
            }
            for (slot, mut doc) in hits {
                matched += 1;
                upd.apply(&mut doc, now, false).map_err(with_code)?;
                codec::validate_stored(&doc).map_err(with_code)?;
                let raw = codec::to_raw(&doc, max_size).map_err(with_code)?;
                if let Some(old) = cs.get(slot) {
                    capped_same_size(cs, old.as_bytes().len(), raw.as_bytes().len())?;
                    // Modified means the stored bytes change (a new field order or type
                    // counts, as in MongoDB; `bson::Document` equality ignores order).
                    if old.as_bytes() != raw.as_bytes() {
                        changes.push((gi, slot, raw));
                    }
                }
                if !multi {
                    break 'shards;
                }
            }
        }
        if matched == 0 && upsert {
            let id = self.upsert_locked(&mut guards, filter, upd, now, max_size)?;
            return Ok(UpdateOutcome {
                matched: 0,
                modified: 0,
                upserted: Some(id),
            });
        }
        let specs = guards
            .first()
            .and_then(|(_, g)| self.part(g))
            .map(CollectionShard::index_specs)
            .unwrap_or_default();
        let mut claims = Vec::with_capacity(changes.len());
        for (gi, _, raw) in &changes {
            if let Err(e) = check_keyable(&specs, raw) {
                release_all(claims);
                return Err(e);
            }
            let Some(cs) = self.part(&guards[*gi].1) else {
                continue;
            };
            let owner = crate::documents::keys::encode(
                &raw.get("_id")
                    .ok()
                    .flatten()
                    .and_then(|v| Bson::try_from(v).ok())
                    .unwrap_or(Bson::Null),
            );
            match cs.claim_unique(raw, &owner) {
                Ok(c) => claims.push(c),
                Err(spec) => {
                    release_all(claims);
                    return Err(self.dup_key(&spec, raw));
                }
            }
        }
        let modified = changes.len() as u64;
        let replace = matches!(upd, Update::Replace(_));
        for (gi, slot, raw) in changes {
            let Some(cs) = self.part_mut(&mut guards[gi].1) else {
                continue;
            };
            if cs.replace(slot, raw).is_some() {
                self.report_update(cs, slot, replace);
            }
        }
        Ok(UpdateOutcome {
            matched,
            modified,
            upserted: None,
        })
    }

    /// `update` of the top-level `sets` (what `Update::scalar_sets` gives) on the document
    /// `filter` finds by `_id`, in place, without an `Update` built: `Some` when done, `None`
    /// when it does not apply (no such document or collection, a value the stored bytes
    /// cannot take in place, a capped upsert), having changed nothing but purging an expired
    /// document it met, and the caller runs the general `update` (which gives the same
    /// outcome for what this does). Why: for the commonest upsert, `DOC.UPDATE` by `_id`
    /// with `$set` and `$currentDate`, building the update operations was about a third of
    /// the command.
    pub fn update_sets_by_id(
        &self,
        filter: &Node,
        sets: &[(&str, SetValue<'_>)],
        upsert: bool,
        max_size: usize,
    ) -> Option<UpdateOutcome> {
        // The `_id`'s KeyString is built once, for the shard and the lookup.
        let key = crate::documents::keys::encode(filter.id_equality()?);
        self.update_sets_in_shard_of(&key, sets, upsert, max_size, |cs| {
            cs.lookup_id_key_for_write(filter, &key)
                .ok()
                .flatten()
                .map(|(slot, _)| slot)
        })
    }

    /// [`update_sets_by_id`](Self::update_sets_by_id) for a filter that is `{_id: v}`
    /// alone, `v` a string or an integer given as its KeyString (`query::id_key_json`):
    /// the filter's tree is made (by `filter`) only when the stored `_id` is of another
    /// type with the same KeyString, as a find by such a key does.
    pub fn update_sets_by_id_key(
        &self,
        key: &[u8],
        filter: impl FnOnce() -> Option<Node>,
        sets: &[(&str, SetValue<'_>)],
        upsert: bool,
        max_size: usize,
    ) -> Option<UpdateOutcome> {
        self.update_sets_in_shard_of(key, sets, upsert, max_size, |cs| {
            cs.lookup_id_scalar_for_write(key, filter)
                .map(|(slot, _)| slot)
        })
    }

    /// The shard of the `_id` KeyString `key` locked for the in-place update of `sets` on
    /// the document `find` gives there. Locked as `update` locks: a capped upsert holds
    /// every shard (and is then not done in place).
    fn update_sets_in_shard_of(
        &self,
        key: &[u8],
        sets: &[(&str, SetValue<'_>)],
        upsert: bool,
        max_size: usize,
        find: impl FnOnce(&CollectionShard) -> Option<u32>,
    ) -> Option<UpdateOutcome> {
        let shard = self.store.shard_of(key);
        let mut guards = self.lock_for_write(&[shard], false, |cs| upsert && cs.is_capped())?;
        self.update_by_id_in_place(&mut guards, sets, max_size, find)
    }

    /// An update of one document by `_id` that only sets top-level fields to fixed-width
    /// values or strings, written into the stored bytes (no decode, no re-encode, index
    /// entries moved directly). `None` when it does not apply (the general path runs;
    /// nothing changed).
    ///
    /// `find` gives the slot of the document the filter matches in the shard's part; none:
    /// the general path decides (an upsert inserts).
    fn update_by_id_in_place(
        &self,
        guards: &mut Guards<'_>,
        sets: &[(&str, SetValue<'_>)],
        max_size: usize,
        find: impl FnOnce(&CollectionShard) -> Option<u32>,
    ) -> Option<UpdateOutcome> {
        let [(_, g)] = guards.as_mut_slice() else {
            return None;
        };
        let cs = self.part_mut(g)?;
        cs.warm_index_keys(sets);
        let slot = find(cs)?;
        let modified = match cs.set_in_place(slot, sets, max_size) {
            InPlace::Changed => {
                self.report_update(cs, slot, false);
                1
            }
            InPlace::Unchanged => 0,
            InPlace::NotApplicable => return None,
        };
        Some(UpdateOutcome {
            matched: 1,
            modified,
            upserted: None,
        })
    }

    /// Reports the document in `slot` as changed (replaced whole with `replace`).
    fn report_update(&self, cs: &CollectionShard, slot: u32, replace: bool) {
        if let Some(doc) = cs.get(slot) {
            let change = if replace {
                Change::Replace(doc)
            } else {
                Change::Update(doc)
            };
            self.report(&cs.meta.changes, change);
        }
    }

    /// The insert of an upsert that matched nothing: the document the filter's equalities
    /// and the update make, into the shard of its `_id` (locked: an `_id` equality locks that
    /// very shard, any other filter every shard). Returns its `_id`.
    fn upsert_locked(
        &self,
        guards: &mut Guards<'_>,
        filter: &Node,
        upd: &Update,
        now: DateTime,
        max_size: usize,
    ) -> DocResult<Bson> {
        let base = update::upsert_base(filter).map_err(with_code)?;
        let mut doc = base.clone();
        upd.apply(&mut doc, now, true).map_err(with_code)?;
        if let (Update::Replace(_), Some(id)) = (upd, base.get("_id")) {
            if !doc.contains_key("_id") {
                let mut out = Document::new();
                out.insert("_id", id.clone());
                out.extend(doc);
                doc = out;
            }
        }
        let p = self.store.prepare(doc, max_size)?;
        position(guards, p.shard)?;
        let mut ids = self.insert_locked(guards, vec![p])?;
        Ok(ids.pop().unwrap_or(Bson::Null))
    }

    /// Deletes the documents matching `filter` (the first one only with `one`), one shard at
    /// a time (atomic per document, as MongoDB). Returns how many.
    pub fn delete(&self, filter: &Node, one: bool) -> u64 {
        let mut n = 0;
        for s in self.shards_for(filter) {
            let mut guard = self.store.lock(s);
            let Some(cs) = self.part_mut(&mut guard) else {
                continue;
            };
            let slots = match_slots(cs, filter, one);
            for slot in slots {
                if let Some(old) = cs.remove(slot) {
                    n += 1;
                    self.report(&cs.meta.changes, Change::Delete(&old));
                }
            }
            if one && n > 0 {
                break;
            }
        }
        n
    }

    /// `DOC.TOUCH`: sets `field` (or every TTL index's field) to `now` in every visible
    /// match, one shard at a time. Returns how many documents it touched; a collection with
    /// no TTL index and no `field` touches nothing.
    ///
    /// `max_size` is asked only when a document goes through the general update: rewriting
    /// dates in place keeps every document's size (a date is as wide as the date it
    /// replaces), and the configuration read it costs was a tenth of a touch.
    pub fn touch(
        &self,
        filter: &Node,
        field: Option<String>,
        now: DateTime,
        max_size: &dyn Fn() -> usize,
    ) -> DocResult<u64> {
        // With FIELD the field is known now; otherwise they are the TTL indexes' fields,
        // which every shard's part of the collection lists alike (listed only if a document
        // needs the general update). The general update is built only for a document the
        // in-place path cannot touch, and then once.
        let field: Option<Vec<String>> = field.map(|f| vec![f]);
        let mut ttl_fields: Option<Vec<String>> = None;
        let mut upd: Option<Update> = None;
        let mut n = 0;
        // By `_id`: the KeyString is made once, to pick the shard and probe the `_id` map.
        let id_key = filter.id_equality().map(crate::documents::keys::encode);
        let shards = match &id_key {
            Some(k) => {
                let s = self.store.shard_of(k);
                s..s + 1
            }
            None => 0..self.store.shard_count(),
        };
        for s in shards {
            let mut guard = self.store.lock(s);
            let Some(cs) = self.part_mut(&mut guard) else {
                continue;
            };
            if field.is_none() && cs.ttl.is_empty() {
                return Ok(0);
            }
            let by_id = id_key
                .as_deref()
                .map(|k| cs.lookup_id_key_for_write(filter, k));
            if let Some(Ok(found)) = by_id {
                if let Some(slot) = found.map(|(slot, _)| slot) {
                    let f = field.as_deref();
                    self.touch_slot(cs, slot, f, &mut ttl_fields, &mut upd, now, max_size)?;
                    n += 1;
                }
                continue;
            }
            for slot in match_slots(cs, filter, false) {
                let f = field.as_deref();
                self.touch_slot(cs, slot, f, &mut ttl_fields, &mut upd, now, max_size)?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Sets `field` (or, without it, every TTL index's field: `ttl_fields` lists them once
    /// the general path needs them) of the document in `slot` to `now`: its dates rewritten
    /// in place when it can (`CollectionShard::set_in_place`), else through the general
    /// `$set`.
    #[allow(clippy::too_many_arguments)]
    fn touch_slot(
        &self,
        cs: &mut CollectionShard,
        slot: u32,
        field: Option<&[String]>,
        ttl_fields: &mut Option<Vec<String>>,
        upd: &mut Option<Update>,
        now: DateTime,
        max_size: &dyn Fn() -> usize,
    ) -> DocResult<()> {
        let ms = now.timestamp_millis();
        // A date replaces only a date of the same width in place, so the size bound is never
        // reached there: `usize::MAX` stands for it without reading the configuration.
        let done = match field {
            Some(fields) => {
                let date = SetValue::Fixed(Fixed::Date(ms));
                let mut sets = [("", date); 8];
                if fields.len() <= sets.len() {
                    for (s, f) in sets.iter_mut().zip(fields) {
                        s.0 = f.as_str();
                    }
                    cs.set_in_place(slot, &sets[..fields.len()], usize::MAX)
                } else {
                    InPlace::NotApplicable
                }
            }
            None => cs.touch_in_place(slot, ms),
        };
        match done {
            InPlace::Changed => {
                self.report_update(cs, slot, false);
                return Ok(());
            }
            InPlace::Unchanged => return Ok(()),
            InPlace::NotApplicable => {}
        }
        let fields: &[String] = match field {
            Some(f) => f,
            None => ttl_fields.get_or_insert_with(|| cs.ttl_fields()),
        };
        let u = match upd {
            Some(u) => u,
            None => upd.insert(touch_update(fields, now)?),
        };
        let Some(raw) = cs.get(slot).map(RawDocument::to_owned) else {
            return Err("ERR internal: touched document vanished".into());
        };
        let mut doc = Document::try_from(raw.as_ref())
            .map_err(|e| format!("ERR cannot decode stored document: {e}"))?;
        u.apply(&mut doc, now, false).map_err(with_code)?;
        let new = codec::to_raw(&doc, max_size()).map_err(with_code)?;
        capped_same_size(cs, raw.as_bytes().len(), new.as_bytes().len())?;
        check_keyable(&cs.index_specs(), &new)?;
        let owner = crate::documents::keys::encode(doc.get("_id").unwrap_or(&Bson::Null));
        if let Err(spec) = cs.claim_unique(&new, &owner) {
            return Err(self.dup_key(&spec, &new));
        }
        if cs.replace(slot, new).is_some() {
            self.report_update(cs, slot, false);
        }
        Ok(())
    }

    /// `FIND … TOUCH`: refreshes the TTL dates of documents a find returned, each under its
    /// shard's lock and found again by `_id`, and returns them as refreshed; one removed
    /// meanwhile (expired or deleted) is left out, one that cannot be touched is returned
    /// as it was.
    pub fn touch_found(
        &self,
        found: Vec<super::Found>,
        now: DateTime,
        max_size: &dyn Fn() -> usize,
    ) -> Vec<super::Found> {
        let mut out = Vec::with_capacity(found.len());
        let mut upd = None;
        for f in found {
            let Some(id) = f.doc.get("_id") else { continue };
            let key = crate::documents::keys::encode(id);
            let mut guard = self.store.lock(self.store.shard_of(&key));
            let Some(cs) = self.part_mut(&mut guard) else {
                continue;
            };
            let Some(slot) = cs.slot_of(&key) else {
                continue;
            };
            if !cs.visible(slot, cs.visibility_clock()) {
                continue;
            }
            if cs.ttl.is_empty() {
                // No TTL index: nothing to refresh.
                out.push(f);
                continue;
            }
            // The fields are listed again for each document (each under its own lock).
            let mut fields = None;
            if self
                .touch_slot(cs, slot, None, &mut fields, &mut upd, now, max_size)
                .is_err()
            {
                out.push(f);
                continue;
            }
            match cs.get(slot) {
                // The reply carries the refreshed document (raw bytes only when asked for).
                Some(new) => match Document::try_from(new) {
                    Ok(doc) => out.push(super::Found {
                        raw: f.raw.as_ref().map(|_| new.to_owned()),
                        doc,
                    }),
                    Err(_) => out.push(f),
                },
                None => out.push(f),
            }
        }
        out
    }

    /// Removes the oldest documents of a capped collection until it is within its bounds;
    /// `guards` hold every shard. The globally oldest document is the smallest of the
    /// shards' FIFO fronts: O(shards) per removal.
    fn trim_capped(&self, guards: &mut Guards<'_>) {
        // While the journal is replayed, the removals come as their own records (each trim
        // is journaled as a delete): a rewritten base, copied shard by shard while inserts
        // went on, may hold more than the bound for a moment, and trimming here would
        // remove other documents than the ones that were.
        if crate::store::journal::loading() {
            return;
        }
        let db = self.db;
        let name = self.name;
        let feed = match guards.first() {
            Some((_, g)) => match self.part(g) {
                Some(cs) => cs.meta.changes.clone(),
                None => return,
            },
            None => return,
        };
        let mut parts: Vec<&mut CollectionShard> = guards
            .iter_mut()
            .filter_map(|(_, g)| g.dbs[db].collections.get_mut(name))
            .collect();
        let Some(spec) = parts.first().and_then(|p| p.meta.capped.clone()) else {
            return;
        };
        let mut bytes: u64 = parts.iter().map(|p| p.bytes() as u64).sum();
        let mut count: u64 = parts.iter().map(|p| p.len() as u64).sum();
        while bytes > spec.max_size || spec.max_docs.is_some_and(|m| count > m) {
            let oldest = parts
                .iter_mut()
                .enumerate()
                .filter_map(|(i, p)| p.order.oldest().map(|(seq, slot)| (seq, i, slot)))
                .min();
            let Some((_, i, slot)) = oldest else { break };
            match parts[i].remove(slot) {
                Some(old) => {
                    bytes = bytes.saturating_sub(old.as_bytes().len() as u64);
                    count = count.saturating_sub(1);
                    self.report(&feed, Change::Delete(&old));
                }
                // Cannot happen (the FIFO front is a live slot); never loop on it.
                None => parts[i].order.forget(slot),
            }
        }
    }
}

/// The slots of the visible documents in `cs` matching `filter` (the first only with
/// `one`). A filter that is `{_id: v}` alone reads the `_id` map directly, as a find by `_id`
/// does: no plan, no index list, no matcher built for one lookup.
fn match_slots(cs: &mut CollectionShard, filter: &Node, one: bool) -> Vec<u32> {
    if let Ok(found) = cs.lookup_id(filter) {
        return found.map(|(slot, _)| slot).into_iter().collect();
    }
    let mut slots = Vec::new();
    cs.prepare(filter, &[]);
    cs.scan(filter, &mut |slot, _| {
        slots.push(slot);
        !one
    });
    slots
}

/// The update that refreshes `fields` to `now`: `{$set: {field: now, ...}}`, the same
/// mechanism as `DOC.UPDATE` (dotted paths create subdocuments).
fn touch_update(fields: &[String], now: DateTime) -> DocResult<Update> {
    let mut set = Document::new();
    for f in fields {
        set.insert(f.clone(), now);
    }
    let mut u = Document::new();
    u.insert("$set", set);
    update::parse(&u).map_err(with_code)
}
