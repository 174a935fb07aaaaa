//! The aggregation pipeline (`DOC.AGGREGATE`, SPEC §5 "Aggregation").
//!
//! A pipeline is parsed once ([`Pipeline::parse`]) into stages. Execution is split for the
//! sharded store: every shard runs the *shard part* over its own documents
//! ([`Pipeline::run_shard`]) — the leading document-at-a-time stages (`$match $project
//! $addFields $set $unset $unwind`), then, when the next stage is `$group`, a partial group;
//! when it is `$count`, a partial count; when it is `$limit` (or `$sort` then `$limit`), a
//! local top-k — and the merge step ([`Pipeline::merge`]) folds the shards' partial results
//! together and runs the rest of the pipeline. One shard's run followed by a merge of one
//! part is the whole pipeline, so there is one code path ([`Pipeline::run`]).
//!
//! A leading `$match` is handed to the query planner instead ([`Pipeline::take_leading_match`]):
//! the caller fetches the matching documents through an index and the pipeline starts after it.

pub mod dates;
pub mod expr;
pub mod group;
pub mod project;

use crate::documents::sort::Sort;
use bson::{Bson, DateTime, Document};
use expr::{parse_path, type_name};
use group::{GroupSpec, GroupState};
use project::Projection;
use std::fmt;

/// An aggregation error; the text follows MongoDB's wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggError(pub String);

impl AggError {
    pub fn new(msg: impl Into<String>) -> AggError {
        AggError(msg.into())
    }
}

impl fmt::Display for AggError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A compiled `$match` filter: the documents layer's matcher.
pub type Predicate = Box<dyn Fn(&Document) -> bool + Send + Sync>;

/// The `$match` compiler the server uses: the query matcher of `DOC.FIND`.
pub fn compile_match(filter: &Document) -> Result<Predicate, AggError> {
    let node = crate::documents::query::parse(filter)
        .map_err(|e| AggError::new(e.strip_prefix("ERR ").unwrap_or(&e).to_string()))?;
    Ok(Box::new(move |d: &Document| node.matches(d)))
}

/// Compiles a `$match` filter (the seam to the query matcher, so the pipeline and `DOC.FIND`
/// share one implementation of MongoDB's query language).
pub type MatchCompiler<'a> = &'a dyn Fn(&Document) -> Result<Predicate, AggError>;

pub enum Stage {
    Match {
        filter: Document,
        pred: Predicate,
    },
    Project(Projection),
    Group(GroupSpec),
    Sort(Sort),
    Skip(u64),
    Limit(u64),
    Count(String),
    Unwind {
        path: Vec<String>,
        index_field: Option<String>,
        preserve: bool,
    },
}

impl fmt::Debug for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stage::Match { filter, .. } => write!(f, "$match {filter}"),
            Stage::Project(p) => write!(f, "$project {:?}", p.mode),
            Stage::Group(_) => f.write_str("$group"),
            Stage::Sort(k) => write!(f, "$sort {k:?}"),
            Stage::Skip(n) => write!(f, "$skip {n}"),
            Stage::Limit(n) => write!(f, "$limit {n}"),
            Stage::Count(n) => write!(f, "$count {n}"),
            Stage::Unwind { path, .. } => write!(f, "$unwind {path:?}"),
        }
    }
}

impl Stage {
    /// Stages that take one document and give zero or more without looking at the others.
    fn streams(&self) -> bool {
        matches!(
            self,
            Stage::Match { .. } | Stage::Project(_) | Stage::Unwind { .. }
        )
    }
}

/// What a shard hands to the merge step.
#[derive(Debug)]
pub enum Partial {
    Docs(Vec<Document>),
    Groups(GroupState),
    Count(u64),
}

#[derive(Debug)]
pub struct Pipeline {
    stages: Vec<Stage>,
    now: DateTime,
}

fn non_negative(v: &Bson, stage: &str) -> Result<u64, AggError> {
    let n = match v {
        Bson::Int32(i) => Some(*i as i64),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 9.2e18 => Some(*d as i64),
        _ => None,
    };
    match n {
        Some(n) if n >= 0 => Ok(n as u64),
        Some(_) => Err(AggError::new(format!(
            "invalid argument to {stage} stage: Expected a non-negative number in: {stage}: {}",
            v.clone().into_relaxed_extjson()
        ))),
        None => Err(AggError::new(format!(
            "invalid argument to {stage} stage: Expected an integer: {stage}: {}",
            v.clone().into_relaxed_extjson()
        ))),
    }
}

