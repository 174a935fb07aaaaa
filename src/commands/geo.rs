//! The geo family: points stored in sorted sets, scored by a 52-bit interleaved geohash, as
//! Redis 7.0 (`geo.c`, `geohash.c`, `geohash_helper.c`). Searches visit the same nine geohash
//! boxes as Redis, in the same order, so unsorted replies and `COUNT ... ANY` pick the same
//! members.
use crate::commands::args::{Args, CommandError, CommandResult};
use crate::commands::spec::{acl, family, flag::*, Begin, CmdResult, CommandSpec, Find, KeySpec};
use crate::commands::zsets::{parse_score, read_zset, store_result, zadd_generic, AddFlags, Build};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::store::zset::ZSetValue;
use bytes::Bytes;

const GEO: CommandSpec = family("geo", acl::GEO);

const RADIUS_STORE: &[KeySpec] = &[
    KeySpec {
        flags: &["RO", "access"],
        begin: Begin::Index(1),
        find: Find::Range {
            last: 0,
            step: 1,
            limit: 0,
        },
    },
    KeySpec {
        flags: &["OW", "update"],
        begin: Begin::Keyword {
            keyword: "STORE",
            start_from: 6,
        },
        find: Find::Range {
            last: 0,
            step: 1,
            limit: 0,
        },
    },
    KeySpec {
        flags: &["OW", "update"],
        begin: Begin::Keyword {
            keyword: "STOREDIST",
            start_from: 6,
        },
        find: Find::Range {
            last: 0,
            step: 1,
            limit: 0,
        },
    },
];
const BYMEMBER_STORE: &[KeySpec] = &[
    KeySpec {
        flags: &["RO", "access"],
        begin: Begin::Index(1),
        find: Find::Range {
            last: 0,
            step: 1,
            limit: 0,
        },
    },
    KeySpec {
        flags: &["OW", "update"],
        begin: Begin::Keyword {
            keyword: "STORE",
            start_from: 5,
        },
        find: Find::Range {
            last: 0,
            step: 1,
            limit: 0,
        },
    },
    KeySpec {
        flags: &["OW", "update"],
        begin: Begin::Keyword {
            keyword: "STOREDIST",
            start_from: 5,
        },
        find: Find::Range {
            last: 0,
            step: 1,
            limit: 0,
        },
    },
];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    GEO.cmd("geoadd", -5, geoadd).flags(WRITE | DENYOOM).key().key_specs(crate::commands::zsets::KS_RW_UPDATE)
        .doc("3.2.0", "Add one or more geospatial items in the geospatial index represented using a sorted set")
        .complexity("O(log(N)) for each item added, where N is the number of elements in the sorted set.")
        .args("key:key [condition:(NX|XX)] [change=CH] longitude_latitude_member:{longitude:double latitude:double member}..."),
    GEO.cmd("geodist", -4, geodist).flags(READONLY).key().key_specs(crate::commands::zsets::KS_RO_ACCESS)
        .doc("3.2.0", "Returns the distance between two members of a geospatial index")
        .complexity("O(log(N))")
        .args("key:key member1 member2 [unit:(M|KM|FT|MI)]"),
    GEO.cmd("geohash", -2, geohash).flags(READONLY).key().key_specs(crate::commands::zsets::KS_RO_ACCESS)
        .doc("3.2.0", "Returns members of a geospatial index as standard geohash strings")
        .complexity("O(log(N)) for each member requested, where N is the number of elements in the sorted set.")
        .args("key:key [member...]"),
    GEO.cmd("geopos", -2, geopos).flags(READONLY).key().key_specs(crate::commands::zsets::KS_RO_ACCESS)
        .doc("3.2.0", "Returns longitude and latitude of members of a geospatial index")
        .complexity("O(N) where N is the number of members requested.")
        .args("key:key [member...]"),
    GEO.cmd("geosearch", -7, geosearch).flags(READONLY).key().key_specs(crate::commands::zsets::KS_RO_ACCESS)
        .doc("6.2.0", "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.")
        .complexity("O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape")
        .args("key:key from:(FROMMEMBER=member|FROMLONLAT=longitude_latitude:{longitude:double latitude:double}) by:(circle:{BYRADIUS=radius:double unit:(M|KM|FT|MI)}|box:{BYBOX=width:double height:double unit:(M|KM|FT|MI)}) [order:(ASC|DESC)] [count-block:{COUNT=count:integer [ANY]}] [WITHCOORD] [WITHDIST] [WITHHASH]"),
    GEO.cmd("geosearchstore", -8, geosearchstore).flags(WRITE | DENYOOM).keys(1, 2, 1).key_specs(crate::commands::zsets::DST_SRC)
        .doc("6.2.0", "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.")
        .complexity("O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape")
        .args("destination:key source:key from:(FROMMEMBER=member|FROMLONLAT=longitude_latitude:{longitude:double latitude:double}) by:(circle:{BYRADIUS=radius:double unit:(M|KM|FT|MI)}|box:{BYBOX=width:double height:double unit:(M|KM|FT|MI)}) [order:(ASC|DESC)] [count-block:{COUNT=count:integer [ANY]}] [STOREDIST]"),
    GEO.cmd("georadius", -6, georadius).flags(WRITE | DENYOOM | MOVABLEKEYS).key().key_specs(RADIUS_STORE)
        .doc("3.2.0", "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point")
        .complexity("O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.")
        .args("key:key longitude:double latitude:double radius:double unit:(M|KM|FT|MI) [WITHCOORD] [WITHDIST] [WITHHASH] [count-block:{COUNT=count:integer [ANY]}] [order:(ASC|DESC)] [STORE=key:key] [STOREDIST=key:key]"),
    GEO.cmd("georadius_ro", -6, georadius_ro).flags(READONLY).key().key_specs(crate::commands::zsets::KS_RO_ACCESS)
        .doc("3.2.10", "A read-only variant for GEORADIUS")
        .complexity("O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.")
        .args("key:key longitude:double latitude:double radius:double unit:(M|KM|FT|MI) [WITHCOORD] [WITHDIST] [WITHHASH] [count-block:{COUNT=count:integer [ANY]}] [order:(ASC|DESC)]"),
    GEO.cmd("georadiusbymember", -5, georadiusbymember).flags(WRITE | DENYOOM | MOVABLEKEYS).key().key_specs(BYMEMBER_STORE)
        .doc("3.2.0", "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member")
        .complexity("O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.")
        .args("key:key member radius:double unit:(M|KM|FT|MI) [WITHCOORD] [WITHDIST] [WITHHASH] [count-block:{COUNT=count:integer [ANY]}] [order:(ASC|DESC)] [STORE=key:key] [STOREDIST=key:key]"),
    GEO.cmd("georadiusbymember_ro", -5, georadiusbymember_ro).flags(READONLY).key().key_specs(crate::commands::zsets::KS_RO_ACCESS)
        .doc("3.2.10", "A read-only variant for GEORADIUSBYMEMBER")
        .complexity("O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.")
        .args("key:key member radius:double unit:(M|KM|FT|MI) [WITHCOORD] [WITHDIST] [WITHHASH] [count-block:{COUNT=count:integer [ANY]}] [order:(ASC|DESC)]"),
];

