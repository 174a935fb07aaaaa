//! A sorted set value, in Redis's two encodings.
//!
//! * `listpack`: while the set has at most `zset-max-listpack-entries` members, none longer
//!   than `zset-max-listpack-value` bytes, its (member, score) pairs live sorted by
//!   (score, member) in one packed buffer: per entry a LEB128 length, the member bytes and
//!   the score's 8 bytes. Every operation is a linear scan, as Redis's listpack is.
//! * `skiplist`: past either limit the set converts (and never converts back, as in Redis)
//!   to a member index plus an ordered structure. The ordered structure is an
//!   order-statistic treap (a randomized balanced binary tree whose nodes carry their
//!   subtree sizes) kept in an arena of nodes addressed by `u32`: it answers by score, by
//!   member order and by rank in O(log n) expected, as Redis's skiplist with spans does,
//!   with split/merge giving range deletion in O(log n + k). A treap was chosen over a
//!   skiplist with spans because it needs no per-node level arrays (one fixed-size node per
//!   member, so an arena of plain structs without unsafe pointers) and split/merge make
//!   rank-range removal simple. The member index is a `hashbrown::HashTable` of node ids
//!   hashed by the node's member, so each member's bytes are stored once.
//!
//! Ordering is by score, then member bytes, as Redis; scores are never NaN.

use crate::store::encoding::{limit, LIMITS};
use crate::util::mem::alloc_size;
use crate::util::packed::PackedBytes;
use hashbrown::HashTable;
use std::cmp::Ordering;
use std::hash::BuildHasher;

const NIL: u32 = u32::MAX;

/// (score, member) order of Redis's sorted sets.
pub fn cmp_entry(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> Ordering {
    match s1.partial_cmp(&s2) {
        Some(Ordering::Equal) | None => m1.cmp(m2),
        Some(o) => o,
    }
}

#[derive(Clone, Debug, Default)]
pub struct ZSetValue {
    inner: Inner,
}

#[derive(Clone, Debug)]
enum Inner {
    Pack(Pack),
    Tree(Box<Tree>),
}

impl Default for Inner {
    fn default() -> Inner {
        Inner::Pack(Pack::default())
    }
}

// ---------------------------------------------------------------------------------------
// Packed form

#[derive(Clone, Debug, Default)]
struct Pack {
    /// Exactly sized, as a listpack (see `util::listpack`): a `Pack` is 16 bytes, so the
    /// boxed value of a small sorted set takes a 16-byte block.
    buf: PackedBytes,
    len: u32,
}

const _: () = assert!(std::mem::size_of::<ZSetValue>() == 16);

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// The decimal exponent that marks a score stored as its 8 raw bytes.
const RAW_SCORE: u64 = 15;

/// Writes a score in as few bytes as the packed form can: a score that is exactly `m /
/// 10^e` for an integer `m` and `e < 15` (what people use: 0, 3, 1.5, 1700000000000, 0.25)
/// is the varint of `zigzag(m) << 4 | e`, usually 1 to 3 bytes where the raw double takes 8
/// (Redis's listpack stores such scores as short strings for the same reason).
fn put_score(out: &mut Vec<u8>, score: f64) {
    let mut scale = 1.0f64;
    // A negative zero keeps its sign only in the raw form.
    let exponents = if score == 0.0 && score.is_sign_negative() {
        0
    } else {
        RAW_SCORE
    };
    for e in 0..exponents {
        let m = (score * scale).round();
        if m.abs() < 9.0e15 && m / scale == score {
            let m = m as i64;
            let zigzag = ((m << 1) ^ (m >> 63)) as u64;
            if zigzag < (1 << 59) {
                put_varint(out, ((zigzag << 4) | e) as usize);
                return;
            }
        }
        scale *= 10.0;
    }
    put_varint(out, RAW_SCORE as usize);
    out.extend_from_slice(&score.to_le_bytes());
}

/// Reads a forward varint at `pos`: (value, bytes read).
fn read_varint(buf: &[u8], pos: usize) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    let mut i = pos;
    loop {
        let b = buf[i];
        i += 1;
        n |= ((b & 0x7f) as usize) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return (n, i - pos);
        }
    }
}

