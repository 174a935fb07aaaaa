//! A rendered-page cache behind a web tier, kept in a tidecache collection.
//!
//! Pages come from a deliberately slow source (`render`, a sleep of `--render-delay-ms`) and
//! are cached as documents of the `pages` collection:
//!
//! ```json
//! {"_id": "/product/42", "html": "...", "tags": ["product:42", "category:shoes"],
//!  "renderedAtMs": 1764020000000, "renderedAt": {"$date": "..."}, "lastRead": {"$date": "..."}}
//! ```
//!
//! - A TTL index on `lastRead` removes a page nobody read for `--ttl-secs`; every hit reads the
//!   page with `DOC.FINDONE … TOUCH`, which refreshes `lastRead` in the same step, so a page
//!   lives as long as it is read.
//! - A multikey index on `tags` makes `DOC.DELETE pages {"tags":"product:42"}` (what
//!   `POST /invalidate/product:42` runs) find every page showing product 42 without a scan.
//! - Stale-while-revalidate: a page older than `--fresh-ms` is served at once with
//!   `X-Cache: STALE` and re-rendered once in the background.
//! - Single flight: concurrent requests for one missing or stale page cause one render. Within
//!   this process they queue on one mutex per path; across several instances of the app a
//!   short lock key (`SET pagecache:lock:<path> <token> NX PX <lock-ms>`) in tidecache decides
//!   who renders, and everyone re-reads the cache after taking either lock.
//!
//! Every page response carries `X-Cache: HIT|MISS|STALE`; `GET /stats` reports the renders per
//! path and the counts of each outcome.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redis::aio::ConnectionManager;
use serde_json::{json, Value};

const COLLECTION: &str = "pages";
const CATEGORIES: [&str; 3] = ["shoes", "hats", "bags"];
/// Products 1..=PRODUCTS exist; anything else is a 404 (and never cached).
const PRODUCTS: u32 = 60;

#[derive(Clone, Debug)]
struct Config {
    tidecache_url: String,
    listen: String,
    fresh_ms: u64,
    ttl_secs: u64,
    render_delay_ms: u64,
    lock_ms: u64,
}

const USAGE: &str = "page_cache [--tidecache-url URL] [--listen ADDR] [--fresh-ms MS] \
[--ttl-secs S] [--render-delay-ms MS] [--lock-ms MS]

Each option can also be given as an environment variable (the option wins):
  --tidecache-url    TIDECACHE_URL     redis://127.0.0.1:6379/
  --listen           LISTEN_ADDR       127.0.0.1:3000
  --fresh-ms         FRESH_MS          10000   a page older than this is served STALE and re-rendered
  --ttl-secs         TTL_SECS          300     an unread page is removed after this (TTL index on lastRead)
  --render-delay-ms  RENDER_DELAY_MS   200     how slow the page source is
  --lock-ms          LOCK_MS           5000    lifetime of the cross-instance render lock";

impl Config {
    fn load() -> Result<Config, String> {
        fn env(name: &str, default: &str) -> String {
            std::env::var(name).unwrap_or_else(|_| default.to_string())
        }
        let mut opts: HashMap<&'static str, String> = HashMap::from([
            (
                "--tidecache-url",
                env("TIDECACHE_URL", "redis://127.0.0.1:6379/"),
            ),
            ("--listen", env("LISTEN_ADDR", "127.0.0.1:3000")),
            ("--fresh-ms", env("FRESH_MS", "10000")),
            ("--ttl-secs", env("TTL_SECS", "300")),
            ("--render-delay-ms", env("RENDER_DELAY_MS", "200")),
            ("--lock-ms", env("LOCK_MS", "5000")),
        ]);
        let mut args = std::env::args().skip(1);
        while let Some(name) = args.next() {
            if name == "--help" || name == "-h" {
                return Err(USAGE.to_string());
            }
            let Some(slot) = opts.iter_mut().find(|(k, _)| **k == name).map(|(_, v)| v) else {
                return Err(format!("unknown option {name}\n\n{USAGE}"));
            };
            *slot = args
                .next()
                .ok_or_else(|| format!("{name} needs a value\n\n{USAGE}"))?;
        }
        let num = |name: &str| -> Result<u64, String> {
            opts[name]
                .parse()
                .map_err(|_| format!("{name}: not a non-negative integer: {}", opts[name]))
        };
        let cfg = Config {
            tidecache_url: opts["--tidecache-url"].clone(),
            listen: opts["--listen"].clone(),
            fresh_ms: num("--fresh-ms")?,
            ttl_secs: num("--ttl-secs")?,
            render_delay_ms: num("--render-delay-ms")?,
            lock_ms: num("--lock-ms")?,
        };
        if cfg.lock_ms <= cfg.render_delay_ms {
            // A lock that expires mid-render lets a second instance render the same page.
            return Err("--lock-ms must be longer than --render-delay-ms".to_string());
        }
        Ok(cfg)
    }
}