impl Pipeline {
    /// Parses a pipeline (the array of stage objects). `compile` turns a `$match` filter into a
    /// predicate. `now` is the value of `$$NOW` for the whole run.
    pub fn parse(
        spec: &[Bson],
        compile: MatchCompiler<'_>,
        now: DateTime,
    ) -> Result<Pipeline, AggError> {
        let mut stages = Vec::with_capacity(spec.len().min(64));
        for s in spec {
            let Bson::Document(d) = s else {
                return Err(AggError::new(format!(
                    "Each element of the 'pipeline' array must be an object, found {}",
                    type_name(Some(s))
                )));
            };
            if d.len() != 1 {
                return Err(AggError::new(
                    "A pipeline stage specification object must contain exactly one field.",
                ));
            }
            let Some((name, arg)) = d.iter().next() else {
                return Err(AggError::new(
                    "A pipeline stage specification object must contain exactly one field.",
                ));
            };
            stages.push(Self::parse_stage(name, arg, compile)?);
        }
        Ok(Pipeline { stages, now })
    }

    fn parse_stage(name: &str, arg: &Bson, compile: MatchCompiler<'_>) -> Result<Stage, AggError> {
        Ok(match name {
            "$match" => {
                let Bson::Document(filter) = arg else {
                    return Err(AggError::new(
                        "the match filter must be an expression in an object",
                    ));
                };
                Stage::Match {
                    pred: compile(filter)?,
                    filter: filter.clone(),
                }
            }
            "$project" => Stage::Project(Projection::parse_project(arg)?),
            "$addFields" | "$set" => Stage::Project(Projection::parse_add_fields(arg, name)?),
            "$unset" => Stage::Project(Projection::parse_unset(arg)?),
            "$group" => Stage::Group(GroupSpec::parse(arg)?),
            "$sort" => {
                let Bson::Document(d) = arg else {
                    return Err(AggError::new(
                        "the $sort key specification must be an object",
                    ));
                };
                if d.is_empty() {
                    return Err(AggError::new("$sort stage must have at least one sort key"));
                }
                let sort = Sort::parse(d)
                    .map_err(|e| AggError::new(e.strip_prefix("ERR ").unwrap_or(&e).to_string()))?;
                Stage::Sort(sort)
            }
            "$skip" => Stage::Skip(non_negative(arg, "$skip")?),
            "$limit" => match non_negative(arg, "$limit")? {
                0 => return Err(AggError::new("the limit must be positive")),
                n => Stage::Limit(n),
            },
            "$count" => {
                let Bson::String(field) = arg else {
                    return Err(AggError::new("the count field must be a non-empty string"));
                };
                if field.is_empty() {
                    return Err(AggError::new("the count field must be a non-empty string"));
                }
                if field.starts_with('$') {
                    return Err(AggError::new("the count field cannot be a $-prefixed path"));
                }
                if field.contains('.') {
                    return Err(AggError::new("the count field cannot contain '.'"));
                }
                Stage::Count(field.clone())
            }
            "$unwind" => {
                let (path, index_field, preserve) = match arg {
                    Bson::String(p) => (p.clone(), None, false),
                    Bson::Document(d) => {
                        let mut path = None;
                        let mut index = None;
                        let mut preserve = false;
                        for (k, v) in d {
                            match (k.as_str(), v) {
                                ("path", Bson::String(p)) => path = Some(p.clone()),
                                ("includeArrayIndex", Bson::String(i))
                                    if !i.is_empty() && !i.starts_with('$') =>
                                {
                                    index = Some(i.clone())
                                }
                                ("preserveNullAndEmptyArrays", Bson::Boolean(b)) => preserve = *b,
                                ("path" | "includeArrayIndex" | "preserveNullAndEmptyArrays", _) => {
                                    return Err(AggError::new(format!(
                                        "invalid value for the {k} option to $unwind stage"
                                    )))
                                }
                                (other, _) => {
                                    return Err(AggError::new(format!(
                                        "unrecognized option to $unwind stage: {other}"
                                    )))
                                }
                            }
                        }
                        let Some(path) = path else {
                            return Err(AggError::new("no path specified to $unwind stage"));
                        };
                        (path, index, preserve)
                    }
                    other => {
                        return Err(AggError::new(format!(
                            "expected either a string or an object as specification for $unwind stage, got {}",
                            type_name(Some(other))
                        )))
                    }
                };
                let Some(p) = path.strip_prefix('$') else {
                    return Err(AggError::new(format!(
                        "path option to $unwind stage should be prefixed with a '$': {path}"
                    )));
                };
                Stage::Unwind {
                    path: parse_path(p)?,
                    index_field,
                    preserve,
                }
            }
            other => {
                return Err(AggError::new(format!(
                    "Unrecognized pipeline stage name: '{other}'"
                )))
            }
        })
    }

    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// Removes the leading `$match` stages and returns their filter (several are combined with
    /// `$and`), for the caller to run through the query planner. The documents the caller
    /// feeds to [`Pipeline::run_shard`] must then be exactly those matching the filter.
    pub fn take_leading_match(&mut self) -> Option<Document> {
        let mut filters = Vec::new();
        while let Some(Stage::Match { .. }) = self.stages.first() {
            if let Stage::Match { filter, .. } = self.stages.remove(0) {
                filters.push(filter);
            }
        }
        match filters.len() {
            0 => None,
            1 => filters.pop(),
            _ => Some(
                bson::doc! {"$and": filters.into_iter().map(Bson::Document).collect::<Vec<_>>()},
            ),
        }
    }

