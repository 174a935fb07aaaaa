//! The Redis Cluster bus: encoder and decoder of the messages nodes exchange on the cluster
//! port, byte for byte as Redis 7.0.15 lays them out (`clusterMsg` in its `cluster.h`).
//!
//! Every message is a fixed 2,256-byte header followed by a body whose layout depends on the
//! type. Integers are big-endian, with one exception Redis itself makes: the module id of a
//! MODULE message is copied in the sender's byte order (see [`Body::Module`]). Strings in
//! fixed fields (addresses) are NUL-terminated; node names are 40 raw bytes, all zero for
//! "none".
//!
//! PING, PONG and MEET carry `count` gossip entries of 104 bytes and then, when
//! [`mflag0::EXT_DATA`] is set, `extensions` ping extensions: an 8-byte header (length
//! including the header, type, two unused bytes) and a payload padded to a multiple of 8.
//! Redis 7.0 knows the hostname extension only; 7.2 adds the human nodename, the forgotten
//! node and the shard id (numbers in [`ext_type`]), and sends the shard id on every ping.
//! A 7.0 node skips extension types it does not know, and so does [`decode`]: they come
//! back as [`Ext::Unknown`].
//!
//! [`decode`] accepts what 7.0.15's `clusterReadHandler` and `clusterProcessPacket` accept
//! (the checks are listed on [`frame_len`] and [`decode`]), less the malformed frames on
//! which upstream Redis reads past the end of the packet and which its security-patched
//! builds drop.

use std::fmt;

/// Hash slots in a cluster.
pub const SLOTS: usize = 16384;
/// Length of a node name (40 hex characters, the SHA-1 length Redis uses).
pub const NAME_LEN: usize = 40;
/// `NET_IP_STR_LEN`: the fixed size of an address field, NUL terminator included.
pub const IP_LEN: usize = 46;
/// `CLUSTERMSG_MIN_LEN`: the header every message starts with; no message is shorter.
pub const HEADER_LEN: usize = 2256;
/// Size of one gossip entry (`clusterMsgDataGossip`).
pub const GOSSIP_LEN: usize = 104;

/// A node name: 40 lowercase hex characters; all zero means "no node".
pub type NodeName = [u8; NAME_LEN];
/// One bit per hash slot; see [`slot_bit`] for the bit order.
pub type SlotBitmap = [u8; SLOTS / 8];

/// The signature every message starts with ("Redis Cluster message bus").
pub const SIGNATURE: [u8; 4] = *b"RCmb";
/// `CLUSTER_PROTO_VER`: the only version Redis processes.
pub const PROTO_VER: u16 = 1;

/// Size of a ping extension's header (`clusterMsgPingExt` without its payload).
pub const EXT_HEADER_LEN: usize = 8;
/// Total length of a FAIL message.
pub const FAIL_LEN: usize = HEADER_LEN + NAME_LEN;
/// Total length of an UPDATE message (config epoch, node name, slot bitmap).
pub const UPDATE_LEN: usize = HEADER_LEN + 8 + NAME_LEN + SLOTS / 8;
/// Where a PUBLISH message's channel starts: after the two 32-bit lengths.
const PUBLISH_DATA: usize = HEADER_LEN + 8;
/// Where a MODULE message's payload starts: after the module id, the length and the type.
const MODULE_DATA: usize = HEADER_LEN + 8 + 4 + 1;

/// Message types (`CLUSTERMSG_TYPE_*`).
pub mod msg_type {
    /// Ping, answered with a PONG; carries gossip and extensions.
    pub const PING: u16 = 0;
    /// Reply to PING and MEET, same layout as PING; also broadcast on config changes.
    pub const PONG: u16 = 1;
    /// A PING that makes the receiver add the sender to its node table.
    pub const MEET: u16 = 2;
    /// A node is failing: every receiver marks it FAIL.
    pub const FAIL: u16 = 3;
    /// Pub/Sub PUBLISH propagated to the whole cluster.
    pub const PUBLISH: u16 = 4;
    /// A replica asks masters for their vote in a failover.
    pub const FAILOVER_AUTH_REQUEST: u16 = 5;
    /// A master grants its vote.
    pub const FAILOVER_AUTH_ACK: u16 = 6;
    /// Another node's slot configuration, sent to a node whose view is stale.
    pub const UPDATE: u16 = 7;
    /// A replica asks its master to pause clients for a manual failover.
    pub const MFSTART: u16 = 8;
    /// A module's message (cluster API of modules).
    pub const MODULE: u16 = 9;
    /// Sharded Pub/Sub SPUBLISH, propagated within the shard.
    pub const PUBLISHSHARD: u16 = 10;
    /// Number of types Redis 7.0 knows; higher numbers are unknown types.
    pub const COUNT: u16 = 11;
}

/// Node flags (`CLUSTER_NODE_*`), in the header's `flags` and in each gossip entry.
pub mod node_flag {
    pub const MASTER: u16 = 1;
    pub const SLAVE: u16 = 2;
    /// Possibly failing: not answering within the node timeout.
    pub const PFAIL: u16 = 4;
    /// Failing, as agreed by a majority of masters.
    pub const FAIL: u16 = 8;
    pub const MYSELF: u16 = 16;
    /// Still in the first exchange; the name is a placeholder.
    pub const HANDSHAKE: u16 = 32;
    /// Address unknown.
    pub const NOADDR: u16 = 64;
    /// A MEET is to be sent rather than a PING.
    pub const MEET: u16 = 128;
    /// Master eligible for replica migration.
    pub const MIGRATE_TO: u16 = 256;
    /// Replica that does not try to fail over.
    pub const NOFAILOVER: u16 = 512;
}

/// Bits of `mflags[0]` (`CLUSTERMSG_FLAG0_*`).
pub mod mflag0 {
    /// The sending master is paused for a manual failover.
    pub const PAUSED: u8 = 1;
    /// Vote for this failover request even though the master is up (manual failover).
    pub const FORCEACK: u8 = 2;
    /// The message carries ping extensions; [`encode`](super::encode) sets it from the body.
    pub const EXT_DATA: u8 = 4;
}

/// Ping extension types (`CLUSTERMSG_EXT_TYPE_*`). Hostname is the only one in Redis 7.0;
/// the others are 7.2.0's numbering (7.2's release candidates numbered them differently).
pub mod ext_type {
    pub const HOSTNAME: u16 = 0;
    pub const HUMAN_NODENAME: u16 = 1;
    pub const FORGOTTEN_NODE: u16 = 2;
    pub const SHARDID: u16 = 3;
}

/// Offsets of the header's fields (the `static_assert`s under `clusterMsg` in `cluster.h`).
mod off {
    pub const TOTLEN: usize = 4;
    pub const VER: usize = 8;
    pub const PORT: usize = 10;
    pub const TYPE: usize = 12;
    pub const COUNT: usize = 14;
    pub const CURRENT_EPOCH: usize = 16;
    pub const CONFIG_EPOCH: usize = 24;
    pub const OFFSET: usize = 32;
    pub const SENDER: usize = 40;
    pub const MYSLOTS: usize = 80;
    pub const SLAVEOF: usize = 2128;
    pub const MYIP: usize = 2168;
    pub const EXTENSIONS: usize = 2214;
    pub const PPORT: usize = 2246;
    pub const CPORT: usize = 2248;
    pub const FLAGS: usize = 2250;
    pub const STATE: usize = 2252;
    pub const MFLAGS: usize = 2253;
}

/// The header of every message (`clusterMsg` up to its `data` union).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Message type, one of [`msg_type`].
    pub ty: u16,
    /// The sender's client port (its TLS port when it serves TLS).
    pub port: u16,
    /// Gossip entries in a PING, PONG or MEET. Decoded as received (Redis sends 0 in other
    /// types and ignores it there); ignored by [`encode`], which writes the body's gossip
    /// count for the ping types and 0 for the others.
    pub count: u16,
    /// The sender's current epoch.
    pub current_epoch: u64,
    /// The config epoch of the sender, or of its master when the sender is a replica.
    pub config_epoch: u64,
    /// Replication offset: the master's own, or the offset a replica has processed.
    pub offset: u64,
    /// The sender's node name.
    pub sender: NodeName,
    /// Slots the sender serves; a replica sends its master's.
    pub myslots: Box<SlotBitmap>,
    /// The sender's master when it is a replica; all zero for a master.
    pub slaveof: NodeName,
    /// The address the sender announces (`cluster-announce-ip`), at most 45 bytes;
    /// empty when it announces none and receivers take the address of the connection.
    pub myip: String,
    /// The sender's plaintext client port when `port` is its TLS port, else 0.
    pub pport: u16,
    /// The sender's cluster bus port.
    pub cport: u16,
    /// The sender's node flags ([`node_flag`]).
    pub flags: u16,
    /// Cluster state as the sender sees it: 0 ok, 1 fail.
    pub state: u8,
    /// Message flags; `mflags[0]` holds [`mflag0`] bits. [`encode`] sets or clears
    /// [`mflag0::EXT_DATA`] from the body; everything else is written as given.
    pub mflags: [u8; 3],
}