#[derive(Default)]
struct Stats {
    renders: BTreeMap<String, u64>,
    hits: u64,
    misses: u64,
    stale: u64,
    revalidations: u64,
}

struct App {
    cfg: Config,
    db: ConnectionManager,
    stats: Mutex<Stats>,
    /// One mutex per path being filled or revalidated in this process (the in-process half
    /// of single flight); entries are removed when the last user lets go.
    flights: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Paths with a background revalidation queued or running, so a burst of STALE hits
    /// spawns one task.
    revalidating: Mutex<HashSet<String>>,
    /// Makes this process's lock tokens distinct from other instances'.
    instance: String,
    unlock: redis::Script,
}

/// What the cache holds for a path.
struct Cached {
    html: String,
    rendered_at_ms: u64,
}

/// A page fresh from the slow source.
struct Rendered {
    html: String,
    tags: Vec<String>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn category_of(id: u32) -> &'static str {
    CATEGORIES[(id % 3) as usize]
}

/// The pages this site has; anything else is not found and never reaches the cache.
enum Page {
    Product(u32),
    Category(&'static str),
}

impl Page {
    fn path(&self) -> String {
        match self {
            Page::Product(id) => format!("/product/{id}"),
            Page::Category(name) => format!("/category/{name}"),
        }
    }
}

impl App {
    fn lock_key(path: &str) -> String {
        format!("pagecache:lock:{path}")
    }

    /// `DOC.FINDONE pages {"_id":path} PROJECTION {...} [TOUCH]`. With TOUCH the server
    /// sets `lastRead` to now on the document it returns, in the same step, which is what
    /// keeps a read page alive under the TTL index.
    async fn find(&self, path: &str, touch: bool) -> redis::RedisResult<Option<Cached>> {
        let mut cmd = redis::cmd("DOC.FINDONE");
        cmd.arg(COLLECTION)
            .arg(json!({ "_id": path }).to_string())
            .arg("PROJECTION")
            .arg(r#"{"html":1,"renderedAtMs":1}"#);
        if touch {
            cmd.arg("TOUCH");
        }
        let reply: Option<String> = cmd.query_async(&mut self.db.clone()).await?;
        let Some(text) = reply else { return Ok(None) };
        let doc: Value = serde_json::from_str(&text).map_err(|e| {
            redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "DOC.FINDONE returned bad JSON",
                e.to_string(),
            ))
        })?;
        Ok(Some(Cached {
            html: doc["html"].as_str().unwrap_or_default().to_string(),
            rendered_at_ms: doc["renderedAtMs"].as_u64().unwrap_or(0),
        }))
    }