    /// The top-level fields the pipeline reads from its input documents, when it reads only
    /// some (a `$project` inclusion, `$group` or `$count` ends what the input can reach), so
    /// the caller decodes just those from the stored BSON. `None`: whole documents.
    pub fn needed_fields(&self) -> Option<Vec<String>> {
        let mut out = Vec::new();
        let done = |mut out: Vec<String>| {
            out.sort_unstable();
            out.dedup();
            Some(out)
        };
        for stage in &self.stages {
            match stage {
                Stage::Match { filter, .. } => filter_fields(filter, &mut out),
                Stage::Project(p) => {
                    if !p.fields(&mut out) {
                        return None;
                    }
                    if p.mode == project::Mode::Inclusion {
                        return done(out);
                    }
                }
                Stage::Group(g) => {
                    if !g.id.fields(&mut out)
                        || !g.fields.iter().all(|(_, _, e)| e.fields(&mut out))
                    {
                        return None;
                    }
                    return done(out);
                }
                Stage::Count(_) => return done(out),
                Stage::Sort(s) => out.extend(s.keys().iter().map(|(p, _)| p[0].clone())),
                Stage::Unwind { path, .. } => out.push(path[0].clone()),
                Stage::Skip(_) | Stage::Limit(_) => {}
            }
        }
        // The documents leave the pipeline with all their fields.
        None
    }

    /// Where the shard part ends: the leading streaming stages, plus the stage that the merge
    /// step completes (`$group`, `$count`) or repeats (`$limit`, `$sort` + `$limit`).
    fn shard_prefix(&self) -> usize {
        self.stages
            .iter()
            .position(|s| !s.streams())
            .unwrap_or(self.stages.len())
    }

    /// Runs the shard part over one shard's documents.
    pub fn run_shard(&self, docs: impl IntoIterator<Item = Document>) -> Result<Partial, AggError> {
        let split = self.shard_prefix();
        let head = &self.stages[..split];
        match self.stages.get(split) {
            Some(Stage::Group(spec)) => {
                let mut st = GroupState::new();
                for d in docs {
                    stream(head, d, self.now, &mut |d| st.add(spec, &d, self.now))?;
                }
                Ok(Partial::Groups(st))
            }
            Some(Stage::Count(_)) => {
                let mut n = 0u64;
                for d in docs {
                    stream(head, d, self.now, &mut |_| {
                        n += 1;
                        Ok(())
                    })?;
                }
                Ok(Partial::Count(n))
            }
            next => {
                let mut out = Vec::new();
                for d in docs {
                    stream(head, d, self.now, &mut |d| {
                        out.push(d);
                        Ok(())
                    })?;
                }
                // A local top-k: the merge step sorts and limits again.
                match (next, self.stages.get(split + 1)) {
                    (Some(Stage::Limit(n)), _) => {
                        out.truncate(usize::try_from(*n).unwrap_or(usize::MAX))
                    }
                    (Some(Stage::Sort(keys)), Some(Stage::Limit(n))) => {
                        sort_docs(&mut out, keys);
                        out.truncate(usize::try_from(*n).unwrap_or(usize::MAX));
                    }
                    _ => {}
                }
                Ok(Partial::Docs(out))
            }
        }
    }