/// One gossip entry: what the sender knows about another node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gossip {
    pub nodename: NodeName,
    /// When the sender last pinged that node, in Unix seconds (0: no ping pending).
    pub ping_sent: u32,
    /// When the sender last got a PONG from it, in Unix seconds.
    pub pong_received: u32,
    /// The node's address as last seen, at most 45 bytes.
    pub ip: String,
    /// Client port (TLS port when it serves TLS).
    pub port: u16,
    /// Cluster bus port.
    pub cport: u16,
    /// The node's flags as the sender holds them ([`node_flag`]).
    pub flags: u16,
    /// Plaintext client port when `port` is a TLS port, else 0.
    pub pport: u16,
}

/// A ping extension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ext {
    /// Type 0: the sender's announced hostname (`cluster-announce-hostname`). A node that
    /// sends no hostname extension has none: receivers clear what they had. On the wire
    /// the payload is the string, a NUL and zero padding.
    Hostname(String),
    /// Type 2 (7.2): a node the sender forgot (`CLUSTER FORGET`); receivers delete it and
    /// refuse it for `ttl` seconds.
    ForgottenNode { name: NodeName, ttl: u64 },
    /// Type 1 (7.2): the sender's `cluster-announce-human-nodename`.
    HumanNodename(String),
    /// Type 3 (7.2): the id of the sender's shard (40 hex characters).
    ShardId(NodeName),
    /// Any other type, or a 7.2 type whose payload does not hold its fields (too short, or
    /// a human nodename without its NUL): Redis 7.0 logs and skips extensions it does not
    /// understand, and so should the caller.
    /// `data` is the payload with its padding.
    Unknown { ty: u16, data: Vec<u8> },
}

/// The part of a message after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// PING, PONG and MEET.
    Ping { gossip: Vec<Gossip>, exts: Vec<Ext> },
    /// FAIL: the node the sender declares failing.
    Fail { about: NodeName },
    /// PUBLISH and PUBLISHSHARD.
    Publish { channel: Vec<u8>, message: Vec<u8> },
    /// UPDATE: `nodename` serves `slots` as of `config_epoch`.
    Update {
        config_epoch: u64,
        nodename: NodeName,
        slots: Box<SlotBitmap>,
    },
    /// MODULE. Redis copies `module_id` (the value `moduleTypeEncodeId(name, 0)` of the
    /// sending module) onto the wire without converting it to network order, so it is in
    /// the sender's byte order; it is encoded and decoded here in this host's byte order,
    /// which is what a Redis on the same architecture reads and writes.
    Module {
        module_id: u64,
        module_type: u8,
        payload: Vec<u8>,
    },
    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK and MFSTART: the header says it all.
    Empty,
}

/// A whole message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub body: Body,
}

/// Why a frame could not be decoded. What Redis does with each (and so what the caller
/// should do) is on [`decode`].
#[derive(Debug, PartialEq, Eq)]
pub enum BusError {
    /// The first four bytes are not "RCmb".
    BadSignature,
    /// The total length (the value given) is under the header size.
    BadLength(u32),
    /// A protocol version other than 1 (the value given).
    BadVersion(u16),
    /// The frame is well delimited but its contents are inconsistent (or of an unknown type).
    Malformed(&'static str),
}

impl fmt::Display for BusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BusError::BadSignature => f.write_str("cluster bus: bad message signature"),
            BusError::BadLength(n) => write!(f, "cluster bus: bad message length {n}"),
            BusError::BadVersion(v) => write!(f, "cluster bus: unsupported protocol version {v}"),
            BusError::Malformed(why) => write!(f, "cluster bus: malformed message: {why}"),
        }
    }
}

impl std::error::Error for BusError {}

/// The `Malformed` reason [`decode`] gives for a message type Redis 7.0 does not know.
/// Redis accepts such a packet (it still takes the epochs and the replication offset from
/// its header) and ignores its body; [`decode_header`] gives the header of such a packet.
pub const UNKNOWN_TYPE: &str = "unknown message type";

/// A zeroed slot bitmap.
pub fn empty_bitmap() -> Box<SlotBitmap> {
    Box::new([0u8; SLOTS / 8])
}

/// Whether `body` is the layout of message type `ty` ([`encode`] writes the header's type
/// as given and the body as given, so a mismatch makes a packet peers drop).
pub fn body_fits_type(body: &Body, ty: u16) -> bool {
    use msg_type::*;
    match body {
        Body::Ping { .. } => matches!(ty, PING | PONG | MEET),
        Body::Fail { .. } => ty == FAIL,
        Body::Publish { .. } => matches!(ty, PUBLISH | PUBLISHSHARD),
        Body::Update { .. } => ty == UPDATE,
        Body::Module { .. } => ty == MODULE,
        Body::Empty => matches!(ty, FAILOVER_AUTH_REQUEST | FAILOVER_AUTH_ACK | MFSTART),
    }
}

// ---------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------

/// Writes `bytes` at `at` in `buf`; every call site writes at a fixed offset inside a
/// region it has just sized.
fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = buf.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

/// The bytes of a C string field: up to the first NUL, at most `max` bytes.
fn c_bytes(s: &str, max: usize) -> &[u8] {
    let b = s.as_bytes();
    let b = match b.iter().position(|&c| c == 0) {
        Some(nul) => &b[..nul],
        None => b,
    };
    &b[..b.len().min(max)]
}

/// `n` rounded up to a multiple of 8 (`EIGHT_BYTE_ALIGN`).
fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// A length as the wire's 32-bit field. Nothing Redis allows comes near 4 GiB
/// (`proto-max-bulk-len` caps a published message at 512 MB), so the clamp never applies
/// to a real message.
fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn encode_gossip(g: &Gossip, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + GOSSIP_LEN, 0);
    let e = &mut out[start..];
    put(e, 0, &g.nodename);
    put(e, 40, &g.ping_sent.to_be_bytes());
    put(e, 44, &g.pong_received.to_be_bytes());
    // Like Redis's 46-byte copy of a NUL-terminated address: at most 45 bytes and a NUL.
    put(e, 48, c_bytes(&g.ip, IP_LEN - 1));
    put(e, 94, &g.port.to_be_bytes());
    put(e, 96, &g.cport.to_be_bytes());
    put(e, 98, &g.flags.to_be_bytes());
    put(e, 100, &g.pport.to_be_bytes());
    // 102..104: notused1, zero.
}

/// Appends one extension: header, payload, zero padding to a multiple of 8.
fn encode_ext(ext: &Ext, out: &mut Vec<u8>) {
    let (ty, payload): (u16, std::borrow::Cow<'_, [u8]>) = match ext {
        // The string and its NUL, as `writeHostnamePingExt` copies it.
        Ext::Hostname(s) => (ext_type::HOSTNAME, with_nul(s)),
        Ext::HumanNodename(s) => (ext_type::HUMAN_NODENAME, with_nul(s)),
        Ext::ForgottenNode { name, ttl } => {
            let mut p = Vec::with_capacity(NAME_LEN + 8);
            p.extend_from_slice(name);
            p.extend_from_slice(&ttl.to_be_bytes());
            (ext_type::FORGOTTEN_NODE, p.into())
        }
        Ext::ShardId(id) => (ext_type::SHARDID, id.as_slice().into()),
        Ext::Unknown { ty, data } => (*ty, data.as_slice().into()),
    };
    let total = EXT_HEADER_LEN + align8(payload.len());
    out.extend_from_slice(&len32(total).to_be_bytes());
    out.extend_from_slice(&ty.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&payload);
    out.resize(out.len() + (total - EXT_HEADER_LEN - payload.len()), 0);
}

fn with_nul(s: &str) -> std::borrow::Cow<'_, [u8]> {
    let mut v = c_bytes(s, usize::MAX).to_vec();
    v.push(0);
    v.into()
}