    /// Upserts the page with a fresh `lastRead` ("$$NOW" is the server's clock, which is
    /// the clock the TTL index compares with) and `renderedAtMs` from this process's
    /// clock, which is the one the freshness window is measured with.
    async fn store(
        &self,
        path: &str,
        page: &Rendered,
        rendered_at_ms: u64,
    ) -> redis::RedisResult<()> {
        let update = json!({ "$set": {
            "html": page.html,
            "tags": page.tags,
            "renderedAtMs": rendered_at_ms,
            "renderedAt": { "$date": { "$numberLong": rendered_at_ms.to_string() } },
            "lastRead": "$$NOW",
        }});
        // The reply is [matched, modified, upserted _id or null]; nothing in it is needed.
        let _: redis::Value = redis::cmd("DOC.UPDATE")
            .arg(COLLECTION)
            .arg(json!({ "_id": path }).to_string())
            .arg(update.to_string())
            .arg("UPSERT")
            .query_async(&mut self.db.clone())
            .await?;
        Ok(())
    }

    /// Takes the cross-instance render lock for `path`: `SET key token NX PX lock-ms`.
    async fn try_lock(&self, path: &str) -> redis::RedisResult<Option<String>> {
        let token = format!("{}:{}", self.instance, now_ms());
        let ok: Option<String> = redis::cmd("SET")
            .arg(Self::lock_key(path))
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(self.cfg.lock_ms)
            .query_async(&mut self.db.clone())
            .await?;
        Ok(ok.map(|_| token))
    }

    /// Deletes the lock only if it is still ours (it may have expired and been taken by
    /// another instance meanwhile).
    async fn unlock(&self, path: &str, token: &str) {
        let res: redis::RedisResult<i64> = self
            .unlock
            .key(Self::lock_key(path))
            .arg(token)
            .invoke_async(&mut self.db.clone())
            .await;
        if let Err(e) = res {
            eprintln!("unlock {path}: {e}");
        }
    }

    fn is_fresh(&self, c: &Cached) -> bool {
        now_ms().saturating_sub(c.rendered_at_ms) < self.cfg.fresh_ms
    }