    /// Folds the shards' partial results and runs the rest of the pipeline.
    pub fn merge(&self, parts: Vec<Partial>) -> Result<Vec<Document>, AggError> {
        let split = self.shard_prefix();
        let (mut docs, rest) = match self.stages.get(split) {
            Some(Stage::Group(spec)) => {
                let mut st = GroupState::new();
                for p in parts {
                    if let Partial::Groups(g) = p {
                        st.merge(g);
                    }
                }
                (st.finish(spec), &self.stages[split + 1..])
            }
            Some(Stage::Count(field)) => {
                let n: u64 = parts
                    .iter()
                    .map(|p| if let Partial::Count(n) = p { *n } else { 0 })
                    .sum();
                // MongoDB's $count emits nothing for an empty input.
                let docs = if n == 0 {
                    Vec::new()
                } else {
                    let mut d = Document::new();
                    d.insert(field.clone(), count_value(n));
                    vec![d]
                };
                (docs, &self.stages[split + 1..])
            }
            _ => {
                let mut docs = Vec::new();
                for p in parts {
                    if let Partial::Docs(d) = p {
                        docs.extend(d);
                    }
                }
                (docs, &self.stages[split..])
            }
        };
        let mut i = 0;
        while i < rest.len() {
            // Streaming stages in a run are applied together, document by document.
            let run_end = rest[i..]
                .iter()
                .position(|s| !s.streams())
                .map_or(rest.len(), |p| i + p);
            if run_end > i {
                let mut out = Vec::with_capacity(docs.len());
                for d in docs {
                    stream(&rest[i..run_end], d, self.now, &mut |d| {
                        out.push(d);
                        Ok(())
                    })?;
                }
                docs = out;
                i = run_end;
                continue;
            }
            docs = self.blocking(&rest[i], docs)?;
            i += 1;
        }
        Ok(docs)
    }

    fn blocking(&self, stage: &Stage, mut docs: Vec<Document>) -> Result<Vec<Document>, AggError> {
        Ok(match stage {
            Stage::Group(spec) => {
                let mut st = GroupState::new();
                for d in &docs {
                    st.add(spec, d, self.now)?;
                }
                st.finish(spec)
            }
            Stage::Count(field) => {
                if docs.is_empty() {
                    Vec::new()
                } else {
                    let mut d = Document::new();
                    d.insert(field.clone(), count_value(docs.len() as u64));
                    vec![d]
                }
            }
            Stage::Sort(keys) => {
                sort_docs(&mut docs, keys);
                docs
            }
            Stage::Skip(n) => {
                let n = usize::try_from(*n).unwrap_or(usize::MAX).min(docs.len());
                docs.drain(..n);
                docs
            }
            Stage::Limit(n) => {
                docs.truncate(usize::try_from(*n).unwrap_or(usize::MAX));
                docs
            }
            // Streaming stages are handled by the caller.
            _ => docs,
        })
    }

    /// Runs the whole pipeline over one source of documents.
    pub fn run(&self, docs: impl IntoIterator<Item = Document>) -> Result<Vec<Document>, AggError> {
        let part = self.run_shard(docs)?;
        self.merge(vec![part])
    }
}

/// The top-level fields a filter reads (through `$and`, `$or`, `$nor`).
fn filter_fields(filter: &Document, out: &mut Vec<String>) {
    for (k, v) in filter {
        if k.starts_with('$') {
            if let Bson::Array(items) = v {
                for i in items {
                    if let Bson::Document(d) = i {
                        filter_fields(d, out);
                    }
                }
            }
        } else if let Some(top) = k.split('.').next() {
            out.push(top.to_string());
        }
    }
}

/// A count as Int32 when it fits, as MongoDB's `$count` replies.
fn count_value(n: u64) -> Bson {
    match i32::try_from(n) {
        Ok(v) => Bson::Int32(v),
        Err(_) => Bson::Int64(i64::try_from(n).unwrap_or(i64::MAX)),
    }
}