/// Reads a score written by [`put_score`] at `pos`; returns it and the position after it.
fn get_score(buf: &[u8], mut pos: usize) -> (f64, usize) {
    let mut n = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[pos];
        pos += 1;
        n |= ((b & 0x7f) as u64) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    let e = n & 0xf;
    if e == RAW_SCORE {
        let mut sb = [0u8; 8];
        sb.copy_from_slice(&buf[pos..pos + 8]);
        return (f64::from_le_bytes(sb), pos + 8);
    }
    let zigzag = n >> 4;
    let m = ((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64);
    if e == 0 {
        // An integer score (the usual case): no power of ten to divide by.
        return (m as f64, pos);
    }
    (m as f64 / 10f64.powi(e as i32), pos)
}

fn encode_entry(member: &[u8], score: f64) -> Vec<u8> {
    let mut e = Vec::with_capacity(member.len() + 12);
    put_varint(&mut e, member.len());
    e.extend_from_slice(member);
    put_score(&mut e, score);
    e
}

struct PackIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for PackIter<'a> {
    /// (member, score, entry start, entry end)
    type Item = (&'a [u8], f64, usize, usize);
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let start = self.pos;
        let mut n = 0usize;
        let mut shift = 0;
        loop {
            let b = self.buf[self.pos];
            self.pos += 1;
            n |= ((b & 0x7f) as usize) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let m = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        let (score, next) = get_score(self.buf, self.pos);
        self.pos = next;
        Some((m, score, start, self.pos))
    }
}

impl Pack {
    fn iter(&self) -> PackIter<'_> {
        PackIter {
            buf: &self.buf,
            pos: 0,
        }
    }
    fn find(&self, member: &[u8]) -> Option<(usize, f64, usize, usize)> {
        // Members are compared before any score is decoded: only the match's score is
        // (decoding every entry's score cost as much as the rest of a ZADD's lookup).
        let buf: &[u8] = &self.buf;
        let mut pos = 0;
        let mut i = 0;
        while pos < buf.len() {
            let start = pos;
            let (n, l) = read_varint(buf, pos);
            pos += l;
            let m = &buf[pos..pos + n];
            pos += n;
            if m == member {
                let (score, end) = get_score(buf, pos);
                return Some((i, score, start, end));
            }
            let (tag, l) = read_varint(buf, pos);
            pos += l;
            if tag as u64 & 0xf == RAW_SCORE {
                pos += 8;
            }
            i += 1;
        }
        None
    }
    fn insert(&mut self, member: &[u8], score: f64) {
        // Redis's listpack keeps a negative zero as 0.
        let score = if score == 0.0 { 0.0 } else { score };
        let at = self
            .iter()
            .find(|(m, s, _, _)| cmp_entry(*s, m, score, member) == Ordering::Greater)
            .map_or(self.buf.len(), |e| e.2);
        let e = encode_entry(member, score);
        self.buf.edit(e.len(), |buf| drop(buf.splice(at..at, e)));
        self.len += 1;
    }
    fn remove_bytes(&mut self, a: usize, b: usize, n: usize) {
        self.buf.edit(0, |buf| drop(buf.drain(a..b)));
        self.len -= n as u32;
    }
}

// ---------------------------------------------------------------------------------------
// Tree form

#[derive(Clone, Debug)]
struct Node {
    member: Box<[u8]>,
    score: f64,
    prio: u32,
    size: u32,
    left: u32,
    right: u32,
}