    /// The slow source. Counts every render in /stats.
    async fn render(&self, page: &Page) -> Rendered {
        tokio::time::sleep(Duration::from_millis(self.cfg.render_delay_ms)).await;
        let path = page.path();
        let n = {
            let mut st = self.stats.lock().unwrap_or_else(|p| p.into_inner());
            let n = st.renders.entry(path.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let stamp = format!("render #{n} of {path} at {} ms", now_ms());
        match page {
            Page::Product(id) => {
                let cat = category_of(*id);
                Rendered {
                    html: format!(
                        "<!doctype html><title>Product {id}</title>\n<h1>Product {id}</h1>\n\
                         <p>Category: <a href=\"/category/{cat}\">{cat}</a>. Price: {}.{:02} EUR</p>\n\
                         <footer>{stamp}</footer>\n",
                        10 + id * 7 % 90,
                        id * 13 % 100
                    ),
                    tags: vec![format!("product:{id}"), format!("category:{cat}")],
                }
            }
            Page::Category(name) => {
                let ids: Vec<u32> = (1..=PRODUCTS)
                    .filter(|i| category_of(*i) == *name)
                    .collect();
                let items: String = ids
                    .iter()
                    .map(|i| format!("<li><a href=\"/product/{i}\">Product {i}</a></li>\n"))
                    .collect();
                let mut tags = vec![format!("category:{name}")];
                tags.extend(ids.iter().map(|i| format!("product:{i}")));
                Rendered {
                    html: format!(
                        "<!doctype html><title>{name}</title>\n<h1>Category {name}</h1>\n<ul>\n{items}</ul>\n\
                         <footer>{stamp}</footer>\n"
                    ),
                    tags,
                }
            }
        }
    }

    /// The in-process flight mutex of `path`, with a guard that forgets it when the last
    /// user lets go (so the map holds only paths being worked on).
    fn flight(self: &Arc<Self>, path: &str) -> FlightRef {
        let m = self
            .flights
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(path.to_string())
            .or_default()
            .clone();
        FlightRef {
            app: self.clone(),
            path: path.to_string(),
            mutex: m,
        }
    }

    /// Renders and stores `page`, unless someone (in this process or another instance)
    /// stored a page that `done` accepts meanwhile; returns the HTML now cached.
    /// `done` is "the page exists" for a miss and "the page is fresh" for a revalidation.
    async fn fill(
        self: &Arc<Self>,
        page: &Page,
        done: impl Fn(&Cached) -> bool,
    ) -> redis::RedisResult<Option<String>> {
        let path = page.path();
        let flight = self.flight(&path);
        let _mine = flight.mutex.lock().await;
        let deadline = now_ms() + 4 * self.cfg.lock_ms;
        loop {
            if let Some(c) = self.find(&path, false).await? {
                if done(&c) {
                    return Ok(Some(c.html));
                }
            }
            if let Some(token) = self.try_lock(&path).await? {
                // Re-read under the lock: another instance may have stored the page between
                // our read and our lock.
                let again = self.find(&path, false).await;
                if let Ok(Some(c)) = &again {
                    if done(c) {
                        self.unlock(&path, &token).await;
                        return Ok(Some(c.html.clone()));
                    }
                }
                let rendered = self.render(page).await;
                let stored = self.store(&path, &rendered, now_ms()).await;
                // Unlock only after the page is stored, so whoever takes the lock next
                // finds it.
                self.unlock(&path, &token).await;
                stored?;
                return Ok(Some(rendered.html));
            }
            // Another instance holds the lock and is rendering: wait for its page.
            if now_ms() > deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Re-renders a stale page once, in the background.
    fn revalidate(self: &Arc<Self>, page: Page) {
        let path = page.path();
        if !self
            .revalidating
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.clone())
        {
            return;
        }
        let app = self.clone();
        tokio::spawn(async move {
            // A page that vanished meanwhile (invalidated, expired) is not brought back
            // here: the next request renders it as a miss.
            let exists_and_fresh = |c: &Cached| app.is_fresh(c);
            let path2 = path.clone();
            let app2 = app.clone();
            let res = async move {
                if app2.find(&path2, false).await?.is_none() {
                    return Ok(None);
                }
                app2.fill(&page, exists_and_fresh).await
            }
            .await;
            match res {
                Ok(_) => {
                    app.stats
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .revalidations += 1
                }
                Err(e) => eprintln!("revalidate {path}: {e}"),
            }
            app.revalidating
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&path);
        });
    }

    fn count(&self, f: impl FnOnce(&mut Stats)) {
        f(&mut self.stats.lock().unwrap_or_else(|p| p.into_inner()));
    }

    async fn serve(self: &Arc<Self>, page: Page) -> Response {
        let path = page.path();
        let (state, html) = match self.find(&path, true).await {
            Err(e) => return bad_gateway(e),
            Ok(Some(c)) if self.is_fresh(&c) => {
                self.count(|s| s.hits += 1);
                ("HIT", c.html)
            }
            Ok(Some(c)) => {
                self.count(|s| s.stale += 1);
                self.revalidate(page);
                ("STALE", c.html)
            }
            Ok(None) => match self.fill(&page, |_| true).await {
                Err(e) => return bad_gateway(e),
                Ok(None) => {
                    return (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "another instance is still rendering this page\n",
                    )
                        .into_response()
                }
                Ok(Some(html)) => {
                    self.count(|s| s.misses += 1);
                    ("MISS", html)
                }
            },
        };
        (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::HeaderName::from_static("x-cache"), state),
            ],
            html,
        )
            .into_response()
    }
}

struct FlightRef {
    app: Arc<App>,
    path: String,
    mutex: Arc<tokio::sync::Mutex<()>>,
}

impl Drop for FlightRef {
    fn drop(&mut self) {
        let mut map = self.app.flights.lock().unwrap_or_else(|p| p.into_inner());
        // Clones are only made under this map's lock, so the count cannot grow while we look:
        // 2 means the map's and ours.
        if Arc::strong_count(&self.mutex) == 2 {
            map.remove(&self.path);
        }
    }
}

fn bad_gateway(e: redis::RedisError) -> Response {
    (StatusCode::BAD_GATEWAY, format!("tidecache: {e}\n")).into_response()
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "no such page\n").into_response()
}

async fn product(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    match id.parse::<u32>() {
        Ok(id) if (1..=PRODUCTS).contains(&id) => app.serve(Page::Product(id)).await,
        _ => not_found(),
    }
}