/// Appends the encoded message (totlen filled in) to `out`.
///
/// The header's `count` and `extensions` fields and the [`mflag0::EXT_DATA`] bit come from
/// the body (the gossip count and the extension count for PING, PONG and MEET; zero and
/// clear for the other types, as `clusterBuildMessageHdr` leaves them); the reserved bytes
/// are zero. At most 65,535 gossip entries and extensions are written (the fields are 16
/// bits). `header.ty` is written as given: keep it consistent with the body
/// ([`body_fits_type`]). An extension must stay under 65,536 bytes in all (header and
/// padding included): Redis checks its length in 16 bits, and [`decode`] refuses longer.
pub fn encode(msg: &Message, out: &mut Vec<u8>) {
    let h = &msg.header;
    let start = out.len();
    out.resize(start + HEADER_LEN, 0);

    let (count, extensions, ext_data) = match &msg.body {
        Body::Ping { gossip, exts } => {
            let g = gossip.len().min(u16::MAX as usize) as u16;
            let e = exts.len().min(u16::MAX as usize) as u16;
            (g, e, e > 0)
        }
        _ => (0, 0, false),
    };
    let mut mflags = h.mflags;
    if ext_data {
        mflags[0] |= mflag0::EXT_DATA;
    } else {
        mflags[0] &= !mflag0::EXT_DATA;
    }

    {
        let b = &mut out[start..];
        put(b, 0, &SIGNATURE);
        // totlen (offset 4) is patched in at the end.
        put(b, off::VER, &PROTO_VER.to_be_bytes());
        put(b, off::PORT, &h.port.to_be_bytes());
        put(b, off::TYPE, &h.ty.to_be_bytes());
        put(b, off::COUNT, &count.to_be_bytes());
        put(b, off::CURRENT_EPOCH, &h.current_epoch.to_be_bytes());
        put(b, off::CONFIG_EPOCH, &h.config_epoch.to_be_bytes());
        put(b, off::OFFSET, &h.offset.to_be_bytes());
        put(b, off::SENDER, &h.sender);
        put(b, off::MYSLOTS, &h.myslots[..]);
        put(b, off::SLAVEOF, &h.slaveof);
        // `strncpy(hdr->myip, ip, NET_IP_STR_LEN-1)`: the last byte stays a NUL.
        put(b, off::MYIP, c_bytes(&h.myip, IP_LEN - 1));
        put(b, off::EXTENSIONS, &extensions.to_be_bytes());
        // 2216..2246: notused1, zero.
        put(b, off::PPORT, &h.pport.to_be_bytes());
        put(b, off::CPORT, &h.cport.to_be_bytes());
        put(b, off::FLAGS, &h.flags.to_be_bytes());
        put(b, off::STATE, &[h.state]);
        put(b, off::MFLAGS, &mflags);
    }

    match &msg.body {
        Body::Ping { gossip, exts } => {
            out.reserve(gossip.len() * GOSSIP_LEN);
            for g in gossip.iter().take(count as usize) {
                encode_gossip(g, out);
            }
            for e in exts.iter().take(extensions as usize) {
                encode_ext(e, out);
            }
        }
        Body::Fail { about } => out.extend_from_slice(about),
        Body::Publish { channel, message } => {
            out.extend_from_slice(&len32(channel.len()).to_be_bytes());
            out.extend_from_slice(&len32(message.len()).to_be_bytes());
            out.extend_from_slice(channel);
            out.extend_from_slice(message);
        }
        Body::Update {
            config_epoch,
            nodename,
            slots,
        } => {
            out.extend_from_slice(&config_epoch.to_be_bytes());
            out.extend_from_slice(nodename);
            out.extend_from_slice(&slots[..]);
        }
        Body::Module {
            module_id,
            module_type,
            payload,
        } => {
            out.extend_from_slice(&module_id.to_ne_bytes());
            out.extend_from_slice(&len32(payload.len()).to_be_bytes());
            out.push(*module_type);
            out.extend_from_slice(payload);
        }
        Body::Empty => {}
    }

    let totlen = len32(out.len() - start);
    put(&mut out[start..], off::TOTLEN, &totlen.to_be_bytes());
}

// ---------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------

/// Bounds-checked reads from a frame: a short frame is an error, never a panic.
fn bytes_at<const N: usize>(b: &[u8], at: usize) -> Result<[u8; N], BusError> {
    b.get(at..at.saturating_add(N))
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .ok_or(BusError::Malformed("field past the end of the frame"))
}

fn be16(b: &[u8], at: usize) -> Result<u16, BusError> {
    bytes_at(b, at).map(u16::from_be_bytes)
}

fn be32(b: &[u8], at: usize) -> Result<u32, BusError> {
    bytes_at(b, at).map(u32::from_be_bytes)
}

fn be64(b: &[u8], at: usize) -> Result<u64, BusError> {
    bytes_at(b, at).map(u64::from_be_bytes)
}

/// A NUL-terminated string field: the bytes before the first NUL, lossily as UTF-8.
fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// An address field of `IP_LEN` bytes at `at`. Redis forces a NUL into the last byte of
/// an announced address before using it (`nodeIp2String`), so at most 45 bytes count;
/// gossip addresses are held to the same 45 (Redis's writer never fills all 46).
fn ip_field(b: &[u8], at: usize) -> Result<String, BusError> {
    let field: [u8; IP_LEN] = bytes_at(b, at)?;
    Ok(c_string(&field[..IP_LEN - 1]))
}

/// What the reader needs before it can call `decode`: Redis reads 8 bytes first and rejects
/// a bad signature or a totlen under the minimum at once (clusterReadHandler). Returns
/// Ok(None) if fewer than 8 bytes, Ok(Some(totlen)) otherwise, Err for a bad
/// signature/length.
///
/// These are the only checks 7.0.15's `clusterReadHandler` (cluster.c 2718) makes before it
/// has the whole packet: once 8 bytes are in, the signature must be "RCmb" and `totlen` at
/// least `CLUSTERMSG_MIN_LEN` (2,256, whatever the type) (lines 2734-2745); otherwise it
/// logs "Bad message length or signature received from Cluster bus." and frees the link
/// (`handleLinkIOError`): the caller closes the connection. Redis has no upper bound on
/// `totlen` (it grows the buffer to whatever the peer announces); a cap, if the caller
/// wants one, is the caller's. There is no per-type minimum and no `RCVBUF_MIN_READ_LEN`
/// in Redis (up to 7.4 and 8.0-m01 the same two checks are made): the per-type lengths are
/// checked on the whole packet, by [`decode`].
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, BusError> {
    let Some(first) = buf.get(..8) else {
        return Ok(None);
    };
    if first[..4] != SIGNATURE {
        return Err(BusError::BadSignature);
    }
    let totlen = u32::from_be_bytes([first[4], first[5], first[6], first[7]]);
    if (totlen as usize) < HEADER_LEN {
        return Err(BusError::BadLength(totlen));
    }
    Ok(Some(totlen as usize))
}

/// Decodes one complete message at the start of `buf` (buf.len() >= frame_len).
/// Ok((msg, consumed)).
///
/// The checks mirror Redis 7.0.15 (line numbers are those of `src/cluster.c` at the 7.0.15
/// tag); each error says what Redis does with such a packet, which is what the caller
/// should do:
///
/// * [`BusError::BadSignature`], [`BusError::BadLength`]: the framing checks of
///   [`frame_len`] (`clusterReadHandler`, lines 2734-2745). Redis frees the link: close
///   the connection.
/// * [`BusError::BadVersion`]: `ver` is not 1 (`clusterProcessPacket`, line 2135). Redis
///   drops the packet without using anything in it and keeps the link: ignore the
///   packet, keep reading.
/// * [`BusError::Malformed`]: the length the type implies (`explen`, lines 2151-2204) is
///   not `totlen` (line 2206). Redis logs a warning, drops the packet and keeps the link:
///   ignore it, keep reading. The expected lengths:
///   - PING, PONG, MEET: 2,256 + 104 × `count`, plus, only when [`mflag0::EXT_DATA`] is
///     set, the `extensions` extensions walked from the end of the gossip (lines
///     2161-2178): each one's length must be a multiple of 8 (line 2165) and fit in what
///     is left of `totlen` (line 2170). Without `EXT_DATA` the `extensions` field is not
///     looked at and no extensions are returned.
///   - FAIL: 2,296. UPDATE: 4,352. FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART:
///     2,256.
///   - PUBLISH, PUBLISHSHARD: 2,264 + channel length + message length (line 2185).
///   - MODULE: 2,269 + payload length (line 2199).
///
///   An unknown type (11 and up) is accepted by Redis whatever its length (line 2203) and
///   ignored with the log line "Received unknown packet type" (line 2636), after the
///   sender's epochs and replication offset have been taken from its header (lines
///   2220-2250); `decode` returns `Malformed(UNKNOWN_TYPE)` and [`decode_header`] gives
///   the header, so the caller can do the same.
///
///   Upstream 7.0.15 reads past the packet on some malformed pings; the security updates
///   of distributions' 7.0.15 (Debian's `7.0.15-1~deb12u10`: CVE-2026-21863,
///   CVE-2026-92925) drop those packets instead, and so does `decode`: a gossip section
///   longer than `totlen`; an extension header not whole within `totlen`; an extension
///   length under 8 (Redis logs it as bad padding); a hostname extension whose payload
///   does not end with a NUL (Redis's writer always puts one there). `decode` also
///   refuses two frames nothing but a hostile peer makes, which Redis accepts by
///   accident: an extension length over 65,535 (Redis checks it truncated to 16 bits,
///   line 2164, and steps over it by the full 32), and channel, message or module
///   payload lengths whose sum wraps around 2^32 (Redis adds them in 32 bits).
///
/// The contents are not validated beyond that, as in Redis: names need not be hex, the
/// type need not match the flags. Strings (addresses, hostname) are cut at the first NUL
/// and converted lossily to UTF-8. An extension of a 7.2 type whose payload does not hold
/// its fields becomes [`Ext::Unknown`]: a 7.0 node accepts and ignores it.
///
/// When fewer than `frame_len` bytes are in `buf`, this returns
/// `Malformed("incomplete frame")` (a caller error, not the peer's).
pub fn decode(buf: &[u8]) -> Result<(Message, usize), BusError> {
    let (header, body, n) = decode_frame(buf)?;
    match body {
        Some(body) => Ok((Message { header, body }, n)),
        None => Err(BusError::Malformed(UNKNOWN_TYPE)),
    }
}

/// The header of the complete message at the start of `buf`, for every packet Redis would
/// accept, including those of an unknown type (which [`decode`] refuses); the body is
/// validated but not returned. Ok((header, consumed)).
pub fn decode_header(buf: &[u8]) -> Result<(Header, usize), BusError> {
    let (header, _, n) = decode_frame(buf)?;
    Ok((header, n))
}

/// The shared decoder: the body is `None` for a type Redis 7.0 does not know.
fn decode_frame(buf: &[u8]) -> Result<(Header, Option<Body>, usize), BusError> {
    let totlen = frame_len(buf)?.ok_or(BusError::Malformed("incomplete frame"))?;
    let f = buf
        .get(..totlen)
        .ok_or(BusError::Malformed("incomplete frame"))?;
    let ver = be16(f, off::VER)?;
    if ver != PROTO_VER {
        return Err(BusError::BadVersion(ver));
    }
    let header = decode_header_fields(f)?;
    let body = decode_body(f, &header)?;
    Ok((header, body, totlen))
}