#[derive(Clone, Debug)]
struct Tree {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    index: HashTable<u32>,
    hasher: hashbrown::DefaultHashBuilder,
    member_bytes: usize,
    rng: u64,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
            index: HashTable::new(),
            hasher: Default::default(),
            member_bytes: 0,
            rng: 0x9e37_79b9_7f4a_7c15,
        }
    }
    fn len(&self) -> usize {
        self.index.len()
    }
    fn size(&self, t: u32) -> u32 {
        if t == NIL {
            0
        } else {
            self.nodes[t as usize].size
        }
    }
    fn fix(&mut self, t: u32) {
        let n = &self.nodes[t as usize];
        let s = 1 + self.size(n.left) + self.size(n.right);
        self.nodes[t as usize].size = s;
    }
    fn next_prio(&mut self) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 32) as u32
    }
    fn find(&self, member: &[u8]) -> Option<u32> {
        let h = self.hasher.hash_one(member);
        self.index
            .find(h, |&i| *self.nodes[i as usize].member == *member)
            .copied()
    }
    fn score(&self, member: &[u8]) -> Option<f64> {
        self.find(member).map(|i| self.nodes[i as usize].score)
    }
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.nodes[a as usize].right;
            let m = self.merge(r, b);
            self.nodes[a as usize].right = m;
            self.fix(a);
            a
        } else {
            let l = self.nodes[b as usize].left;
            let m = self.merge(a, l);
            self.nodes[b as usize].left = m;
            self.fix(b);
            b
        }
    }
    /// Splits `t` into (its first `k` nodes, the rest).
    fn split_rank(&mut self, t: u32, k: u32) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let l = self.nodes[t as usize].left;
        let ls = self.size(l);
        if k <= ls {
            let (a, b) = self.split_rank(l, k);
            self.nodes[t as usize].left = b;
            self.fix(t);
            (a, t)
        } else {
            let r = self.nodes[t as usize].right;
            let (a, b) = self.split_rank(r, k - ls - 1);
            self.nodes[t as usize].right = a;
            self.fix(t);
            (t, b)
        }
    }
    fn alloc(&mut self, member: &[u8], score: f64) -> u32 {
        let prio = self.next_prio();
        let node = Node {
            member: member.into(),
            score,
            prio,
            size: 1,
            left: NIL,
            right: NIL,
        };
        self.member_bytes += alloc_size(member.len());
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }
    fn release(&mut self, i: u32) -> (Vec<u8>, f64) {
        let n = &mut self.nodes[i as usize];
        let member = std::mem::take(&mut n.member).into_vec();
        let score = n.score;
        self.member_bytes -= alloc_size(member.len());
        let h = self.hasher.hash_one(&member[..]);
        if let Ok(e) = self.index.find_entry(h, |&j| j == i) {
            e.remove();
        }
        self.free.push(i);
        (member, score)
    }
    /// Inserts a member known to be absent.
    fn insert_new(&mut self, member: &[u8], score: f64) {
        let i = self.alloc(member, score);
        let h = self.hasher.hash_one(member);
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.index
            .insert_unique(h, i, |&j| hasher.hash_one(&nodes[j as usize].member[..]));
        self.link(i);
    }
    /// Puts the detached node `i` in its place in the order: one descent to where its
    /// priority puts it, then a split of the subtree below by its key (a treap's insertion;
    /// splitting the whole tree at its rank and merging back touched two full paths more).
    fn link(&mut self, i: u32) {
        let root = self.root;
        self.root = self.insert_at(root, i);
    }

    fn insert_at(&mut self, t: u32, i: u32) -> u32 {
        if t == NIL {
            return i;
        }
        if self.nodes[i as usize].prio > self.nodes[t as usize].prio {
            let (a, b) = self.split_key(t, i);
            let n = &mut self.nodes[i as usize];
            n.left = a;
            n.right = b;
            self.fix(i);
            return i;
        }
        if self.before(i, t) {
            let l = self.nodes[t as usize].left;
            let m = self.insert_at(l, i);
            self.nodes[t as usize].left = m;
        } else {
            let r = self.nodes[t as usize].right;
            let m = self.insert_at(r, i);
            self.nodes[t as usize].right = m;
        }
        self.fix(t);
        t
    }

    /// Does node `a` come before node `b` in (score, member) order?
    fn before(&self, a: u32, b: u32) -> bool {
        let (x, y) = (&self.nodes[a as usize], &self.nodes[b as usize]);
        cmp_entry(x.score, &x.member, y.score, &y.member).is_lt()
    }

    /// Splits `t` into (the nodes before node `i`, the rest).
    fn split_key(&mut self, t: u32, i: u32) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.before(t, i) {
            let r = self.nodes[t as usize].right;
            let (a, b) = self.split_key(r, i);
            self.nodes[t as usize].right = a;
            self.fix(t);
            (t, b)
        } else {
            let l = self.nodes[t as usize].left;
            let (a, b) = self.split_key(l, i);
            self.nodes[t as usize].left = b;
            self.fix(t);
            (a, t)
        }
    }

    /// Takes node `i` out of the order: one descent by its key, and its two subtrees merged
    /// in its place.
    fn unlink(&mut self, i: u32) {
        let root = self.root;
        self.root = self.remove_at(root, i);
        let node = &mut self.nodes[i as usize];
        node.left = NIL;
        node.right = NIL;
        node.size = 1;
    }

    fn remove_at(&mut self, t: u32, i: u32) -> u32 {
        if t == NIL {
            return NIL;
        }
        if t == i {
            let (l, r) = (self.nodes[t as usize].left, self.nodes[t as usize].right);
            return self.merge(l, r);
        }
        if self.before(i, t) {
            let l = self.nodes[t as usize].left;
            let m = self.remove_at(l, i);
            self.nodes[t as usize].left = m;
        } else {
            let r = self.nodes[t as usize].right;
            let m = self.remove_at(r, i);
            self.nodes[t as usize].right = m;
        }
        self.fix(t);
        t
    }
    fn rank(&self, score: f64, member: &[u8]) -> usize {
        let mut t = self.root;
        let mut r = 0usize;
        while t != NIL {
            let n = &self.nodes[t as usize];
            match cmp_entry(score, member, n.score, &n.member) {
                Ordering::Less => t = n.left,
                Ordering::Greater => {
                    r += self.size(n.left) as usize + 1;
                    t = n.right;
                }
                Ordering::Equal => return r + self.size(n.left) as usize,
            }
        }
        r
    }
    /// How many nodes satisfy `before` (which holds for a prefix of the order).
    fn count_before(&self, before: &dyn Fn(f64, &[u8]) -> bool) -> usize {
        let mut t = self.root;
        let mut r = 0usize;
        while t != NIL {
            let n = &self.nodes[t as usize];
            if before(n.score, &n.member) {
                r += self.size(n.left) as usize + 1;
                t = n.right;
            } else {
                t = n.left;
            }
        }
        r
    }
    /// The stack for an in-order walk starting at rank `k`, forward or backward.
    fn stack_at(&self, mut k: usize, rev: bool) -> Vec<u32> {
        let mut st = Vec::new();
        let mut t = self.root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            let ls = self.size(n.left) as usize;
            match k.cmp(&ls) {
                Ordering::Less => {
                    if !rev {
                        st.push(t);
                    }
                    t = n.left;
                }
                Ordering::Equal => {
                    st.push(t);
                    break;
                }
                Ordering::Greater => {
                    if rev {
                        st.push(t);
                    }
                    k -= ls + 1;
                    t = n.right;
                }
            }
        }
        st
    }
    fn collect_inorder(&self, t: u32, out: &mut Vec<u32>) {
        if t == NIL {
            return;
        }
        let n = &self.nodes[t as usize];
        self.collect_inorder(n.left, out);
        out.push(t);
        self.collect_inorder(n.right, out);
    }
    /// After many removals, rebuilds the arena without its free slots so memory follows the
    /// set's size (Redis frees each node; an arena keeps them until it is rebuilt).
    fn maybe_compact(&mut self) {
        if self.free.len() <= 64 || self.free.len() * 2 <= self.nodes.len() {
            return;
        }
        let mut ids = Vec::with_capacity(self.len());
        self.collect_inorder(self.root, &mut ids);
        let mut t = Tree::new();
        t.rng = self.rng;
        for i in ids {
            let n = &self.nodes[i as usize];
            t.insert_new(&n.member, n.score);
        }
        *self = t;
    }
    fn heap(&self) -> usize {
        alloc_size(self.nodes.capacity() * std::mem::size_of::<Node>())
            + alloc_size(self.free.capacity() * 4)
            + self.index.capacity() * 5
            + self.member_bytes
    }
}