/// Pushes one document through a run of streaming stages.
fn stream(
    stages: &[Stage],
    doc: Document,
    now: DateTime,
    sink: &mut dyn FnMut(Document) -> Result<(), AggError>,
) -> Result<(), AggError> {
    let Some((stage, rest)) = stages.split_first() else {
        return sink(doc);
    };
    match stage {
        Stage::Match { pred, .. } => {
            if pred(&doc) {
                stream(rest, doc, now, sink)?;
            }
        }
        Stage::Project(p) => stream(rest, p.apply(doc, now)?, now, sink)?,
        Stage::Unwind {
            path,
            index_field,
            preserve,
        } => {
            /// What the path holds (looked at without copying it).
            enum Shape {
                Elements,
                EmptyArray,
                Nullish,
                Scalar,
            }
            let shape = match get_plain(&doc, path) {
                Some(Bson::Array(a)) if !a.is_empty() => Shape::Elements,
                Some(Bson::Array(_)) => Shape::EmptyArray,
                None | Some(Bson::Null) | Some(Bson::Undefined) => Shape::Nullish,
                Some(_) => Shape::Scalar,
            };
            let with_index = |mut d: Document, i: Option<usize>| {
                if let Some(f) = index_field {
                    d.insert(f.clone(), i.map_or(Bson::Null, |i| Bson::Int64(i as i64)));
                }
                d
            };
            match shape {
                Shape::Elements => {
                    // The array leaves the document before the copies are made, so each
                    // copy costs the document without it, not the array's length again.
                    let mut base = doc;
                    let Some(Bson::Array(items)) = replace_plain(&mut base, path, Bson::Null)
                    else {
                        return Ok(());
                    };
                    for (i, item) in items.into_iter().enumerate() {
                        let mut d = base.clone();
                        set_plain(&mut d, path, item);
                        stream(rest, with_index(d, Some(i)), now, sink)?;
                    }
                }
                Shape::EmptyArray if *preserve => {
                    let mut d = doc;
                    remove_plain(&mut d, path);
                    stream(rest, with_index(d, None), now, sink)?;
                }
                Shape::EmptyArray | Shape::Nullish => {
                    if *preserve {
                        stream(rest, with_index(doc, None), now, sink)?;
                    }
                }
                // A non-array value is treated as a one-element array.
                Shape::Scalar => stream(rest, with_index(doc, None), now, sink)?,
            }
        }
        _ => stream(rest, doc, now, sink)?,
    }
    Ok(())
}

/// A dotted path through subdocuments only (`$unwind`'s path does not traverse arrays).
fn get_plain<'a>(doc: &'a Document, path: &[String]) -> Option<&'a Bson> {
    let (first, rest) = path.split_first()?;
    let v = doc.get(first)?;
    if rest.is_empty() {
        return Some(v);
    }
    match v {
        Bson::Document(d) => get_plain(d, rest),
        _ => None,
    }
}

/// Puts `value` at a dotted path through subdocuments and returns what was there.
fn replace_plain(doc: &mut Document, path: &[String], value: Bson) -> Option<Bson> {
    let (first, rest) = path.split_first()?;
    if rest.is_empty() {
        return doc.get_mut(first).map(|v| std::mem::replace(v, value));
    }
    match doc.get_mut(first) {
        Some(Bson::Document(d)) => replace_plain(d, rest, value),
        _ => None,
    }
}

fn set_plain(doc: &mut Document, path: &[String], value: Bson) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.insert(first.clone(), value);
        return;
    }
    if let Some(Bson::Document(d)) = doc.get_mut(first) {
        set_plain(d, rest, value);
    }
}

fn remove_plain(doc: &mut Document, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.remove(first);
        return;
    }
    if let Some(Bson::Document(d)) = doc.get_mut(first) {
        remove_plain(d, rest);
    }
}

/// A stable sort (the documents layer's sort keys: arrays by their least element ascending
/// and greatest descending, missing as null).
pub fn sort_docs(docs: &mut Vec<Document>, sort: &Sort) {
    let mut keyed: Vec<(Vec<Bson>, Document)> = docs.drain(..).map(|d| (sort.key(&d), d)).collect();
    keyed.sort_by(|a, b| sort.compare(&a.0, &b.0));
    docs.extend(keyed.into_iter().map(|(_, d)| d));
}

#[cfg(test)]
mod tests;
