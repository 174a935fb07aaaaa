//! `DOC.EXPLAIN` and `DOC.AGGREGATE`: queries that report on their own work or run a
//! pipeline over the matches of each shard.

use super::parse::{
    doc_reply, fail, limit_value, parse_doc, parse_filter, skip_value, target, with_code, Target,
};
use crate::commands::args::{Args, CommandError, CommandResult};
use crate::commands::spec::CmdResult;
use crate::commands::Ctx;
use crate::documents::aggregate::{self, Pipeline};
use crate::documents::codec;
use crate::documents::query::Node;
use crate::documents::sort::Sort;
use crate::protocol::Reply;
use bson::{Bson, Document};
use std::time::Instant;

/// `DOC.EXPLAIN coll [BSON] filter [SORT s] [SKIP n] [LIMIT n]`: the plan as JSON.
pub fn doc_explain(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let t = target(args)?;
    let filter = parse_filter(args.next_arg()?, &t)?;
    let (mut sort, mut skip, mut limit) = (None, 0, None);
    while let Some(kw) = args.next_token() {
        match &*kw {
            b"SORT" if !args.is_empty() => {
                let d = parse_doc(args.next_arg()?, &t)?;
                sort = Some(Sort::parse(&d).map_err(|e| fail(with_code(e)))?);
            }
            b"SKIP" if !args.is_empty() => skip = skip_value(args)?,
            b"LIMIT" if !args.is_empty() => limit = limit_value(args)?,
            _ => return Err(CommandError::syntax()),
        }
    }
    let started = Instant::now();
    let e = ctx.server.store.collection(ctx.client.db, &t.coll).explain(
        &filter,
        sort.as_ref(),
        skip,
        limit,
    );
    let micros = started.elapsed().as_micros() as i64;
    let mut out = Document::new();
    out.insert("plan", e.plan);
    out.insert("index", e.index.map(Bson::String).unwrap_or(Bson::Null));
    out.insert("keysExamined", e.stats.keys_examined as i64);
    out.insert("docsExamined", e.stats.docs_examined as i64);
    out.insert("nReturned", e.returned as i64);
    out.insert("executionTimeMicros", micros);
    out.insert("shards", e.shards as i64);
    Ok(Reply::bulk(codec::doc_json(&out)))
}

/// The top-level `fields` of a stored document, decoded from its raw BSON, in the
/// document's order (inclusion projections keep it).
fn partial_doc(raw: &bson::RawDocument, fields: &[String]) -> Document {
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

const NOT_A_PIPELINE: &str = "ERR 'pipeline' must be an array of stage objects";

/// The pipeline argument: a JSON array of stages, or with `BSON` a raw BSON document whose
/// values are the stages in order (a BSON array).
fn parse_pipeline(arg: &[u8], t: &Target) -> CommandResult<Vec<Bson>> {
    let mut stages = if t.bson {
        codec::parse_bson(arg)
            .map_err(|e| fail(with_code(e)))?
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    } else {
        let value: serde_json::Value =
            serde_json::from_slice(arg).map_err(|e| fail(with_code(codec::json_error(arg, &e))))?;
        if !value.is_array() {
            return Err(CommandError::msg(NOT_A_PIPELINE));
        }
        match Bson::try_from(value) {
            Ok(Bson::Array(a)) => a,
            Ok(_) => return Err(CommandError::msg(NOT_A_PIPELINE)),
            Err(e) => {
                return Err(CommandError::msg(format!(
                    "ERR invalid Extended JSON: {}",
                    e.to_string().replace(['\r', '\n'], " ")
                )))
            }
        }
    };
    for s in stages.iter_mut() {
        codec::replace_now_value(s, t.now);
    }
    Ok(stages)
}

/// `DOC.AGGREGATE coll [BSON] pipeline`.
pub fn doc_aggregate(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let t = target(args)?;
    let p = args.next_arg()?;
    args.finish()?;
    let stages = parse_pipeline(p, &t)?;
    let mut pipeline = Pipeline::parse(&stages, &aggregate::compile_match, t.now)
        .map_err(|e| CommandError::msg(format!("ERR {e}")))?;
    // A leading $match goes through the planner: each shard fetches only its matches.
    let filter = match pipeline.take_leading_match() {
        Some(f) => crate::documents::query::parse(&f).map_err(|e| fail(with_code(e)))?,
        None => Node::And(Vec::new()),
    };
    // Only the fields the pipeline reads are decoded from the stored BSON.
    let needed = pipeline.needed_fields();
    let shards = ctx
        .server
        .store
        .collection(ctx.client.db, &t.coll)
        .per_shard(&filter, |raw| match &needed {
            Some(fields) => Some(partial_doc(raw, fields)),
            None => Document::try_from(raw).ok(),
        });
    let mut parts = Vec::with_capacity(shards.len());
    for docs in shards {
        parts.push(
            pipeline
                .run_shard(docs)
                .map_err(|e| CommandError::msg(format!("ERR {e}")))?,
        );
    }
    let docs = pipeline
        .merge(parts)
        .map_err(|e| CommandError::msg(format!("ERR {e}")))?;
    Ok(Reply::Array(
        docs.into_iter()
            .map(|d| doc_reply(d, None, t.bson))
            .collect(),
    ))
}