/// Walks the tree form in order from a rank.
struct TreeIter<'a> {
    tree: &'a Tree,
    stack: Vec<u32>,
    rev: bool,
}

impl<'a> Iterator for TreeIter<'a> {
    type Item = (&'a [u8], f64);
    fn next(&mut self) -> Option<Self::Item> {
        let t = self.stack.pop()?;
        let nodes = &self.tree.nodes;
        let n = &nodes[t as usize];
        let mut c = if self.rev { n.left } else { n.right };
        while c != NIL {
            self.stack.push(c);
            let cn = &nodes[c as usize];
            c = if self.rev { cn.right } else { cn.left };
        }
        Some((&n.member, n.score))
    }
}

// ---------------------------------------------------------------------------------------
// The value

impl ZSetValue {
    pub fn len(&self) -> usize {
        match &self.inner {
            Inner::Pack(p) => p.len as usize,
            Inner::Tree(t) => t.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn encoding(&self) -> &'static str {
        match &self.inner {
            Inner::Pack(_) => "listpack",
            Inner::Tree(_) => "skiplist",
        }
    }
    pub fn heap(&self) -> usize {
        match &self.inner {
            Inner::Pack(p) => alloc_size(p.buf.len()),
            Inner::Tree(t) => std::mem::size_of::<Tree>() + t.heap(),
        }
    }

    /// An empty set already in the skiplist form (Redis's `createZsetObject`).
    pub fn new_skiplist() -> ZSetValue {
        ZSetValue {
            inner: Inner::Tree(Box::new(Tree::new())),
        }
    }

    /// An empty set in the form Redis picks for an expected size (`zsetTypeCreate`).
    pub fn with_size_hint(n: usize) -> ZSetValue {
        if n > limit(&LIMITS.zset_entries) {
            ZSetValue::new_skiplist()
        } else {
            ZSetValue::default()
        }
    }

    /// Back to the listpack form when the set fits its limits (Redis's
    /// `zsetConvertToListpackIfNeeded`, used on the results of ZUNIONSTORE and friends).
    pub fn shrink_if_fits(&mut self) {
        let Inner::Tree(t) = &self.inner else {
            return;
        };
        let fits = t.len() <= limit(&LIMITS.zset_entries)
            && t.nodes
                .iter()
                .all(|n| n.member.len() <= limit(&LIMITS.zset_value));
        if fits {
            let mut buf = Vec::new();
            let mut len = 0;
            for (m, s) in self.iter() {
                // In order: each entry goes at the end.
                let s = if s == 0.0 { 0.0 } else { s };
                buf.extend_from_slice(&encode_entry(m, s));
                len += 1;
            }
            self.inner = Inner::Pack(Pack {
                buf: PackedBytes::from(buf),
                len,
            });
        }
    }

    /// The member's score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.inner {
            Inner::Pack(p) => p.find(member).map(|e| e.1),
            Inner::Tree(t) => t.score(member),
        }
    }