// ---------------------------------------------------------------------------------------
// Geohash (geohash.c / geohash_helper.c)

const LONG_MIN: f64 = -180.0;
const LONG_MAX: f64 = 180.0;
const LAT_MIN: f64 = -85.05112878;
const LAT_MAX: f64 = 85.05112878;
const STEP_MAX: u8 = 26;
const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
struct Hash {
    bits: u64,
    step: u8,
}

impl Hash {
    fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Area {
    lon_min: f64,
    lon_max: f64,
    lat_min: f64,
    lat_max: f64,
}

fn deg_rad(a: f64) -> f64 {
    a * D_R
}
fn rad_deg(a: f64) -> f64 {
    a / D_R
}

fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let mut x = xlo as u64;
    let mut y = ylo as u64;
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

fn deinterleave64(v: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let mut x = v;
    let mut y = v >> 1;
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// `geohashEncode` over the given ranges (longitude range, latitude range).
fn encode(lon_r: (f64, f64), lat_r: (f64, f64), lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.0 || lat > lat_r.1 || lon < lon_r.0 || lon > lon_r.1 {
        return None;
    }
    let mut lat_off = (lat - lat_r.0) / (lat_r.1 - lat_r.0);
    let mut lon_off = (lon - lon_r.0) / (lon_r.1 - lon_r.0);
    lat_off *= (1u64 << step) as f64;
    lon_off *= (1u64 << step) as f64;
    Some(Hash {
        bits: interleave64(lat_off as u32, lon_off as u32),
        step,
    })
}

fn encode_wgs84(lon: f64, lat: f64, step: u8) -> Option<Hash> {
    encode((LONG_MIN, LONG_MAX), (LAT_MIN, LAT_MAX), lon, lat, step)
}

fn decode(h: Hash) -> Option<Area> {
    if h.is_zero() {
        return None;
    }
    let sep = deinterleave64(h.bits);
    let lat_scale = LAT_MAX - LAT_MIN;
    let lon_scale = LONG_MAX - LONG_MIN;
    let ilato = sep as u32;
    let ilono = (sep >> 32) as u32;
    let div = (1u64 << h.step) as f64;
    Some(Area {
        lat_min: LAT_MIN + (ilato as f64 / div) * lat_scale,
        lat_max: LAT_MIN + ((ilato as f64 + 1.0) / div) * lat_scale,
        lon_min: LONG_MIN + (ilono as f64 / div) * lon_scale,
        lon_max: LONG_MIN + ((ilono as f64 + 1.0) / div) * lon_scale,
    })
}

/// A member's score back to (longitude, latitude), the center of its cell.
fn decode_score(score: f64) -> Option<(f64, f64)> {
    let a = decode(Hash {
        bits: score as u64,
        step: STEP_MAX,
    })?;
    let lon = ((a.lon_min + a.lon_max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.lat_min + a.lat_max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    Some((lon, lat))
}

fn align52(h: Hash) -> u64 {
    h.bits << (52 - h.step as u32 * 2)
}

fn move_x(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = h.bits & 0xaaaaaaaaaaaaaaaa;
    let y = h.bits & 0x5555555555555555;
    let zz = 0x5555555555555555u64 >> (64 - h.step as u32 * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> (64 - h.step as u32 * 2);
    h.bits = x | y;
}

fn move_y(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let x = h.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = h.bits & 0x5555555555555555;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> (64 - h.step as u32 * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> (64 - h.step as u32 * 2);
    h.bits = x | y;
}

/// The nine boxes in Redis's order: self, N, S, E, W, NE, NW, SE, SW.
fn neighbors(h: Hash) -> [Hash; 9] {
    let mv = |dx: i8, dy: i8| {
        let mut n = h;
        move_x(&mut n, dx);
        move_y(&mut n, dy);
        n
    };
    [
        h,
        mv(0, 1),
        mv(0, -1),
        mv(1, 0),
        mv(-1, 0),
        mv(1, 1),
        mv(-1, 1),
        mv(1, -1),
        mv(-1, -1),
    ]
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

fn estimate_steps(mut range: f64, lat: f64) -> u8 {
    if range == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

#[derive(Clone, Copy, Debug)]
enum ShapeKind {
    Radius(f64),
    Box(f64, f64),
}

#[derive(Clone, Copy, Debug)]
struct Shape {
    lon: f64,
    lat: f64,
    conversion: f64,
    kind: ShapeKind,
}

impl Shape {
    fn bounds(&self) -> [f64; 4] {
        let (h, w) = match self.kind {
            ShapeKind::Radius(r) => (r, r),
            ShapeKind::Box(w, h) => (h / 2.0, w / 2.0),
        };
        let height = self.conversion * h;
        let width = self.conversion * w;
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let top = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(self.lat + lat_delta).cos());
        let bottom = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(self.lat - lat_delta).cos());
        let south = self.lat < 0.0;
        [
            if south {
                self.lon - bottom
            } else {
                self.lon - top
            },
            self.lat - lat_delta,
            if south {
                self.lon + bottom
            } else {
                self.lon + top
            },
            self.lat + lat_delta,
        ]
    }

    /// `geohashCalculateAreasByShapeWGS84`: the nine boxes to search (zeroed when useless).
    fn areas(&self) -> [Hash; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let radius = match self.kind {
            ShapeKind::Radius(r) => r,
            ShapeKind::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
        } * self.conversion;
        let mut steps = estimate_steps(radius, self.lat);
        let mut hash = encode_wgs84(self.lon, self.lat, steps).unwrap_or_default();
        let mut n = neighbors(hash);
        let mut area = decode(hash).unwrap_or_default();
        let dec = |h: Hash| decode(h).unwrap_or_default();
        let decrease = dec(n[1]).lat_max < max_lat
            || dec(n[2]).lat_min > min_lat
            || dec(n[3]).lon_max < max_lon
            || dec(n[4]).lon_min > min_lon;
        if steps > 1 && decrease {
            steps -= 1;
            hash = encode_wgs84(self.lon, self.lat, steps).unwrap_or_default();
            n = neighbors(hash);
            area = decode(hash).unwrap_or_default();
        }
        if steps >= 2 {
            let z = Hash::default();
            if area.lat_min < min_lat {
                n[2] = z; // south
                n[8] = z; // south west
                n[7] = z; // south east
            }
            if area.lat_max > max_lat {
                n[1] = z;
                n[5] = z;
                n[6] = z;
            }
            if area.lon_min < min_lon {
                n[4] = z;
                n[8] = z;
                n[6] = z;
            }
            if area.lon_max > max_lon {
                n[3] = z;
                n[7] = z;
                n[5] = z;
            }
        }
        n
    }

    /// Whether a point is inside, with its distance (meters) from the center.
    fn contains(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.kind {
            ShapeKind::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                (d <= r * self.conversion).then_some(d)
            }
            ShapeKind::Box(w, h) => {
                let (wm, hm) = (w * self.conversion, h * self.conversion);
                if lat_distance(lat, self.lat) > hm / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > wm / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }
}

struct Point {
    member: Vec<u8>,
    lon: f64,
    lat: f64,
    dist: f64,
    score: f64,
}

/// `membersOfAllNeighbors`: the points of `z` inside `shape`, box by box; stops once
/// `limit` (0: none) were found.
fn search(z: &ZSetValue, shape: &Shape, limit: usize) -> Vec<Point> {
    let boxes = shape.areas();
    let mut out = Vec::new();
    let mut last: Option<usize> = None;
    for (i, b) in boxes.iter().enumerate() {
        if b.is_zero() {
            continue;
        }
        if let Some(l) = last {
            if boxes[l] == *b {
                continue;
            }
        }
        if !out.is_empty() && limit > 0 && out.len() >= limit {
            break;
        }
        let min = align52(*b) as f64;
        let max = align52(Hash {
            bits: b.bits + 1,
            step: b.step,
        }) as f64;
        let start = z.count_before(|s, _| s < min);
        for (m, s) in z.iter_from(start, false) {
            if s >= max {
                break;
            }
            if let Some((lon, lat)) = decode_score(s) {
                if let Some(d) = shape.contains(lon, lat) {
                    out.push(Point {
                        member: m.to_vec(),
                        lon,
                        lat,
                        dist: d,
                        score: s,
                    });
                }
            }
            if !out.is_empty() && limit > 0 && out.len() >= limit {
                break;
            }
        }
        last = Some(i);
    }
    out
}

// ---------------------------------------------------------------------------------------
// Arguments and replies

fn lon_lat(lon: &[u8], lat: &[u8]) -> CommandResult<(f64, f64)> {
    let lon = parse_score(lon)?;
    let lat = parse_score(lat)?;
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return Err(CommandError::msg(format!(
            "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

fn unit(u: &[u8]) -> CommandResult<f64> {
    match &*crate::commands::args::Token::of(u) {
        b"M" => Ok(1.0),
        b"KM" => Ok(1000.0),
        b"FT" => Ok(0.3048),
        b"MI" => Ok(1609.34),
        _ => Err(CommandError::msg(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        )),
    }
}

fn float_or(b: &[u8], msg: &'static str) -> CommandResult<f64> {
    parse_score(b).map_err(|_| CommandError::msg(msg))
}

/// `<radius> <unit>` as `extractDistanceOrReply`: (radius, conversion).
fn radius_unit(r: &[u8], u: &[u8]) -> CommandResult<(f64, f64)> {
    let r = float_or(r, "ERR need numeric radius")?;
    if r < 0.0 {
        return Err(CommandError::msg("ERR radius cannot be negative"));
    }
    Ok((r, unit(u)?))
}

/// Redis's `LD_STR_HUMAN`: `%.17Lf` without trailing zeros.
fn human(d: f64) -> String {
    let s = format!("{d:.17}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// A coordinate: Redis's human long double text (`addReplyHumanLongDouble`), a bulk string
/// in RESP2 and a RESP3 double with the same digits. The shortest `%.17g` digits would be
/// the same value for an exact parser, but clients that parse RESP3 doubles digit by digit
/// (node-redis) then get a number one ulp away from what redis-server gives them.
fn coord_reply(d: f64, resp3: bool) -> Reply {
    if resp3 {
        return Reply::Encoded(format!(",{}\r\n", human(d)).into());
    }
    Reply::bulk(human(d))
}

fn dist_reply(d: f64) -> Reply {
    Reply::bulk(format!("{d:.4}"))
}

// ---------------------------------------------------------------------------------------
// Commands

fn geoadd(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let mut f = AddFlags::default();
    while let Some(a) = args.peek() {
        match &*crate::commands::args::Token::of(a) {
            b"NX" => f.nx = true,
            b"XX" => f.xx = true,
            b"CH" => f.ch = true,
            _ => break,
        }
        args.next_opt();
    }
    let rest = args.rest();
    if !rest.len().is_multiple_of(3) || (f.nx && f.xx) {
        return Err(CommandError::syntax());
    }
    let mut pairs = Vec::new();
    for t in rest.chunks_exact(3) {
        let (lon, lat) = lon_lat(&t[0], &t[1])?;
        let h = encode_wgs84(lon, lat, STEP_MAX).unwrap_or_default();
        pairs.push((align52(h) as f64, &t[2]));
    }
    zadd_generic(ctx, key, f, &pairs)
}

fn geodist(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let (a, b) = (args.next_arg()?, args.next_arg()?);
    let conv = match args.len() {
        0 => 1.0,
        1 => unit(args.next_arg()?)?,
        _ => return Err(CommandError::syntax()),
    };
    read_zset(ctx, key, |z| {
        let Some(z) = z else { return Reply::Nil };
        match (
            z.score(a).and_then(decode_score),
            z.score(b).and_then(decode_score),
        ) {
            (Some(p), Some(q)) => dist_reply(distance(p.0, p.1, q.0, q.1) / conv),
            _ => Reply::Nil,
        }
    })
}

fn geohash(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    const ALPHABET: &[u8] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let key = args.next_key()?;
    let members = args.rest();
    read_zset(ctx, key, |z| {
        Reply::Array(
            members
                .iter()
                .map(|m| {
                    let Some((lon, lat)) = z.and_then(|z| z.score(m)).and_then(decode_score) else {
                        return Reply::Nil;
                    };
                    let h =
                        encode((-180.0, 180.0), (-90.0, 90.0), lon, lat, 26).unwrap_or_default();
                    let mut buf = Vec::with_capacity(11);
                    for i in 0..11 {
                        let idx = if i == 10 {
                            0
                        } else {
                            (h.bits >> (52 - (i + 1) * 5)) & 0x1f
                        };
                        buf.push(ALPHABET[idx as usize]);
                    }
                    Reply::bulk(buf)
                })
                .collect(),
        )
    })
}

fn geopos(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let resp3 = ctx.client.resp3;
    let key = args.next_key()?;
    let members = args.rest();
    read_zset(ctx, key, |z| {
        Reply::Array(
            members
                .iter()
                .map(
                    |m| match z.and_then(|z| z.score(m)).and_then(decode_score) {
                        None => Reply::NilArray,
                        Some((lon, lat)) => {
                            Reply::Array(vec![coord_reply(lon, resp3), coord_reply(lat, resp3)])
                        }
                    },
                )
                .collect(),
        )
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    Radius,
    RadiusRo,
    ByMember,
    ByMemberRo,
    Search,
    SearchStore,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// The position of a member of the set at `src`.
fn member_pos(ctx: &mut Ctx<'_>, src: &[u8], m: &[u8]) -> CommandResult<(f64, f64)> {
    read_zset(ctx, src, |z| {
        z.and_then(|z| z.score(m)).and_then(decode_score)
    })?
    .ok_or_else(|| CommandError::msg("ERR could not decode requested zset member"))
}

/// `georadiusGeneric`: every GEORADIUS* and GEOSEARCH* form.
fn radius_generic(ctx: &mut Ctx<'_>, args: &mut Args<'_>, v: Variant) -> CmdResult {
    let all = args.rest();
    // Positions in `all` are Redis's argv minus the command name.
    let (src_idx, base) = match v {
        Variant::Radius | Variant::RadiusRo => (0, 5),
        Variant::ByMember | Variant::ByMemberRo => (0, 4),
        Variant::Search => (0, 1),
        Variant::SearchStore => (1, 2),
    };
    if all.len() < base {
        return Err(CommandError::WrongArity);
    }
    let src = &all[src_idx];
    let geosearch = matches!(v, Variant::Search | Variant::SearchStore);
    let nostore = matches!(v, Variant::RadiusRo | Variant::ByMemberRo);
    let resp3 = ctx.client.resp3;
    let db = ctx.client.db;

    let src_exists = read_zset(ctx, src, |z| z.is_some())?;

    let mut center: Option<(f64, f64)> = None;
    let mut kind: Option<ShapeKind> = None;
    let mut conversion = 1.0;
    let mut storekey: Option<&Bytes> = if v == Variant::SearchStore {
        Some(&all[0])
    } else {
        None
    };
    match v {
        Variant::Radius | Variant::RadiusRo => {
            center = Some(lon_lat(&all[1], &all[2])?);
            let (r, c) = radius_unit(&all[3], &all[4])?;
            kind = Some(ShapeKind::Radius(r));
            conversion = c;
        }
        Variant::ByMember | Variant::ByMemberRo if src_exists => {
            center = Some(member_pos(ctx, src, &all[1])?);
            let (r, c) = radius_unit(&all[2], &all[3])?;
            kind = Some(ShapeKind::Radius(r));
            conversion = c;
        }
        _ => {}
    }

    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut storedist = false;
    let mut sort = Sort::None;
    let mut count: i64 = 0;
    let rest = &all[base..];
    let remaining = rest.len();
    let mut i = 0;
    while i < remaining {
        let t = crate::commands::args::Token::of(&rest[i]);
        match &*t {
            b"WITHDIST" => withdist = true,
            b"WITHHASH" => withhash = true,
            b"WITHCOORD" => withcoord = true,
            b"ANY" => any = true,
            b"ASC" => sort = Sort::Asc,
            b"DESC" => sort = Sort::Desc,
            b"COUNT" if i + 1 < remaining => {
                count = crate::util::num::parse_i64(&rest[i + 1])
                    .ok_or_else(CommandError::not_integer)?;
                if count <= 0 {
                    return Err(CommandError::msg("ERR COUNT must be > 0"));
                }
                i += 1;
            }
            b"STORE" | b"STOREDIST" if i + 1 < remaining && !nostore && !geosearch => {
                storekey = Some(&rest[i + 1]);
                storedist = &*t == b"STOREDIST";
                i += 1;
            }
            b"STOREDIST" if v == Variant::SearchStore => storedist = true,
            b"FROMMEMBER" if i + 1 < remaining && geosearch && !fromloc => {
                if src_exists {
                    center = Some(member_pos(ctx, src, &rest[i + 1])?);
                }
                frommember = true;
                i += 1;
            }
            b"FROMLONLAT" if i + 2 < remaining && geosearch && !frommember => {
                center = Some(lon_lat(&rest[i + 1], &rest[i + 2])?);
                fromloc = true;
                i += 2;
            }
            b"BYRADIUS" if i + 2 < remaining && geosearch && !bybox => {
                let (r, c) = radius_unit(&rest[i + 1], &rest[i + 2])?;
                kind = Some(ShapeKind::Radius(r));
                conversion = c;
                byradius = true;
                i += 2;
            }
            b"BYBOX" if i + 3 < remaining && geosearch && !byradius => {
                let w = float_or(&rest[i + 1], "ERR need numeric width")?;
                let h = float_or(&rest[i + 2], "ERR need numeric height")?;
                if h < 0.0 || w < 0.0 {
                    return Err(CommandError::msg("ERR height or width cannot be negative"));
                }
                conversion = unit(&rest[i + 3])?;
                kind = Some(ShapeKind::Box(w, h));
                bybox = true;
                i += 3;
            }
            _ => return Err(CommandError::syntax()),
        }
        i += 1;
    }
    let name = String::from_utf8_lossy(args.name()).into_owned();
    if storekey.is_some() && (withdist || withhash || withcoord) {
        return Err(CommandError::msg(format!(
            "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if v == Variant::SearchStore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        )));
    }
    if geosearch && !(frommember || fromloc) {
        return Err(CommandError::msg(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if geosearch && !(byradius || bybox) {
        return Err(CommandError::msg(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(CommandError::msg(
            "ERR the ANY argument requires COUNT argument",
        ));
    }
    let (true, Some((lon, lat)), Some(kind)) = (src_exists, center, kind) else {
        // No source key.
        if let Some(dst) = storekey {
            let mut l = ctx.server.store.lock_keys(&[dst]);
            let h = l.hash(0);
            store_result(
                ctx,
                l.ks(0, db),
                h,
                dst,
                Vec::new(),
                "geosearchstore",
                Build::Shrink,
            );
            return Ok(Reply::Int(0));
        }
        return Ok(Reply::Array(vec![]));
    };
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let shape = Shape {
        lon,
        lat,
        conversion,
        kind,
    };
    let limit = if any { count as usize } else { 0 };
    let mut keys = vec![src];
    keys.extend(storekey);
    let mut l = ctx.server.store.lock_keys(&keys);
    let h = l.hash(0);
    let mut pts = l.ks(0, db).read_as::<ZSetValue, _>(h, src, |z| {
        z.map_or_else(Vec::new, |z| search(z, &shape, limit))
    })?;
    match sort {
        Sort::Asc => pts.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => pts.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Sort::None => {}
    }
    if count > 0 {
        pts.truncate(count as usize);
    }
    for p in pts.iter_mut() {
        p.dist /= conversion;
    }
    match storekey {
        None => {
            let opts = withdist as usize + withhash as usize + withcoord as usize;
            Ok(Reply::Array(
                pts.into_iter()
                    .map(|p| {
                        let m = Reply::bulk(p.member);
                        if opts == 0 {
                            return m;
                        }
                        let mut v = vec![m];
                        if withdist {
                            v.push(dist_reply(p.dist));
                        }
                        if withhash {
                            v.push(Reply::Int(p.score as i64));
                        }
                        if withcoord {
                            v.push(Reply::Array(vec![
                                coord_reply(p.lon, resp3),
                                coord_reply(p.lat, resp3),
                            ]));
                        }
                        Reply::Array(v)
                    })
                    .collect(),
            ))
        }
        Some(dst) => {
            let entries: Vec<(Vec<u8>, f64)> = pts
                .into_iter()
                .map(|p| (p.member, if storedist { p.dist } else { p.score }))
                .collect();
            let event = if geosearch {
                "geosearchstore"
            } else {
                "georadiusstore"
            };
            let h = l.hash(1);
            let n = store_result(ctx, l.ks(1, db), h, dst, entries, event, Build::Shrink);
            Ok(Reply::Int(n as i64))
        }
    }
}

fn georadius(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    radius_generic(ctx, args, Variant::Radius)
}
fn georadius_ro(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    radius_generic(ctx, args, Variant::RadiusRo)
}
fn georadiusbymember(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    radius_generic(ctx, args, Variant::ByMember)
}
fn georadiusbymember_ro(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    radius_generic(ctx, args, Variant::ByMemberRo)
}
fn geosearch(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    radius_generic(ctx, args, Variant::Search)
}
fn geosearchstore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    radius_generic(ctx, args, Variant::SearchStore)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_decodes_as_redis() {
        let h = encode_wgs84(13.361389, 38.115556, STEP_MAX).unwrap();
        assert_eq!(align52(h), 3479099956230698);
        let (lon, lat) = decode_score(3479099956230698.0).unwrap();
        assert_eq!(human(lon), "13.36138933897018433");
        assert_eq!(human(lat), "38.11555639549629859");
        let (lon2, lat2) =
            decode_score(align52(encode_wgs84(15.087269, 37.502669, 26).unwrap()) as f64).unwrap();
        assert_eq!(
            format!("{:.4}", distance(lon, lat, lon2, lat2) / 1000.0),
            "166.2742"
        );
    }
}