fn decode_header_fields(f: &[u8]) -> Result<Header, BusError> {
    Ok(Header {
        ty: be16(f, off::TYPE)?,
        port: be16(f, off::PORT)?,
        count: be16(f, off::COUNT)?,
        current_epoch: be64(f, off::CURRENT_EPOCH)?,
        config_epoch: be64(f, off::CONFIG_EPOCH)?,
        offset: be64(f, off::OFFSET)?,
        sender: bytes_at(f, off::SENDER)?,
        myslots: Box::new(bytes_at(f, off::MYSLOTS)?),
        slaveof: bytes_at(f, off::SLAVEOF)?,
        myip: ip_field(f, off::MYIP)?,
        pport: be16(f, off::PPORT)?,
        cport: be16(f, off::CPORT)?,
        flags: be16(f, off::FLAGS)?,
        state: bytes_at::<1>(f, off::STATE)?[0],
        mflags: bytes_at(f, off::MFLAGS)?,
    })
}

/// `f` is exactly one frame (`f.len()` is its totlen, at least `HEADER_LEN`).
fn decode_body(f: &[u8], h: &Header) -> Result<Option<Body>, BusError> {
    use msg_type::*;
    let totlen = f.len();
    let body = match h.ty {
        PING | PONG | MEET => decode_ping(f, h)?,
        FAIL => {
            if totlen != FAIL_LEN {
                return Err(BusError::Malformed("FAIL length is not 2296"));
            }
            Body::Fail {
                about: bytes_at(f, HEADER_LEN)?,
            }
        }
        PUBLISH | PUBLISHSHARD => {
            if totlen < PUBLISH_DATA {
                return Err(BusError::Malformed("PUBLISH shorter than its lengths"));
            }
            let channel_len = be32(f, HEADER_LEN)? as u64;
            let message_len = be32(f, HEADER_LEN + 4)? as u64;
            if PUBLISH_DATA as u64 + channel_len + message_len != totlen as u64 {
                return Err(BusError::Malformed("PUBLISH lengths disagree with totlen"));
            }
            let split = PUBLISH_DATA + channel_len as usize;
            let channel = f.get(PUBLISH_DATA..split);
            let message = f.get(split..);
            match (channel, message) {
                (Some(c), Some(m)) => Body::Publish {
                    channel: c.to_vec(),
                    message: m.to_vec(),
                },
                _ => return Err(BusError::Malformed("PUBLISH lengths disagree with totlen")),
            }
        }
        FAILOVER_AUTH_REQUEST | FAILOVER_AUTH_ACK | MFSTART => {
            if totlen != HEADER_LEN {
                return Err(BusError::Malformed(
                    "bodiless message longer than the header",
                ));
            }
            Body::Empty
        }
        UPDATE => {
            if totlen != UPDATE_LEN {
                return Err(BusError::Malformed("UPDATE length is not 4352"));
            }
            Body::Update {
                config_epoch: be64(f, HEADER_LEN)?,
                nodename: bytes_at(f, HEADER_LEN + 8)?,
                slots: Box::new(bytes_at(f, HEADER_LEN + 8 + NAME_LEN)?),
            }
        }
        MODULE => {
            if totlen < MODULE_DATA {
                return Err(BusError::Malformed("MODULE shorter than its fixed fields"));
            }
            let len = be32(f, HEADER_LEN + 8)? as u64;
            if MODULE_DATA as u64 + len != totlen as u64 {
                return Err(BusError::Malformed("MODULE length disagrees with totlen"));
            }
            Body::Module {
                module_id: u64::from_ne_bytes(bytes_at(f, HEADER_LEN)?),
                module_type: bytes_at::<1>(f, HEADER_LEN + 12)?[0],
                payload: f.get(MODULE_DATA..).unwrap_or_default().to_vec(),
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(body))
}

fn decode_ping(f: &[u8], h: &Header) -> Result<Body, BusError> {
    let totlen = f.len();
    let count = h.count as usize;
    // At most 2,256 + 104 × 65,535: no overflow even with a 32-bit usize.
    let gossip_end = HEADER_LEN + GOSSIP_LEN * count;
    if gossip_end > totlen {
        return Err(BusError::Malformed("gossip count exceeds totlen"));
    }
    let mut gossip = Vec::with_capacity(count);
    for i in 0..count {
        let at = HEADER_LEN + i * GOSSIP_LEN;
        gossip.push(Gossip {
            nodename: bytes_at(f, at)?,
            ping_sent: be32(f, at + 40)?,
            pong_received: be32(f, at + 44)?,
            ip: ip_field(f, at + 48)?,
            port: be16(f, at + 94)?,
            cport: be16(f, at + 96)?,
            flags: be16(f, at + 98)?,
            pport: be16(f, at + 100)?,
        });
    }

    let mut exts = Vec::new();
    let mut pos = gossip_end;
    if h.mflags[0] & mflag0::EXT_DATA != 0 {
        let n = be16(f, off::EXTENSIONS)?;
        for _ in 0..n {
            let left = totlen - pos;
            if left < EXT_HEADER_LEN {
                return Err(BusError::Malformed("extension header past totlen"));
            }
            let len = be32(f, pos)?;
            let ty = be16(f, pos + 4)?;
            if len > u16::MAX as u32 {
                return Err(BusError::Malformed("extension longer than 65535 bytes"));
            }
            let len = len as usize;
            if !len.is_multiple_of(8) {
                return Err(BusError::Malformed("extension length not a multiple of 8"));
            }
            if len > left {
                return Err(BusError::Malformed("extension exceeds totlen"));
            }
            if len < EXT_HEADER_LEN {
                return Err(BusError::Malformed("extension shorter than its header"));
            }
            let payload = f
                .get(pos + EXT_HEADER_LEN..pos + len)
                .ok_or(BusError::Malformed("extension exceeds totlen"))?;
            // Redis reads the hostname as a C string from the packet; its writer always
            // ends the padded payload with a NUL, and a patched 7.0.15 drops the packet
            // when the last byte is not one.
            if ty == ext_type::HOSTNAME && payload.last() != Some(&0) {
                return Err(BusError::Malformed("hostname extension not NUL-terminated"));
            }
            exts.push(decode_ext(ty, payload));
            pos += len;
        }
    }
    if pos != totlen {
        return Err(BusError::Malformed(
            "totlen disagrees with gossip count and extensions",
        ));
    }
    Ok(Body::Ping { gossip, exts })
}

fn decode_ext(ty: u16, payload: &[u8]) -> Ext {
    match ty {
        ext_type::HOSTNAME => Ext::Hostname(c_string(payload)),
        // 7.0 does not know this type; without its NUL it is left for the caller to skip.
        ext_type::HUMAN_NODENAME if payload.last() == Some(&0) => {
            Ext::HumanNodename(c_string(payload))
        }
        ext_type::FORGOTTEN_NODE => match (bytes_at(payload, 0), be64(payload, NAME_LEN)) {
            (Ok(name), Ok(ttl)) => Ext::ForgottenNode { name, ttl },
            _ => Ext::Unknown {
                ty,
                data: payload.to_vec(),
            },
        },
        ext_type::SHARDID => match bytes_at(payload, 0) {
            Ok(id) => Ext::ShardId(id),
            Err(_) => Ext::Unknown {
                ty,
                data: payload.to_vec(),
            },
        },
        _ => Ext::Unknown {
            ty,
            data: payload.to_vec(),
        },
    }
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Whether `slot` is set: bit `slot & 7` of byte `slot / 8`, least significant bit first
/// (`bitmapTestBit` in cluster.c). A slot out of range is not set.
pub fn slot_bit(bitmap: &SlotBitmap, slot: u16) -> bool {
    bitmap
        .get(slot as usize / 8)
        .is_some_and(|b| b & (1 << (slot & 7)) != 0)
}

/// Sets or clears `slot` (`bitmapSetBit` / `bitmapClearBit`); a slot out of range is
/// ignored.
pub fn set_slot_bit(bitmap: &mut SlotBitmap, slot: u16, on: bool) {
    if let Some(b) = bitmap.get_mut(slot as usize / 8) {
        let bit = 1u8 << (slot & 7);
        if on {
            *b |= bit;
        } else {
            *b &= !bit;
        }
    }
}

/// Whether `name` is the null name (`CLUSTER_NODE_NULL_NAME`, 40 zero bytes).
pub fn name_is_null(name: &NodeName) -> bool {
    name.iter().all(|&b| b == 0)
}

/// `name` as text, for logs and replies: the bytes before the first NUL (so the null name
/// is ""), and of those the longest prefix that is valid UTF-8 (a peer may send anything).
pub fn name_str(name: &NodeName) -> &str {
    let end = name.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
    let bytes = &name[..end];
    match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    }
}

/// A node name typed by a user or read from a file: exactly 40 characters, each a
/// lowercase ASCII letter or a digit. That is what 7.0.15's `verifyClusterNodeId` accepts
/// (it does not insist on hex, and refuses uppercase, which Redis never generates).
pub fn parse_name(s: &[u8]) -> Option<NodeName> {
    let name: NodeName = s.try_into().ok()?;
    name.iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        .then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(c: u8) -> NodeName {
        [c; NAME_LEN]
    }

    fn header(ty: u16) -> Header {
        let mut myslots = empty_bitmap();
        set_slot_bit(&mut myslots, 0, true);
        set_slot_bit(&mut myslots, 16383, true);
        Header {
            ty,
            port: 0x1234,
            count: 0,
            current_epoch: 0x0102_0304_0506_0708,
            config_epoch: 0x1112_1314_1516_1718,
            offset: 0x2122_2324_2526_2728,
            sender: name(b'a'),
            myslots,
            slaveof: name(b'b'),
            myip: "10.0.0.1".into(),
            pport: 0x3456,
            cport: 0x5678,
            flags: node_flag::MASTER | node_flag::MYSELF,
            state: 1,
            mflags: [mflag0::PAUSED, 0x20, 0x30],
        }
    }

    fn gossip(c: u8) -> Gossip {
        Gossip {
            nodename: name(c),
            ping_sent: 0x0a0b_0c0d,
            pong_received: 0x1a1b_1c1d,
            ip: "192.168.1.2".into(),
            port: 7000,
            cport: 17000,
            flags: node_flag::SLAVE | node_flag::PFAIL,
            pport: 6999,
        }
    }

    fn enc(msg: &Message) -> Vec<u8> {
        let mut out = Vec::new();
        encode(msg, &mut out);
        out
    }

    fn round_trip(msg: &Message) -> Vec<u8> {
        let bytes = enc(msg);
        assert_eq!(frame_len(&bytes), Ok(Some(bytes.len())));
        let (got, used) = decode(&bytes).expect("decodes");
        assert_eq!(used, bytes.len());
        let mut want = msg.clone();
        want.header.count = match &msg.body {
            Body::Ping { gossip, .. } => gossip.len() as u16,
            _ => 0,
        };
        if let Body::Ping { exts, .. } = &msg.body {
            if exts.is_empty() {
                want.header.mflags[0] &= !mflag0::EXT_DATA;
            } else {
                want.header.mflags[0] |= mflag0::EXT_DATA;
            }
        } else {
            want.header.mflags[0] &= !mflag0::EXT_DATA;
        }
        assert_eq!(got, want);
        bytes
    }

    fn be16_at(b: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    fn be32_at(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
    }

    fn be64_at(b: &[u8], at: usize) -> u64 {
        u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
    }

    fn set_be16(b: &mut [u8], at: usize, v: u16) {
        b[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    fn set_be32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }

    /// Rewrites totlen to the buffer's length.
    fn fix_totlen(b: &mut [u8]) {
        let n = b.len() as u32;
        set_be32(b, 4, n);
    }

    #[test]
    fn header_fields_sit_at_redis_offsets() {
        let msg = Message {
            header: header(msg_type::FAILOVER_AUTH_ACK),
            body: Body::Empty,
        };
        let b = round_trip(&msg);
        assert_eq!(b.len(), HEADER_LEN);
        assert_eq!(&b[0..4], b"RCmb");
        assert_eq!(be32_at(&b, 4), 2256);
        assert_eq!(be16_at(&b, 8), 1);
        assert_eq!(be16_at(&b, 10), 0x1234);
        assert_eq!(be16_at(&b, 12), msg_type::FAILOVER_AUTH_ACK);
        assert_eq!(be16_at(&b, 14), 0);
        assert_eq!(be64_at(&b, 16), 0x0102_0304_0506_0708);
        assert_eq!(be64_at(&b, 24), 0x1112_1314_1516_1718);
        assert_eq!(be64_at(&b, 32), 0x2122_2324_2526_2728);
        assert_eq!(&b[40..80], &[b'a'; 40]);
        assert_eq!(b[80], 0x01, "slot 0 is bit 0 of byte 0");
        assert!(b[81..2127].iter().all(|&x| x == 0));
        assert_eq!(b[2127], 0x80, "slot 16383 is bit 7 of byte 2047");
        assert_eq!(&b[2128..2168], &[b'b'; 40]);
        assert_eq!(&b[2168..2176], b"10.0.0.1");
        assert!(b[2176..2214].iter().all(|&x| x == 0));
        assert_eq!(be16_at(&b, 2214), 0, "extensions");
        assert!(b[2216..2246].iter().all(|&x| x == 0), "notused1");
        assert_eq!(be16_at(&b, 2246), 0x3456);
        assert_eq!(be16_at(&b, 2248), 0x5678);
        assert_eq!(be16_at(&b, 2250), node_flag::MASTER | node_flag::MYSELF);
        assert_eq!(b[2252], 1);
        assert_eq!(&b[2253..2256], &[mflag0::PAUSED, 0x20, 0x30]);
    }

    #[test]
    fn encode_appends_after_existing_bytes() {
        let msg = Message {
            header: header(msg_type::MFSTART),
            body: Body::Empty,
        };
        let mut out = b"xyz".to_vec();
        encode(&msg, &mut out);
        assert_eq!(&out[..3], b"xyz");
        assert_eq!(&out[3..7], b"RCmb");
        assert_eq!(be32_at(&out, 7), 2256);
        assert_eq!(decode(&out[3..]).unwrap().0, msg);
    }

    #[test]
    fn ping_gossip_and_extensions_layout() {
        let mut h = header(msg_type::PING);
        h.count = 999; // ignored on encode
        h.mflags = [mflag0::FORCEACK, 0, 0];
        let msg = Message {
            header: h,
            body: Body::Ping {
                gossip: vec![gossip(b'c'), gossip(b'd')],
                exts: vec![
                    Ext::Hostname("abc".into()),
                    Ext::HumanNodename("human-1".into()),
                    Ext::ForgottenNode {
                        name: name(b'e'),
                        ttl: 0x0102_0304,
                    },
                    Ext::ShardId(name(b'f')),
                    Ext::Unknown {
                        ty: 77,
                        data: vec![9; 16],
                    },
                ],
            },
        };
        let b = round_trip(&msg);
        assert_eq!(be16_at(&b, 14), 2, "count is the gossip count");
        assert_eq!(be16_at(&b, 2214), 5, "extensions");
        assert_eq!(b[2253], mflag0::FORCEACK | mflag0::EXT_DATA);

        // Gossip entry 1 starts at 2256 + 104.
        let g = HEADER_LEN + GOSSIP_LEN;
        assert_eq!(&b[g..g + 40], &[b'd'; 40]);
        assert_eq!(be32_at(&b, g + 40), 0x0a0b_0c0d);
        assert_eq!(be32_at(&b, g + 44), 0x1a1b_1c1d);
        assert_eq!(&b[g + 48..g + 59], b"192.168.1.2");
        assert!(b[g + 59..g + 94].iter().all(|&x| x == 0));
        assert_eq!(be16_at(&b, g + 94), 7000);
        assert_eq!(be16_at(&b, g + 96), 17000);
        assert_eq!(be16_at(&b, g + 98), node_flag::SLAVE | node_flag::PFAIL);
        assert_eq!(be16_at(&b, g + 100), 6999);
        assert_eq!(be16_at(&b, g + 102), 0, "notused1");

        // Extensions follow the gossip, each 8-byte aligned.
        let mut e = HEADER_LEN + 2 * GOSSIP_LEN;
        // "abc\0" padded to 8: 16 in all, as getHostnamePingExtSize computes it.
        assert_eq!(
            &b[e..e + 16],
            &[0, 0, 0, 16, 0, 0, 0, 0, b'a', b'b', b'c', 0, 0, 0, 0, 0]
        );
        e += 16;
        // "human-1\0" is exactly 8.
        assert_eq!(be32_at(&b, e), 16);
        assert_eq!(be16_at(&b, e + 4), ext_type::HUMAN_NODENAME);
        assert_eq!(&b[e + 8..e + 16], b"human-1\0");
        e += 16;
        assert_eq!(be32_at(&b, e), 56);
        assert_eq!(be16_at(&b, e + 4), ext_type::FORGOTTEN_NODE);
        assert_eq!(&b[e + 8..e + 48], &[b'e'; 40]);
        assert_eq!(be64_at(&b, e + 48), 0x0102_0304);
        e += 56;
        assert_eq!(be32_at(&b, e), 48);
        assert_eq!(be16_at(&b, e + 4), ext_type::SHARDID);
        assert_eq!(&b[e + 8..e + 48], &[b'f'; 40]);
        e += 48;
        assert_eq!(be32_at(&b, e), 24);
        assert_eq!(be16_at(&b, e + 4), 77);
        e += 24;
        assert_eq!(e, b.len());
        assert_eq!(be32_at(&b, 4) as usize, b.len());
    }

    #[test]
    fn hostname_padding_leaves_room_for_the_nul() {
        for (host, ext_len) in [("", 16), ("a", 16), ("1234567", 16), ("12345678", 24)] {
            let msg = Message {
                header: header(msg_type::PONG),
                body: Body::Ping {
                    gossip: vec![],
                    exts: vec![Ext::Hostname(host.into())],
                },
            };
            let b = round_trip(&msg);
            assert_eq!(b.len(), HEADER_LEN + ext_len, "{host:?}");
            assert_eq!(be32_at(&b, HEADER_LEN) as usize, ext_len);
        }
        // Unknown payloads are padded with zeros (and come back with the padding).
        let msg = Message {
            header: header(msg_type::PING),
            body: Body::Ping {
                gossip: vec![],
                exts: vec![Ext::Unknown {
                    ty: 9,
                    data: vec![1, 2, 3],
                }],
            },
        };
        let b = enc(&msg);
        assert_eq!(b.len(), HEADER_LEN + 16);
        let Body::Ping { exts, .. } = decode(&b).unwrap().0.body else {
            panic!()
        };
        assert_eq!(
            exts,
            vec![Ext::Unknown {
                ty: 9,
                data: vec![1, 2, 3, 0, 0, 0, 0, 0]
            }]
        );
    }

    #[test]
    fn ext_data_flag_follows_the_body() {
        let mut h = header(msg_type::MEET);
        h.mflags[0] = mflag0::EXT_DATA | mflag0::PAUSED;
        let msg = Message {
            header: h.clone(),
            body: Body::Ping {
                gossip: vec![],
                exts: vec![],
            },
        };
        let b = round_trip(&msg);
        assert_eq!(b[2253], mflag0::PAUSED);
        assert_eq!(b.len(), HEADER_LEN);
        h.ty = msg_type::FAIL;
        let b = round_trip(&Message {
            header: h,
            body: Body::Fail { about: name(b'z') },
        });
        assert_eq!(b[2253], mflag0::PAUSED);
    }

    #[test]
    fn every_type_round_trips() {
        use msg_type::*;
        let mut slots = empty_bitmap();
        for s in [1u16, 100, 8191, 16000] {
            set_slot_bit(&mut slots, s, true);
        }
        let bodies: Vec<(u16, Body)> = vec![
            (
                PING,
                Body::Ping {
                    gossip: vec![gossip(b'x')],
                    exts: vec![],
                },
            ),
            (
                PONG,
                Body::Ping {
                    gossip: vec![],
                    exts: vec![Ext::ShardId(name(b'1'))],
                },
            ),
            (
                MEET,
                Body::Ping {
                    gossip: vec![gossip(b'x'), gossip(b'y'), gossip(b'z')],
                    exts: vec![],
                },
            ),
            (FAIL, Body::Fail { about: name(b'q') }),
            (
                PUBLISH,
                Body::Publish {
                    channel: b"news".to_vec(),
                    message: b"hello\0world".to_vec(),
                },
            ),
            (
                PUBLISHSHARD,
                Body::Publish {
                    channel: b"{x}".to_vec(),
                    message: vec![],
                },
            ),
            (
                PUBLISH,
                Body::Publish {
                    channel: vec![],
                    message: vec![],
                },
            ),
            (FAILOVER_AUTH_REQUEST, Body::Empty),
            (FAILOVER_AUTH_ACK, Body::Empty),
            (MFSTART, Body::Empty),
            (
                UPDATE,
                Body::Update {
                    config_epoch: 42,
                    nodename: name(b'u'),
                    slots: slots.clone(),
                },
            ),
            (
                MODULE,
                Body::Module {
                    module_id: 0xdead_beef_0102,
                    module_type: 7,
                    payload: b"pay".to_vec(),
                },
            ),
            (
                MODULE,
                Body::Module {
                    module_id: 0,
                    module_type: 255,
                    payload: vec![],
                },
            ),
        ];
        for (ty, body) in bodies {
            assert!(body_fits_type(&body, ty));
            let msg = Message {
                header: header(ty),
                body,
            };
            let b = round_trip(&msg);
            let want = match ty {
                FAIL => 2296,
                UPDATE => 4352,
                FAILOVER_AUTH_REQUEST | FAILOVER_AUTH_ACK | MFSTART => 2256,
                _ => b.len(),
            };
            assert_eq!(b.len(), want, "type {ty}");
        }
    }

    #[test]
    fn body_layouts_of_fail_publish_update_module() {
        let b = enc(&Message {
            header: header(msg_type::FAIL),
            body: Body::Fail { about: name(b'q') },
        });
        assert_eq!(&b[2256..2296], &[b'q'; 40]);

        let b = enc(&Message {
            header: header(msg_type::PUBLISH),
            body: Body::Publish {
                channel: b"ch".to_vec(),
                message: b"msg".to_vec(),
            },
        });
        assert_eq!(b.len(), 2264 + 5);
        assert_eq!(be32_at(&b, 2256), 2);
        assert_eq!(be32_at(&b, 2260), 3);
        assert_eq!(&b[2264..], b"chmsg");

        let mut slots = empty_bitmap();
        set_slot_bit(&mut slots, 9, true);
        let b = enc(&Message {
            header: header(msg_type::UPDATE),
            body: Body::Update {
                config_epoch: 0x0506,
                nodename: name(b'n'),
                slots,
            },
        });
        assert_eq!(be64_at(&b, 2256), 0x0506);
        assert_eq!(&b[2264..2304], &[b'n'; 40]);
        assert_eq!(b[2304 + 1], 0x02, "slot 9 is bit 1 of byte 1");

        let b = enc(&Message {
            header: header(msg_type::MODULE),
            body: Body::Module {
                module_id: 0x0102_0304_0506_0708,
                module_type: 0xee,
                payload: b"xy".to_vec(),
            },
        });
        assert_eq!(b.len(), 2269 + 2);
        assert_eq!(&b[2256..2264], &0x0102_0304_0506_0708u64.to_ne_bytes());
        assert_eq!(be32_at(&b, 2264), 2);
        assert_eq!(b[2268], 0xee);
        assert_eq!(&b[2269..], b"xy");
    }

    #[test]
    fn frame_len_checks_signature_and_minimum() {
        let msg = Message {
            header: header(msg_type::PING),
            body: Body::Ping {
                gossip: vec![],
                exts: vec![],
            },
        };
        let b = enc(&msg);
        for n in 0..8 {
            assert_eq!(frame_len(&b[..n]), Ok(None));
        }
        assert_eq!(frame_len(&b[..8]), Ok(Some(2256)));
        let mut bad = b.clone();
        bad[3] = b'B';
        assert_eq!(frame_len(&bad), Err(BusError::BadSignature));
        assert_eq!(decode(&bad).unwrap_err(), BusError::BadSignature);
        let mut short = b.clone();
        set_be32(&mut short, 4, 2255);
        assert_eq!(frame_len(&short), Err(BusError::BadLength(2255)));
        assert_eq!(decode(&short).unwrap_err(), BusError::BadLength(2255));
        set_be32(&mut short, 4, 0);
        assert_eq!(frame_len(&short), Err(BusError::BadLength(0)));
        // Huge totals are framed (Redis has no cap); decode wants the whole frame.
        let mut huge = b.clone();
        set_be32(&mut huge, 4, u32::MAX);
        assert_eq!(frame_len(&huge), Ok(Some(u32::MAX as usize)));
        assert_eq!(
            decode(&huge).unwrap_err(),
            BusError::Malformed("incomplete frame")
        );
        assert_eq!(
            decode(&b[..7]).unwrap_err(),
            BusError::Malformed("incomplete frame")
        );
    }

    #[test]
    fn other_versions_are_refused() {
        let mut b = enc(&Message {
            header: header(msg_type::PING),
            body: Body::Ping {
                gossip: vec![],
                exts: vec![],
            },
        });
        set_be16(&mut b, 8, 2);
        assert_eq!(decode(&b).unwrap_err(), BusError::BadVersion(2));
        set_be16(&mut b, 8, 0);
        assert_eq!(decode(&b).unwrap_err(), BusError::BadVersion(0));
        // The version is checked before the length: a bad length with a bad version is BadVersion.
        set_be16(&mut b, 14, 50);
        assert_eq!(decode(&b).unwrap_err(), BusError::BadVersion(0));
    }

    #[test]
    fn gossip_count_must_match_totlen() {
        let msg = Message {
            header: header(msg_type::PING),
            body: Body::Ping {
                gossip: vec![gossip(b'g'); 2],
                exts: vec![],
            },
        };
        let good = enc(&msg);
        for count in [0u16, 1, 3, u16::MAX] {
            let mut b = good.clone();
            set_be16(&mut b, 14, count);
            assert!(
                matches!(decode(&b), Err(BusError::Malformed(_))),
                "count {count}"
            );
        }
        // Extra trailing bytes inside totlen without EXT_DATA: rejected.
        let mut b = good.clone();
        b.extend_from_slice(&[0; 8]);
        fix_totlen(&mut b);
        assert!(matches!(decode(&b), Err(BusError::Malformed(_))));
    }

    #[test]
    fn extensions_are_counted_only_with_ext_data() {
        let msg = Message {
            header: header(msg_type::PING),
            body: Body::Ping {
                gossip: vec![gossip(b'g')],
                exts: vec![],
            },
        };
        let mut b = enc(&msg);
        // An `extensions` count without the flag is not looked at (Redis does not validate
        // it), and no extension is returned.
        set_be16(&mut b, 2214, 3);
        let (m, _) = decode(&b).unwrap();
        assert_eq!(
            m.body,
            Body::Ping {
                gossip: vec![gossip(b'g')],
                exts: vec![]
            }
        );
        // The flag with zero extensions is fine too.
        set_be16(&mut b, 2214, 0);
        b[2253] |= mflag0::EXT_DATA;
        assert!(decode(&b).is_ok());
        // The flag with a count but no bytes for them: the header lies past totlen.
        set_be16(&mut b, 2214, 1);
        assert_eq!(
            decode(&b).unwrap_err(),
            BusError::Malformed("extension header past totlen")
        );
    }

    fn one_ext_ping(ext_len_field: u32, payload_len: usize) -> Vec<u8> {
        let msg = Message {
            header: header(msg_type::PING),
            body: Body::Ping {
                gossip: vec![],
                exts: vec![],
            },
        };
        let mut b = enc(&msg);
        b[2253] |= mflag0::EXT_DATA;
        set_be16(&mut b, 2214, 1);
        b.extend_from_slice(&ext_len_field.to_be_bytes());
        b.extend_from_slice(&[0, 99, 0, 0]);
        b.resize(b.len() + payload_len, 0);
        let n = b.len() as u32;
        set_be32(&mut b, 4, n);
        b
    }

    #[test]
    fn extension_lengths_are_validated() {
        let ok = one_ext_ping(16, 8);
        assert_eq!(
            decode(&ok).unwrap().0.body,
            Body::Ping {
                gossip: vec![],
                exts: vec![Ext::Unknown {
                    ty: 99,
                    data: vec![0; 8]
                }]
            }
        );
        // Empty payload: accepted.
        assert!(decode(&one_ext_ping(8, 0)).is_ok());
        let cases = [
            (12, 4, "extension length not a multiple of 8"),
            (17, 9, "extension length not a multiple of 8"),
            (24, 8, "extension exceeds totlen"),
            (0, 0, "extension shorter than its header"),
            (0, 8, "extension shorter than its header"),
            (8, 8, "totlen disagrees with gossip count and extensions"),
            (0x1_0010, 8, "extension longer than 65535 bytes"),
            (u32::MAX, 8, "extension longer than 65535 bytes"),
        ];
        for (len, payload, why) in cases {
            assert_eq!(
                decode(&one_ext_ping(len, payload)).unwrap_err(),
                BusError::Malformed(why),
                "{len} {payload}"
            );
        }
        // A second extension announced but absent.
        let mut b = one_ext_ping(16, 8);
        set_be16(&mut b, 2214, 2);
        assert_eq!(
            decode(&b).unwrap_err(),
            BusError::Malformed("extension header past totlen")
        );
        // Partial header room left (4 bytes) for the second extension.
        let mut b = one_ext_ping(16, 12);
        set_be16(&mut b, 2214, 2);
        assert_eq!(
            decode(&b).unwrap_err(),
            BusError::Malformed("extension header past totlen")
        );
    }

    #[test]
    fn short_7_2_extensions_become_unknown() {
        let mut b = one_ext_ping(40, 32);
        let at = HEADER_LEN + 4;
        set_be16(&mut b, at, ext_type::FORGOTTEN_NODE);
        let Body::Ping { exts, .. } = decode(&b).unwrap().0.body else {
            panic!()
        };
        assert_eq!(
            exts,
            vec![Ext::Unknown {
                ty: ext_type::FORGOTTEN_NODE,
                data: vec![0; 32]
            }]
        );
        set_be16(&mut b, at, ext_type::SHARDID);
        let Body::Ping { exts, .. } = decode(&b).unwrap().0.body else {
            panic!()
        };
        assert_eq!(
            exts,
            vec![Ext::Unknown {
                ty: ext_type::SHARDID,
                data: vec![0; 32]
            }]
        );
        // Longer than needed: the fields are the prefix.
        let mut b = one_ext_ping(56, 48);
        set_be16(&mut b, at, ext_type::SHARDID);
        b[HEADER_LEN + 8..HEADER_LEN + 48].copy_from_slice(&name(b'7'));
        let Body::Ping { exts, .. } = decode(&b).unwrap().0.body else {
            panic!()
        };
        assert_eq!(exts, vec![Ext::ShardId(name(b'7'))]);
        // A human nodename must end with its NUL too, else it is skipped (7.0 ignores it).
        let mut b = one_ext_ping(16, 8);
        set_be16(&mut b, at, ext_type::HUMAN_NODENAME);
        b[HEADER_LEN + 8..HEADER_LEN + 16].copy_from_slice(b"abcdefgh");
        let Body::Ping { exts, .. } = decode(&b).unwrap().0.body else {
            panic!()
        };
        assert_eq!(
            exts,
            vec![Ext::Unknown {
                ty: ext_type::HUMAN_NODENAME,
                data: b"abcdefgh".to_vec()
            }]
        );
        b[HEADER_LEN + 15] = 0;
        let Body::Ping { exts, .. } = decode(&b).unwrap().0.body else {
            panic!()
        };
        assert_eq!(exts, vec![Ext::HumanNodename("abcdefg".into())]);
    }

    #[test]
    fn hostname_must_end_with_a_nul() {
        let at = HEADER_LEN + 4;
        // As the patched redis-server 7.0.15 decides: the payload's last byte is a NUL.
        let cases: [(&[u8], Option<&str>); 6] = [
            (b"abcdefg\0", Some("abcdefg")),
            (b"a\0bcdef\0", Some("a")),
            (b"abcdefghijklmno\0", Some("abcdefghijklmno")),
            (b"abcdefgh", None),
            (b"ab\0defgh", None),
            (b"", None),
        ];
        for (payload, want) in cases {
            let mut b = one_ext_ping(8 + payload.len() as u32, payload.len());
            set_be16(&mut b, at, ext_type::HOSTNAME);
            b[HEADER_LEN + 8..].copy_from_slice(payload);
            match want {
                Some(host) => {
                    let Body::Ping { exts, .. } = decode(&b).unwrap().0.body else {
                        panic!()
                    };
                    assert_eq!(exts, vec![Ext::Hostname(host.into())]);
                }
                None => assert_eq!(
                    decode(&b).unwrap_err(),
                    BusError::Malformed("hostname extension not NUL-terminated"),
                    "{payload:?}"
                ),
            }
        }
    }

    #[test]
    fn fixed_lengths_are_enforced() {
        use msg_type::*;
        let cases = [
            (FAIL, Body::Fail { about: name(b'f') }),
            (
                UPDATE,
                Body::Update {
                    config_epoch: 1,
                    nodename: name(b'u'),
                    slots: empty_bitmap(),
                },
            ),
            (FAILOVER_AUTH_REQUEST, Body::Empty),
            (FAILOVER_AUTH_ACK, Body::Empty),
            (MFSTART, Body::Empty),
        ];
        for (ty, body) in cases {
            let good = enc(&Message {
                header: header(ty),
                body,
            });
            let mut longer = good.clone();
            longer.push(0);
            fix_totlen(&mut longer);
            assert!(
                matches!(decode(&longer), Err(BusError::Malformed(_))),
                "type {ty} longer"
            );
            if good.len() > HEADER_LEN {
                let mut shorter = good[..good.len() - 1].to_vec();
                fix_totlen(&mut shorter);
                assert!(
                    matches!(decode(&shorter), Err(BusError::Malformed(_))),
                    "type {ty} shorter"
                );
            }
        }
    }

    #[test]
    fn publish_and_module_lengths_are_enforced() {
        let good = enc(&Message {
            header: header(msg_type::PUBLISH),
            body: Body::Publish {
                channel: b"ch".to_vec(),
                message: b"msg".to_vec(),
            },
        });
        let mut b = good.clone();
        set_be32(&mut b, 2256, 3);
        assert!(matches!(decode(&b), Err(BusError::Malformed(_))));
        // Lengths whose 32-bit sum wraps to the right total: Redis's check passes, ours not.
        let mut b = good.clone();
        set_be32(&mut b, 2256, 6);
        set_be32(&mut b, 2260, u32::MAX);
        assert_eq!(
            (2264u32).wrapping_add(6).wrapping_add(u32::MAX),
            be32_at(&b, 4),
            "the wrapped sum equals totlen"
        );
        assert!(matches!(decode(&b), Err(BusError::Malformed(_))));
        // Shorter than the two length fields.
        let mut b = good[..2260].to_vec();
        set_be32(&mut b, 4, 2260);
        assert!(matches!(decode(&b), Err(BusError::Malformed(_))));
        // A channel/message split anywhere inside the bytes decodes.
        let mut b = good.clone();
        set_be32(&mut b, 2256, 5);
        set_be32(&mut b, 2260, 0);
        assert_eq!(
            decode(&b).unwrap().0.body,
            Body::Publish {
                channel: b"chmsg".to_vec(),
                message: vec![]
            }
        );

        let good = enc(&Message {
            header: header(msg_type::MODULE),
            body: Body::Module {
                module_id: 5,
                module_type: 1,
                payload: b"abc".to_vec(),
            },
        });
        let mut b = good.clone();
        set_be32(&mut b, 2264, 4);
        assert!(matches!(decode(&b), Err(BusError::Malformed(_))));
        let mut b = good.clone();
        set_be32(&mut b, 2264, u32::MAX - 2268);
        assert!(matches!(decode(&b), Err(BusError::Malformed(_))));
        let mut b = good[..2268].to_vec();
        set_be32(&mut b, 4, 2268);
        assert!(matches!(decode(&b), Err(BusError::Malformed(_))));
    }

    #[test]
    fn unknown_types_are_refused_but_their_header_is_readable() {
        let mut b = enc(&Message {
            header: header(msg_type::MFSTART),
            body: Body::Empty,
        });
        b.extend_from_slice(b"future body");
        fix_totlen(&mut b);
        set_be16(&mut b, 12, msg_type::COUNT);
        assert_eq!(decode(&b).unwrap_err(), BusError::Malformed(UNKNOWN_TYPE));
        let (h, used) = decode_header(&b).unwrap();
        assert_eq!(used, b.len());
        assert_eq!(h.ty, msg_type::COUNT);
        assert_eq!(h.current_epoch, header(0).current_epoch);
        // decode_header still refuses what Redis refuses.
        set_be16(&mut b, 12, msg_type::FAIL);
        assert!(decode_header(&b).is_err());
    }

    #[test]
    fn consumed_stops_at_totlen() {
        let a = Message {
            header: header(msg_type::FAIL),
            body: Body::Fail { about: name(b'1') },
        };
        let c = Message {
            header: header(msg_type::PONG),
            body: Body::Ping {
                gossip: vec![gossip(b'2')],
                exts: vec![Ext::Hostname("h".into())],
            },
        };
        let mut buf = Vec::new();
        encode(&a, &mut buf);
        encode(&c, &mut buf);
        let (m1, n1) = decode(&buf).unwrap();
        assert_eq!(m1, a);
        assert_eq!(frame_len(&buf[n1..]), Ok(Some(buf.len() - n1)));
        let (m2, n2) = decode(&buf[n1..]).unwrap();
        assert_eq!(n1 + n2, buf.len());
        assert_eq!(m2.body, c.body);
    }

    #[test]
    fn strings_are_cut_to_their_fields() {
        let mut h = header(msg_type::PING);
        h.myip = "x".repeat(60);
        let mut g = gossip(b'g');
        g.ip = "y".repeat(50);
        let b = enc(&Message {
            header: h,
            body: Body::Ping {
                gossip: vec![g],
                exts: vec![],
            },
        });
        assert_eq!(b[2168 + 45], 0, "the address field keeps its NUL");
        assert_eq!(b[HEADER_LEN + 48 + 45], 0);
        let (m, _) = decode(&b).unwrap();
        assert_eq!(m.header.myip, "x".repeat(45));
        let Body::Ping { gossip, .. } = m.body else {
            panic!()
        };
        assert_eq!(gossip[0].ip, "y".repeat(45));
        // A peer that fills all 46 bytes: Redis uses 45 of them.
        let mut b = b.clone();
        b[2168..2214].fill(b'z');
        assert_eq!(decode(&b).unwrap().0.header.myip, "z".repeat(45));
        // Invalid UTF-8 is replaced, not fatal.
        b[2168] = 0xff;
        assert!(decode(&b).unwrap().0.header.myip.starts_with('\u{fffd}'));
        // A NUL inside a string ends it.
        let mut h = header(msg_type::PING);
        h.myip = "1.2\0garbage".into();
        let b = enc(&Message {
            header: h,
            body: Body::Ping {
                gossip: vec![],
                exts: vec![Ext::Hostname("ho\0st".into())],
            },
        });
        let (m, _) = decode(&b).unwrap();
        assert_eq!(m.header.myip, "1.2");
        assert_eq!(
            m.body,
            Body::Ping {
                gossip: vec![],
                exts: vec![Ext::Hostname("ho".into())]
            }
        );
    }

    #[test]
    fn truncations_and_corruptions_never_panic() {
        let msg = Message {
            header: header(msg_type::PING),
            body: Body::Ping {
                gossip: vec![gossip(b'a'), gossip(b'b')],
                exts: vec![
                    Ext::Hostname("host".into()),
                    Ext::ForgottenNode {
                        name: name(b'f'),
                        ttl: 9,
                    },
                    Ext::ShardId(name(b's')),
                ],
            },
        };
        let good = enc(&msg);
        for n in 0..good.len() {
            assert!(decode(&good[..n]).is_err(), "prefix {n}");
            // The same prefix with its totlen rewritten to match.
            if n >= 8 {
                let mut b = good[..n].to_vec();
                set_be32(&mut b, 4, n as u32);
                assert!(decode(&b).is_err(), "rewritten prefix {n}");
            }
        }
        // Random corruption of every kind of message (xorshift: deterministic, no dependency).
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let samples = [
            good.clone(),
            enc(&Message {
                header: header(msg_type::PUBLISH),
                body: Body::Publish {
                    channel: b"c".to_vec(),
                    message: b"m".to_vec(),
                },
            }),
            enc(&Message {
                header: header(msg_type::MODULE),
                body: Body::Module {
                    module_id: 1,
                    module_type: 2,
                    payload: b"p".to_vec(),
                },
            }),
            enc(&Message {
                header: header(msg_type::UPDATE),
                body: Body::Update {
                    config_epoch: 1,
                    nodename: name(b'u'),
                    slots: empty_bitmap(),
                },
            }),
        ];
        // Positions worth hitting: lengths, counts, types, flags, extension headers.
        let hot = [
            4usize, 5, 6, 7, 8, 9, 12, 13, 14, 15, 2214, 2215, 2253, 2256, 2257, 2258, 2259, 2260,
            2261, 2262, 2263, 2264, 2265, 2266, 2267, 2464, 2465, 2466, 2467, 2468, 2469,
        ];
        for round in 0..20_000 {
            let mut b = samples[round % samples.len()].clone();
            for _ in 0..(1 + rnd() % 4) {
                let r = rnd();
                let at = if r % 2 == 0 {
                    hot[(r >> 8) as usize % hot.len()]
                } else {
                    (r >> 8) as usize % b.len()
                };
                if let Some(x) = b.get_mut(at) {
                    *x = (r >> 40) as u8;
                }
            }
            if rnd() % 3 == 0 {
                let cut = rnd() as usize % (b.len() + 1);
                b.truncate(cut);
            }
            if let Ok((m, used)) = decode(&b) {
                assert!(used <= b.len());
                // Whatever decodes re-encodes to a frame that decodes again, to the same
                // message where no string was involved.
                let again = enc(&m);
                let (m2, used2) = decode(&again).unwrap();
                assert_eq!(used2, again.len());
                assert_eq!(m2.header.ty, m.header.ty);
                match (&m.body, &m2.body) {
                    (
                        Body::Ping {
                            gossip: g1,
                            exts: e1,
                        },
                        Body::Ping {
                            gossip: g2,
                            exts: e2,
                        },
                    ) => {
                        assert_eq!((g1.len(), e1.len()), (g2.len(), e2.len()));
                    }
                    (b1, b2) => assert_eq!(b1, b2),
                }
            }
        }
    }

    #[test]
    fn slot_bits_are_lsb_first() {
        let mut bm = [0u8; SLOTS / 8];
        set_slot_bit(&mut bm, 0, true);
        assert_eq!(bm[0], 0x01);
        set_slot_bit(&mut bm, 7, true);
        assert_eq!(bm[0], 0x81);
        set_slot_bit(&mut bm, 8, true);
        assert_eq!(bm[1], 0x01);
        set_slot_bit(&mut bm, 16383, true);
        assert_eq!(bm[2047], 0x80);
        assert!(slot_bit(&bm, 0) && slot_bit(&bm, 7) && slot_bit(&bm, 8) && slot_bit(&bm, 16383));
        assert!(!slot_bit(&bm, 1) && !slot_bit(&bm, 9));
        set_slot_bit(&mut bm, 7, false);
        assert_eq!(bm[0], 0x01);
        // Out of range: not set, and setting it changes nothing.
        let before = bm;
        set_slot_bit(&mut bm, 16384, true);
        set_slot_bit(&mut bm, u16::MAX, true);
        assert_eq!(bm, before);
        assert!(!slot_bit(&bm, 16384) && !slot_bit(&bm, u16::MAX));
    }

    #[test]
    fn names() {
        let id = b"0123456789abcdef0123456789abcdef01234567";
        assert_eq!(parse_name(id), Some(*id));
        assert_eq!(name_str(id), "0123456789abcdef0123456789abcdef01234567");
        // verifyClusterNodeId: lowercase letters and digits, exactly 40.
        assert!(parse_name(b"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz").is_some());
        assert!(parse_name(b"0123456789ABCDEF0123456789abcdef01234567").is_none());
        assert!(parse_name(&id[..39]).is_none());
        assert!(parse_name(b"0123456789abcdef0123456789abcdef012345678").is_none());
        assert!(parse_name(b"0123456789abcdef0123456789abcdef0123456-").is_none());
        assert!(parse_name(b"").is_none());
        let null = [0u8; NAME_LEN];
        assert!(name_is_null(&null));
        assert!(!name_is_null(id));
        assert_eq!(name_str(&null), "");
        let mut odd = *id;
        odd[3] = 0xff;
        assert_eq!(name_str(&odd), "012");
        odd[3] = 0;
        assert_eq!(name_str(&odd), "012");
    }

    #[test]
    fn counts_saturate_at_the_field_width() {
        let msg = Message {
            header: header(msg_type::PING),
            body: Body::Ping {
                gossip: vec![gossip(b'g'); u16::MAX as usize + 2],
                exts: vec![],
            },
        };
        let b = enc(&msg);
        assert_eq!(be16_at(&b, 14), u16::MAX);
        assert_eq!(b.len(), HEADER_LEN + GOSSIP_LEN * u16::MAX as usize);
        let Body::Ping { gossip, .. } = decode(&b).unwrap().0.body else {
            panic!()
        };
        assert_eq!(gossip.len(), u16::MAX as usize);
    }

    #[test]
    fn errors_display() {
        assert_eq!(
            BusError::BadLength(3).to_string(),
            "cluster bus: bad message length 3"
        );
        let e: Box<dyn std::error::Error> = Box::new(BusError::Malformed("x"));
        assert!(e.to_string().contains('x'));
    }
}