    fn convert(&mut self) {
        if let Inner::Pack(p) = &self.inner {
            let mut t = Tree::new();
            for (m, s, _, _) in p.iter() {
                t.insert_new(m, s);
            }
            self.inner = Inner::Tree(Box::new(t));
        }
    }

    /// Sets the member's score (adding it when absent); returns its previous score. Converts
    /// to the skiplist form past the listpack limits, as Redis's `zsetAdd`.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        // One search of a packed set: its result decides the conversion and the change.
        let mut found = None;
        if let Inner::Pack(p) = &self.inner {
            found = p.find(member);
            if found.is_none()
                && (p.len as usize + 1 > limit(&LIMITS.zset_entries)
                    || member.len() > limit(&LIMITS.zset_value))
            {
                self.convert();
            }
        }
        match &mut self.inner {
            Inner::Pack(p) => {
                if let Some((_, s, a, b)) = found {
                    if s == score {
                        return Some(s);
                    }
                    p.remove_bytes(a, b, 1);
                }
                p.insert(member, score);
                found.map(|e| e.1)
            }
            Inner::Tree(t) => match t.find(member) {
                Some(i) => {
                    let old = t.nodes[i as usize].score;
                    if old != score {
                        t.unlink(i);
                        t.nodes[i as usize].score = score;
                        t.link(i);
                    }
                    Some(old)
                }
                None => {
                    t.insert_new(member, score);
                    None
                }
            },
        }
    }

    /// Removes the member; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.inner {
            Inner::Pack(p) => {
                let (_, s, a, b) = p.find(member)?;
                p.remove_bytes(a, b, 1);
                Some(s)
            }
            Inner::Tree(t) => {
                let i = t.find(member)?;
                t.unlink(i);
                let s = t.release(i).1;
                t.maybe_compact();
                Some(s)
            }
        }
    }

    /// The member's 0-based rank in ascending order, with its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match &self.inner {
            Inner::Pack(p) => p.find(member).map(|e| (e.0, e.1)),
            Inner::Tree(t) => {
                let i = t.find(member)?;
                let n = &t.nodes[i as usize];
                Some((t.rank(n.score, &n.member), n.score))
            }
        }
    }

    /// How many entries satisfy `before`, a predicate on (score, member) true for a prefix of
    /// the order (e.g. "score < min"): the rank where a range starts.
    pub fn count_before(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.inner {
            Inner::Pack(p) => p.iter().take_while(|e| before(e.1, e.0)).count(),
            Inner::Tree(t) => t.count_before(&before),
        }
    }

    /// Entries in ascending order from rank `start` (descending from `start` down to rank 0
    /// when `rev`).
    pub fn iter_from(
        &self,
        start: usize,
        rev: bool,
    ) -> Box<dyn Iterator<Item = (&[u8], f64)> + '_> {
        let len = self.len();
        if start >= len {
            return Box::new(std::iter::empty());
        }
        match &self.inner {
            Inner::Pack(p) => {
                if rev {
                    let v: Vec<(&[u8], f64)> =
                        p.iter().take(start + 1).map(|e| (e.0, e.1)).collect();
                    Box::new(v.into_iter().rev())
                } else {
                    Box::new(p.iter().skip(start).map(|e| (e.0, e.1)))
                }
            }
            Inner::Tree(t) => Box::new(TreeIter {
                tree: t,
                stack: t.stack_at(start, rev),
                rev,
            }),
        }
    }

    /// All entries in ascending order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&[u8], f64)> + '_> {
        self.iter_from(0, false)
    }

    /// The entry at ascending rank `k`.
    pub fn at(&self, k: usize) -> Option<(&[u8], f64)> {
        self.iter_from(k, false).next()
    }

    /// Removes the entries of ascending ranks `start..end` (end exclusive, clamped) and
    /// returns them in ascending order.
    pub fn remove_ranks(&mut self, start: usize, end: usize) -> Vec<(Vec<u8>, f64)> {
        let end = end.min(self.len());
        if start >= end {
            return Vec::new();
        }
        match &mut self.inner {
            Inner::Pack(p) => {
                let mut out = Vec::new();
                let (mut a, mut b) = (0, 0);
                for (i, (m, s, ea, eb)) in p.iter().enumerate().skip(start).take(end - start) {
                    if i == start {
                        a = ea;
                    }
                    b = eb;
                    out.push((m.to_vec(), s));
                }
                p.remove_bytes(a, b, end - start);
                out
            }
            Inner::Tree(t) => {
                let root = t.root;
                let (x, rest) = t.split_rank(root, start as u32);
                let (mid, y) = t.split_rank(rest, (end - start) as u32);
                t.root = t.merge(x, y);
                let mut ids = Vec::new();
                t.collect_inorder(mid, &mut ids);
                let out = ids.into_iter().map(|i| t.release(i)).collect();
                t.maybe_compact();
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::rng::XorShift;
    use std::collections::BTreeMap;

    #[derive(PartialEq, PartialOrd, Clone, Copy, Debug)]
    struct K(f64);
    impl Eq for K {}
    #[allow(clippy::derive_ord_xor_partial_ord)]
    impl Ord for K {
        fn cmp(&self, o: &K) -> Ordering {
            self.0.partial_cmp(&o.0).unwrap_or(Ordering::Equal)
        }
    }

    fn check(z: &ZSetValue, model: &BTreeMap<Vec<u8>, f64>) {
        let mut sorted: Vec<(K, Vec<u8>)> = model.iter().map(|(m, s)| (K(*s), m.clone())).collect();
        sorted.sort();
        assert_eq!(z.len(), sorted.len());
        let got: Vec<(K, Vec<u8>)> = z.iter().map(|(m, s)| (K(s), m.to_vec())).collect();
        assert_eq!(got, sorted);
        let back: Vec<(K, Vec<u8>)> = z
            .iter_from(sorted.len().saturating_sub(1), true)
            .map(|(m, s)| (K(s), m.to_vec()))
            .collect();
        let mut rs = sorted.clone();
        rs.reverse();
        assert_eq!(back, rs);
        for (i, (s, m)) in sorted.iter().enumerate() {
            assert_eq!(z.rank(m), Some((i, s.0)));
            assert_eq!(z.score(m), Some(s.0));
            let at = z.at(i).unwrap();
            assert_eq!((at.0, at.1), (&m[..], s.0));
            assert_eq!(
                z.count_before(|sc, mm| cmp_entry(sc, mm, s.0, m).is_lt()),
                i
            );
        }
    }

    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn run(seed: u64, entries: i64, ops: usize, space: u64) {
        let old = LIMITS
            .zset_entries
            .load(std::sync::atomic::Ordering::Relaxed);
        LIMITS
            .zset_entries
            .store(entries, std::sync::atomic::Ordering::Relaxed);
        let mut r = XorShift::new(seed);
        let mut z = ZSetValue::default();
        let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
        for step in 0..ops {
            let m = format!("m{}", r.below(space)).into_bytes();
            match r.below(10) {
                0..=4 => {
                    let s = (r.below(20) as f64) - 10.0;
                    assert_eq!(z.insert(&m, s), model.insert(m.clone(), s));
                }
                5..=6 => {
                    assert_eq!(z.remove(&m), model.remove(&m));
                }
                7 => {
                    let len = z.len();
                    let a = r.below(len as u64 + 2) as usize;
                    let b = a + r.below(if space > 100 { 40 } else { 5 }) as usize;
                    let removed = z.remove_ranks(a, b);
                    let expect: Vec<(Vec<u8>, f64)> = {
                        let mut sorted: Vec<(K, Vec<u8>)> =
                            model.iter().map(|(m, s)| (K(*s), m.clone())).collect();
                        sorted.sort();
                        sorted
                            .into_iter()
                            .skip(a)
                            .take(b.saturating_sub(a))
                            .map(|(s, m)| (m, s.0))
                            .collect()
                    };
                    for (m, _) in &expect {
                        model.remove(m);
                    }
                    assert_eq!(removed, expect);
                }
                _ => {
                    assert_eq!(z.score(&m), model.get(&m).copied());
                }
            }
            if step % 17 == 0 {
                check(&z, &model);
            }
        }
        check(&z, &model);
        LIMITS
            .zset_entries
            .store(old, std::sync::atomic::Ordering::Relaxed);
    }

    #[test]
    fn random_ops_match_a_model() {
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // Large limit: stays packed; zero: tree from the start; default: converts.
        run(1, 1 << 20, 3000, 60);
        run(2, 0, 3000, 60);
        run(3, 16, 3000, 60);
        // Wide member space and many removals: exercises the arena's compaction.
        run(4, 0, 20000, 400);
    }

    #[test]
    fn removals_give_memory_back() {
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut z = ZSetValue::default();
        for i in 0..5000 {
            z.insert(format!("member-{i}").as_bytes(), i as f64);
        }
        let full = z.heap();
        for i in 0..4990 {
            assert_eq!(z.remove(format!("member-{i}").as_bytes()), Some(i as f64));
        }
        assert!(z.heap() * 10 < full, "{} vs {}", z.heap(), full);
        assert_eq!(z.rank(b"member-4995"), Some((5, 4995.0)));
        z.remove_ranks(0, 8);
        assert_eq!(z.len(), 2);
        assert_eq!(z.at(1).map(|e| e.1), Some(4999.0));
    }

    #[test]
    fn converts_past_the_limits() {
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut z = ZSetValue::default();
        z.insert(b"a", 1.0);
        assert_eq!(z.encoding(), "listpack");
        let long = vec![b'x'; 100];
        z.insert(&long, 2.0);
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(z.rank(&long), Some((1, 2.0)));
        let mut z = ZSetValue::default();
        z.insert(b"z", -0.0);
        assert!(z.score(b"z").unwrap().is_sign_positive());
    }
}

#[cfg(test)]
mod score_tests {
    use super::{get_score, put_score};

    #[test]
    fn scores_round_trip_exactly() {
        let mut seed = 1u64;
        let mut samples = vec![
            0.0,
            1.0,
            -1.0,
            1.5,
            3.0,
            0.1,
            0.25,
            -7.125,
            1700000000000.0,
            1e15,
            9e15,
            1e300,
            -1e-300,
            5e-324,
            f64::MAX,
            f64::MIN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.30000000000000004,
            123456.789,
        ];
        for _ in 0..10000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            samples.push(f64::from_bits(seed));
            samples.push((seed % 100000) as f64 / 100.0);
            samples.push(-((seed % 1000) as f64) * 0.5);
        }
        for x in samples.into_iter().filter(|x| !x.is_nan()) {
            let mut out = Vec::new();
            put_score(&mut out, x);
            let (y, end) = get_score(&out, 0);
            assert_eq!(end, out.len());
            assert_eq!(x.to_bits(), y.to_bits(), "{x}");
        }
        let mut out = Vec::new();
        put_score(&mut out, 1.5);
        assert_eq!(out.len(), 2);
    }
}