async fn category(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    match CATEGORIES.iter().find(|c| **c == name) {
        Some(c) => app.serve(Page::Category(c)).await,
        None => not_found(),
    }
}

/// `POST /invalidate/{tag}`: one `DOC.DELETE pages {"tags":tag}` removes every page
/// carrying the tag (the multikey index on `tags` finds them).
async fn invalidate(State(app): State<Arc<App>>, Path(tag): Path<String>) -> Response {
    let res: redis::RedisResult<i64> = redis::cmd("DOC.DELETE")
        .arg(COLLECTION)
        .arg(json!({ "tags": tag }).to_string())
        .query_async(&mut app.db.clone())
        .await;
    match res {
        Ok(n) => Json(json!({ "tag": tag, "deleted": n })).into_response(),
        Err(e) => bad_gateway(e),
    }
}

async fn stats(State(app): State<Arc<App>>) -> Response {
    let s = app.stats.lock().unwrap_or_else(|p| p.into_inner());
    Json(json!({
        "renders": s.renders,
        "renders_total": s.renders.values().sum::<u64>(),
        "hits": s.hits,
        "misses": s.misses,
        "stale": s.stale,
        "revalidations": s.revalidations,
    }))
    .into_response()
}

/// Sets the collection up; both commands are idempotent, so every instance runs them at
/// start. `DOC.EXPIREINDEX` creates the TTL index or changes its `expireAfterSeconds`.
async fn setup(db: &mut ConnectionManager, cfg: &Config) -> redis::RedisResult<()> {
    let ttl: String = redis::cmd("DOC.EXPIREINDEX")
        .arg(COLLECTION)
        .arg("lastRead")
        .arg(cfg.ttl_secs)
        .query_async(db)
        .await?;
    let tags: String = redis::cmd("DOC.CREATEINDEX")
        .arg(COLLECTION)
        .arg(r#"{"tags":1}"#)
        .query_async(db)
        .await?;
    println!(
        "collection {COLLECTION}: TTL index {ttl} (expireAfterSeconds {}), tag index {tags}",
        cfg.ttl_secs
    );
    Ok(())
}

async fn connect(cfg: &Config) -> Result<ConnectionManager, String> {
    let client = redis::Client::open(cfg.tidecache_url.as_str()).map_err(|e| e.to_string())?;
    // The server may still be starting (containers, the e2e test): retry for a while.
    let mut last = String::new();
    for _ in 0..50 {
        match ConnectionManager::new(client.clone()).await {
            Ok(c) => return Ok(c),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "cannot reach tidecache at {}: {last}",
        cfg.tidecache_url
    ))
}

#[tokio::main]
async fn main() {
    let cfg = match Config::load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut db = match connect(&cfg).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = setup(&mut db, &cfg).await {
        eprintln!("setting up the {COLLECTION} collection: {e}");
        std::process::exit(1);
    }
    let listener = match tokio::net::TcpListener::bind(&cfg.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("listen on {}: {e}", cfg.listen);
            std::process::exit(1);
        }
    };
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| cfg.listen.clone());
    let app = Arc::new(App {
        instance: format!("{}-{}", std::process::id(), now_ms()),
        cfg: cfg.clone(),
        db,
        stats: Mutex::default(),
        flights: Mutex::default(),
        revalidating: Mutex::default(),
        unlock: redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
        ),
    });
    let router = Router::new()
        .route("/product/{id}", get(product))
        .route("/category/{name}", get(category))
        .route("/invalidate/{tag}", post(invalidate))
        .route("/stats", get(stats))
        .with_state(app);
    println!(
        "page_cache listening on http://{addr} (tidecache {}, fresh {} ms, TTL {} s, render {} ms)",
        cfg.tidecache_url, cfg.fresh_ms, cfg.ttl_secs, cfg.render_delay_ms
    );
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Err(e) = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
    {
        eprintln!("server: {e}");
        std::process::exit(1);
    }
}
