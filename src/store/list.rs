//! A list value: a deque of packed nodes (Redis's quicklist of listpacks).
//!
//! Each node is a [`Listpack`] bounded by `list-max-listpack-size` (a count of elements when
//! positive, 4 to 64 KiB of encoded bytes when -1 to -5), so an element of up to 127 bytes
//! costs its bytes plus two, and pushes and pops at either end touch one small node. A list
//! reports `quicklist`, as Redis 7.0 does for every list.
//! Access by index walks node lengths from the nearer end: O(nodes) + O(node size).
//! Under `list-compress-depth N`, all but the N nodes at each end are kept compressed.
//! A list of one node of at most 254 elements is that node's listpack alone, held in the
//! key's entry ([`ListValue`]); pushes, pops, LSET, LINSERT, LREM and LTRIM change it there.

use crate::store::encoding::{limit, LIMITS};
use crate::util::listpack::{entry_size, Listpack, ListpackRef};
use crate::util::packed::{Thin, ThinRef, THIN_MAX_COUNT};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

/// One node: a listpack, or its buffer compressed (an inner node of a list under
/// `list-compress-depth`, as Redis's LZF-compressed quicklist nodes; LZ4 here).
#[derive(Clone, Debug)]
enum Node {
    Raw(Listpack),
    Packed { data: Box<[u8]>, len: u32, raw: u32 },
}

/// Redis's `MIN_COMPRESS_BYTES` and `MIN_COMPRESS_IMPROVE`: smaller nodes, or ones that do
/// not shrink by this much, stay as they are.
const MIN_COMPRESS_BYTES: usize = 48;
const MIN_COMPRESS_IMPROVE: usize = 8;

impl Node {
    fn new() -> Node {
        Node::Raw(Listpack::new())
    }

    fn len(&self) -> usize {
        match self {
            Node::Raw(lp) => lp.len(),
            Node::Packed { len, .. } => *len as usize,
        }
    }

    /// The bytes of the uncompressed listpack (what the node-size limit counts).
    fn raw_bytes(&self) -> usize {
        match self {
            Node::Raw(lp) => lp.bytes(),
            Node::Packed { raw, .. } => *raw as usize,
        }
    }

    fn heap(&self) -> usize {
        match self {
            Node::Raw(lp) => lp.heap(),
            Node::Packed { data, .. } => crate::util::mem::alloc_size(data.len()),
        }
    }

    fn unpack(data: &[u8], len: u32, raw: u32) -> Listpack {
        // The node was compressed by `pack` from a valid listpack: this cannot fail unless
        // memory was corrupted.
        lz4_flex::decompress(data, raw as usize)
            .ok()
            .and_then(|buf| Listpack::from_parts(buf, len as usize))
            .expect("a compressed list node decompresses to the listpack it was made from")
    }

    /// The node's listpack, decompressed into a copy when it is compressed.
    fn lp(&self) -> Cow<'_, Listpack> {
        match self {
            Node::Raw(lp) => Cow::Borrowed(lp),
            Node::Packed { data, len, raw } => Cow::Owned(Node::unpack(data, *len, *raw)),
        }
    }

    /// The node's listpack for a change, decompressed in place first.
    fn lp_mut(&mut self) -> &mut Listpack {
        if let Node::Packed { data, len, raw } = self {
            *self = Node::Raw(Node::unpack(data, *len, *raw));
        }
        match self {
            Node::Raw(lp) => lp,
            Node::Packed { .. } => unreachable!("decompressed above"),
        }
    }

    fn pack(&mut self) {
        let Node::Raw(lp) = self else {
            return;
        };
        let (buf, len) = lp.as_parts();
        if buf.len() < MIN_COMPRESS_BYTES {
            return;
        }
        let data = lz4_flex::compress(buf);
        if data.len() + MIN_COMPRESS_IMPROVE > buf.len() {
            return;
        }
        *self = Node::Packed {
            raw: buf.len() as u32,
            len: len as u32,
            data: data.into_boxed_slice(),
        };
    }

    /// Entries, borrowed from a plain node, copied out of a compressed one.
    fn entries(&self) -> Box<dyn DoubleEndedIterator<Item = Cow<'_, [u8]>> + '_> {
        match self {
            Node::Raw(lp) => Box::new(lp.iter().map(Cow::Borrowed)),
            Node::Packed { data, len, raw } => {
                let lp = Node::unpack(data, *len, *raw);
                let all: Vec<Vec<u8>> = lp.iter().map(<[u8]>::to_vec).collect();
                Box::new(all.into_iter().map(Cow::Owned))
            }
        }
    }
}

/// The node deque: a list of more than one node, or of one node too large to hold in place
/// (see [`ListValue`]).
#[derive(Clone, Debug, Default)]
struct Quick {
    nodes: VecDeque<Node>,
    len: usize,
    /// The sum of the nodes' heap bytes, kept as they change, so the key space's memory
    /// accounting (which asks after every write) costs O(1), not O(nodes).
    node_heap: usize,
    /// The `list-compress-depth` the nodes are laid out for.
    depth: usize,
}

/// Where the end of a list is (LPUSH/RPUSH, LMOVE's LEFT/RIGHT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// Is a node of `len` elements and `bytes` encoded bytes over `list-max-listpack-size`?
fn over_limit(len: usize, bytes: usize) -> bool {
    let limit = LIMITS.list_size.load(Ordering::Relaxed);
    if limit > 0 {
        // A count limit; Redis still caps a node's bytes (SIZE_SAFETY_LIMIT, 8 KiB) for
        // large elements.
        len > limit as usize || bytes > 8192
    } else {
        bytes > 4096usize << (limit.clamp(-5, -1).unsigned_abs() - 1)
    }
}

/// Does `node` have room for one more element of `n` bytes?
fn fits(node: &Node, n: usize) -> bool {
    node.len() == 0 || !over_limit(node.len() + 1, node.raw_bytes() + entry_size(n))
}

/// Removes up to `budget` entries equal to `v` from `lp`, the first ones from the head when
/// `from_left`, else the last ones; how many were removed.
fn remove_in(lp: &mut Listpack, v: &[u8], budget: usize, from_left: bool) -> usize {
    let hits: Vec<usize> = {
        let all = lp
            .iter()
            .enumerate()
            .filter(|(_, e)| *e == v)
            .map(|(i, _)| i);
        if from_left {
            all.take(budget).collect()
        } else {
            let mut h: Vec<usize> = all.collect();
            let keep_from = h.len().saturating_sub(budget);
            h.drain(..keep_from);
            h
        }
    };
    if hits.is_empty() {
        return 0;
    }
    let mut idx = 0usize;
    let mut k = 0usize;
    lp.retain(|_| {
        let drop = k < hits.len() && hits[k] == idx;
        if drop {
            k += 1;
        }
        idx += 1;
        !drop
    });
    hits.len()
}

impl Quick {
    /// A list of the one node `lp`, laid out for the `list-compress-depth` in force.
    fn of_node(lp: Listpack) -> Quick {
        let mut q = Quick::default();
        if !lp.is_empty() {
            q.len = lp.len();
            q.node_heap = lp.heap();
            q.nodes.reserve_exact(1);
            q.nodes.push_back(Node::Raw(lp));
            q.settle(None);
        }
        q
    }

    /// The list as one listpack, taken out, when it has at most `most` elements in plain
    /// nodes whose entries fit one node (a trim can leave the ends of two).
    fn take_small(&mut self, most: usize) -> Option<Listpack> {
        if self.len > most
            || self.nodes.len() > 2
            || self.nodes.iter().any(|n| matches!(n, Node::Packed { .. }))
            || (self.nodes.len() == 2 && over_limit(self.len, self.node_bytes()))
        {
            return None;
        }
        let mut nodes = std::mem::take(&mut self.nodes).into_iter();
        let mut lp = match nodes.next() {
            Some(Node::Raw(lp)) => lp,
            _ => Listpack::new(),
        };
        if let Some(Node::Raw(more)) = nodes.next() {
            lp.append(&more);
        }
        Some(lp)
    }

    /// Encoded bytes of the nodes, as uncompressed listpacks.
    fn node_bytes(&self) -> usize {
        self.nodes.iter().map(Node::raw_bytes).sum()
    }

    /// Heap bytes owned (nodes and the deque), in O(1).
    fn heap(&self) -> usize {
        self.node_heap
            + crate::util::mem::alloc_size(self.nodes.capacity() * std::mem::size_of::<Node>())
    }

    /// Changes node `i`, keeping `node_heap` in step.
    fn edit<R>(&mut self, i: usize, f: impl FnOnce(&mut Node) -> R) -> R {
        let node = &mut self.nodes[i];
        let before = node.heap();
        let r = f(node);
        self.node_heap = self.node_heap + node.heap() - before;
        r
    }

    /// Removes node `i` (emptied) from the deque and the count.
    fn drop_node(&mut self, i: usize) {
        if let Some(n) = self.nodes.remove(i) {
            self.node_heap -= n.heap();
        }
    }

    /// Counts `node_heap` again (after changes to many nodes).
    fn recount(&mut self) {
        self.node_heap = self.nodes.iter().map(Node::heap).sum();
    }

    /// Keeps `list-compress-depth` nodes plain at each end and the others compressed. After a
    /// change at the ends or at node `touched`, only the nodes around the two boundaries and
    /// `touched` can be out of place; a changed setting relays the whole list.
    fn settle(&mut self, touched: Option<usize>) {
        let depth = limit(&LIMITS.list_compress_depth);
        if depth == 0 && self.depth == 0 {
            return;
        }
        let n = self.nodes.len();
        if depth != self.depth {
            self.depth = depth;
            for i in 0..n {
                self.place(i);
            }
            return;
        }
        let candidates = [
            touched,
            depth.checked_sub(1),
            Some(depth),
            n.checked_sub(depth + 1),
            n.checked_sub(depth),
        ];
        for i in candidates.into_iter().flatten() {
            if i < n {
                self.place(i);
            }
        }
    }

    /// Puts node `i` in the form its position asks for.
    fn place(&mut self, i: usize) {
        let n = self.nodes.len();
        let plain = self.depth == 0 || i < self.depth || i + self.depth >= n;
        self.edit(i, |node| {
            if plain {
                node.lp_mut();
            } else {
                node.pack();
            }
        });
    }

    fn settle_all(&mut self) {
        if self.depth > 0 || limit(&LIMITS.list_compress_depth) > 0 {
            self.depth = usize::MAX;
            self.settle(None);
        }
    }

    pub fn push(&mut self, end: End, v: &[u8]) {
        let last = self.nodes.len().wrapping_sub(1);
        let (at, room) = match end {
            End::Left => (0, self.nodes.front().is_some_and(|n| fits(n, v.len()))),
            End::Right => (last, self.nodes.back().is_some_and(|n| fits(n, v.len()))),
        };
        if room {
            self.edit(at, |n| match end {
                End::Left => n.lp_mut().push_front(v),
                End::Right => n.lp_mut().push_back(v),
            });
        } else {
            let mut n = Node::new();
            n.lp_mut().push_back(v);
            self.node_heap += n.heap();
            // Most lists are one node: room for exactly one (a 32-byte block) rather than the
            // four a first push would reserve (96 bytes); a second node grows it as usual.
            if self.nodes.capacity() == 0 {
                self.nodes.reserve_exact(1);
            }
            match end {
                End::Left => self.nodes.push_front(n),
                End::Right => self.nodes.push_back(n),
            }
        }
        self.len += 1;
        self.settle(None);
    }

    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        if self.nodes.is_empty() {
            return None;
        }
        let at = match end {
            End::Left => 0,
            End::Right => self.nodes.len() - 1,
        };
        let v = self.edit(at, |n| match end {
            End::Left => n.lp_mut().pop_front(),
            End::Right => n.lp_mut().pop_back(),
        })?;
        if self.nodes[at].len() == 0 {
            self.drop_node(at);
        }
        self.len -= 1;
        self.settle(None);
        Some(v)
    }

    /// The node holding element `i` and the index inside it.
    fn locate(&self, i: usize) -> Option<(usize, usize)> {
        if i >= self.len {
            return None;
        }
        if i < self.len / 2 {
            let mut at = i;
            for (n, node) in self.nodes.iter().enumerate() {
                if at < node.len() {
                    return Some((n, at));
                }
                at -= node.len();
            }
        } else {
            let mut from_end = self.len - 1 - i;
            for (n, node) in self.nodes.iter().enumerate().rev() {
                if from_end < node.len() {
                    return Some((n, node.len() - 1 - from_end));
                }
                from_end -= node.len();
            }
        }
        None
    }

    pub fn get(&self, i: usize) -> Option<Cow<'_, [u8]>> {
        let (n, at) = self.locate(i)?;
        match &self.nodes[n] {
            Node::Raw(lp) => lp.get(at).map(Cow::Borrowed),
            packed => packed.lp().get(at).map(|v| Cow::Owned(v.to_vec())),
        }
    }

    /// Replaces element `i`; false when out of range.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        let Some((n, at)) = self.locate(i) else {
            return false;
        };
        self.edit(n, |node| node.lp_mut().replace(at, v));
        self.split_if_large(n);
        true
    }

    /// Inserts `v` before element `i` (`i == len` appends).
    pub fn insert(&mut self, i: usize, v: &[u8]) {
        if i >= self.len {
            return self.push(End::Right, v);
        }
        if i == 0 {
            return self.push(End::Left, v);
        }
        let Some((n, at)) = self.locate(i) else {
            return;
        };
        self.edit(n, |node| node.lp_mut().insert(at, v));
        self.len += 1;
        self.split_if_large(n);
    }

    /// A node grown past its bound by an insert or replace is cut in two; the node is then
    /// put back in the form its position asks for.
    fn split_if_large(&mut self, n: usize) {
        let node = &self.nodes[n];
        if node.len() >= 2 && over_limit(node.len(), node.raw_bytes()) {
            let half = node.len() / 2;
            let tail = self.nodes[n].lp_mut().split_off(half);
            self.nodes.insert(n + 1, Node::Raw(tail));
            self.settle_all();
            self.recount();
        } else {
            self.settle(Some(n));
        }
    }

    /// Removes element `i`.
    pub fn remove(&mut self, i: usize) -> Option<Vec<u8>> {
        let (n, at) = self.locate(i)?;
        let v = self.edit(n, |node| node.lp_mut().remove(at));
        if self.nodes[n].len() == 0 {
            self.drop_node(n);
            self.len -= 1;
            self.settle_all();
        } else {
            self.len -= 1;
            self.settle(Some(n));
        }
        v
    }

    /// Keeps elements `start..=stop` (already clamped by the caller), drops the rest.
    pub fn trim(&mut self, start: usize, stop: usize) {
        if start > stop || start >= self.len {
            self.nodes.clear();
            self.len = 0;
            self.node_heap = 0;
            return;
        }
        let stop = stop.min(self.len - 1);
        // Drop from the right first, so `start` keeps its meaning.
        let mut right = self.len - 1 - stop;
        while right > 0 {
            let Some(last) = self.nodes.back_mut() else {
                break;
            };
            if last.len() <= right {
                right -= last.len();
                self.len -= last.len();
                self.nodes.pop_back();
            } else {
                let l = last.len();
                last.lp_mut().remove_range(l - right, l);
                self.len -= right;
                right = 0;
            }
        }
        let mut left = start;
        while left > 0 {
            let Some(first) = self.nodes.front_mut() else {
                break;
            };
            if first.len() <= left {
                left -= first.len();
                self.len -= first.len();
                self.nodes.pop_front();
            } else {
                first.lp_mut().remove_range(0, left);
                self.len -= left;
                left = 0;
            }
        }
        self.settle_all();
        self.recount();
    }

    /// Removes up to `count` elements equal to `v` (0: all), from the head when `from_left`.
    pub fn remove_matching(&mut self, v: &[u8], count: usize, from_left: bool) -> usize {
        let mut removed = 0;
        let order: Vec<usize> = if from_left {
            (0..self.nodes.len()).collect()
        } else {
            (0..self.nodes.len()).rev().collect()
        };
        for n in order {
            if count != 0 && removed >= count {
                break;
            }
            if !self.nodes[n].entries().any(|e| *e == *v) {
                continue;
            }
            let budget = if count == 0 {
                usize::MAX
            } else {
                count - removed
            };
            removed += remove_in(self.nodes[n].lp_mut(), v, budget, from_left);
        }
        self.nodes.retain(|n| n.len() > 0);
        self.len -= removed;
        if removed > 0 {
            self.settle_all();
        }
        self.recount();
        removed
    }

    /// Elements from the head (borrowed from plain nodes, copied out of compressed ones).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Cow<'_, [u8]>> + '_ {
        self.nodes.iter().flat_map(Node::entries)
    }

    /// Elements `start..=stop` (clamped by the caller to the list).
    pub fn range(&self, start: usize, stop: usize) -> impl Iterator<Item = Cow<'_, [u8]>> + '_ {
        let (first, mut skip) = self.locate(start).unwrap_or((self.nodes.len(), 0));
        let take = if start <= stop && start < self.len {
            stop.min(self.len - 1) - start + 1
        } else {
            0
        };
        self.nodes
            .iter()
            .skip(first)
            .flat_map(move |n| {
                let s = std::mem::take(&mut skip);
                n.entries().skip(s)
            })
            .take(take)
    }

    /// Nodes stored compressed (for tests and `DEBUG`-like introspection).
    pub fn compressed_nodes(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n, Node::Packed { .. }))
            .count()
    }
}

/// A list value. A list that is one node of at most [`THIN_MAX_COUNT`] elements (a job
/// queue, a capped recent-items list, most lists) is that node's listpack held in place in
/// the key's entry, as a small hash is (`util::packed::Thin`): one allocation per list, where
/// the node deque costs two more (its box and the deque's buffer, 80 bytes). Past that, or
/// once a second node is needed, the list is the boxed deque; it comes back in place when it
/// is one plain node of at most half that count again (the gap keeps a list that shrinks and
/// grows around the bound from switching on every change).
pub struct ListValue {
    repr: Thin<Quick>,
}

/// The list borrowed in either form.
enum Form<'a> {
    Small(ListpackRef<'a>),
    Big(&'a Quick),
}

/// One of two iterators (a list's two forms).
enum Either<A, B> {
    A(A),
    B(B),
}

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for Either<A, B> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        match self {
            Either::A(a) => a.next(),
            Either::B(b) => b.next(),
        }
    }
}

impl<T, A: DoubleEndedIterator<Item = T>, B: DoubleEndedIterator<Item = T>> DoubleEndedIterator
    for Either<A, B>
{
    fn next_back(&mut self) -> Option<T> {
        match self {
            Either::A(a) => a.next_back(),
            Either::B(b) => b.next_back(),
        }
    }
}

impl Default for ListValue {
    fn default() -> ListValue {
        ListValue {
            repr: Thin::empty(),
        }
    }
}

impl Clone for ListValue {
    fn clone(&self) -> ListValue {
        ListValue {
            repr: self.repr.clone(),
        }
    }
}

impl std::fmt::Debug for ListValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|e| String::from_utf8_lossy(&e).into_owned()),
            )
            .finish()
    }
}

/// Can a one-node list of `len` elements and `bytes` encoded bytes take one more of `n`
/// bytes and stay one node (as [`fits`] for a node)?
fn small_fits(len: usize, bytes: usize, n: usize) -> bool {
    len == 0 || (len < THIN_MAX_COUNT && !over_limit(len + 1, bytes + entry_size(n)))
}

impl ListValue {
    fn form(&self) -> Form<'_> {
        match self.repr.get() {
            ThinRef::Bytes(buf, n) => Form::Small(ListpackRef::new(buf, n)),
            ThinRef::Boxed(q) => Form::Big(q),
        }
    }

    /// Holds `lp` in place, or boxed as a one-node deque when it does not fit.
    fn put_small(&mut self, lp: Listpack) {
        let (buf, n) = lp.into_raw();
        self.repr = match Thin::bytes(buf, n) {
            Ok(t) => t,
            Err(buf) => Thin::boxed(Box::new(Quick::of_node(Listpack::from_raw(buf, n)))),
        };
    }

    /// The node deque, made from the in-place listpack first when the list is held in place.
    fn quick(&mut self) -> &mut Quick {
        if let Some((buf, n)) = self.repr.take_bytes() {
            self.repr = Thin::boxed(Box::new(Quick::of_node(Listpack::from_raw(buf, n))));
        }
        match self.repr.get_mut() {
            Some(q) => q,
            None => unreachable!("boxed above"),
        }
    }

    /// Back in place once the deque is one plain node of at most half the in-place count.
    fn settle_form(&mut self) {
        if let Some(lp) = self
            .repr
            .get_mut()
            .and_then(|q| q.take_small(THIN_MAX_COUNT / 2))
        {
            self.put_small(lp);
        }
    }

    /// A change made on the node deque (the in-place form made into one first).
    fn change<R>(&mut self, f: impl FnOnce(&mut Quick) -> R) -> R {
        let r = f(self.quick());
        self.settle_form();
        r
    }

    /// A change made on the in-place listpack, `None` (nothing changed) when the list is
    /// boxed. The listpack goes back in place, or boxed when it no longer fits there.
    fn change_small<R>(&mut self, f: impl FnOnce(&mut Listpack) -> R) -> Option<R> {
        let (buf, n) = self.repr.take_bytes()?;
        let mut lp = Listpack::from_raw(buf, n);
        let r = f(&mut lp);
        if lp.len() > 1 && over_limit(lp.len(), lp.bytes()) {
            // Grown past a node's bound (a replace or insert of a large element): cut in two.
            let mut q = Quick::of_node(lp);
            q.split_if_large(0);
            self.repr = Thin::boxed(Box::new(q));
        } else {
            self.put_small(lp);
        }
        Some(r)
    }

    pub fn len(&self) -> usize {
        match self.form() {
            Form::Small(lp) => lp.len(),
            Form::Big(q) => q.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Nodes of the list (what freeing it walks).
    pub fn node_count(&self) -> usize {
        match self.form() {
            Form::Small(lp) => usize::from(!lp.is_empty()),
            Form::Big(q) => q.nodes.len(),
        }
    }

    /// `quicklist`, what Redis 7.0 reports for every list (7.2 says `listpack` for a list of
    /// one small node; the reference here is 7.0).
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    /// Heap bytes owned, in O(1).
    pub fn heap(&self) -> usize {
        match self.form() {
            Form::Small(lp) => lp.heap(),
            Form::Big(q) => crate::util::mem::alloc_size(std::mem::size_of::<Quick>()) + q.heap(),
        }
    }

    /// Does the in-place listpack have room for one more element of `n` bytes?
    fn small_room(&self, n: usize) -> bool {
        matches!(self.repr.get(), ThinRef::Bytes(buf, len) if small_fits(len, buf.len(), n))
    }

    pub fn push(&mut self, end: End, v: &[u8]) {
        if self.small_room(v.len()) {
            self.change_small(|lp| match end {
                End::Left => lp.push_front(v),
                End::Right => lp.push_back(v),
            });
        } else {
            self.quick().push(end, v);
        }
    }

    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        if let Some(v) = self.change_small(|lp| match end {
            End::Left => lp.pop_front(),
            End::Right => lp.pop_back(),
        }) {
            return v;
        }
        self.change(|q| q.pop(end))
    }

    pub fn get(&self, i: usize) -> Option<Cow<'_, [u8]>> {
        match self.form() {
            Form::Small(lp) if i < lp.len() / 2 => lp.iter().nth(i).map(Cow::Borrowed),
            Form::Small(lp) => lp
                .iter()
                .nth_back(lp.len().checked_sub(i + 1)?)
                .map(Cow::Borrowed),
            Form::Big(q) => q.get(i),
        }
    }

    /// Replaces element `i`; false when out of range.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        if i >= self.len() {
            return false;
        }
        if let Some(()) = self.change_small(|lp| lp.replace(i, v)) {
            return true;
        }
        self.change(|q| q.set(i, v))
    }

    /// Inserts `v` before element `i` (`i == len` appends).
    pub fn insert(&mut self, i: usize, v: &[u8]) {
        if i >= self.len() {
            return self.push(End::Right, v);
        }
        if i == 0 {
            return self.push(End::Left, v);
        }
        if self.small_room(v.len()) {
            self.change_small(|lp| lp.insert(i, v));
        } else {
            self.change(|q| q.insert(i, v))
        }
    }

    /// Removes element `i`.
    pub fn remove(&mut self, i: usize) -> Option<Vec<u8>> {
        if let Some(v) = self.change_small(|lp| lp.remove(i)) {
            return v;
        }
        self.change(|q| q.remove(i))
    }

    /// Keeps elements `start..=stop` (already clamped by the caller), drops the rest.
    pub fn trim(&mut self, start: usize, stop: usize) {
        let small = self.change_small(|lp| {
            let n = lp.len();
            if start > stop || start >= n {
                *lp = Listpack::new();
            } else {
                lp.remove_range(stop.min(n - 1) + 1, n);
                lp.remove_range(0, start);
            }
        });
        if small.is_none() {
            self.change(|q| q.trim(start, stop))
        }
    }

    /// Removes up to `count` elements equal to `v` (0: all), from the head when `from_left`.
    pub fn remove_matching(&mut self, v: &[u8], count: usize, from_left: bool) -> usize {
        let budget = if count == 0 { usize::MAX } else { count };
        if let Some(n) = self.change_small(|lp| remove_in(lp, v, budget, from_left)) {
            return n;
        }
        self.change(|q| q.remove_matching(v, count, from_left))
    }

    /// Elements from the head (borrowed from plain nodes, copied out of compressed ones).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Cow<'_, [u8]>> + '_ {
        match self.form() {
            Form::Small(lp) => Either::A(lp.iter().map(Cow::Borrowed)),
            Form::Big(q) => Either::B(q.iter()),
        }
    }

    /// Elements `start..=stop` (clamped by the caller to the list).
    pub fn range(&self, start: usize, stop: usize) -> impl Iterator<Item = Cow<'_, [u8]>> + '_ {
        match self.form() {
            Form::Small(lp) => {
                let take = (stop.saturating_add(1)).saturating_sub(start);
                Either::A(lp.iter().skip(start).take(take).map(Cow::Borrowed))
            }
            Form::Big(q) => Either::B(q.range(start, stop)),
        }
    }

    /// Nodes stored compressed (for tests and `DEBUG`-like introspection).
    pub fn compressed_nodes(&self) -> usize {
        match self.form() {
            Form::Small(_) => 0,
            Form::Big(q) => q.compressed_nodes(),
        }
    }

    /// Is the list held in place (for tests)?
    pub fn in_place(&self) -> bool {
        matches!(self.form(), Form::Small(_))
    }
}

#[cfg(test)]
mod tests {
    use super::{End, ListValue, Node};
    use crate::util::packed::{ThinRef, THIN_MAX_COUNT};

    /// The same random operations with and without compressed inner nodes (the settings are
    /// process-wide, so both layouts are exercised in one test).
    #[test]
    fn matches_a_deque_model() {
        use crate::store::encoding::LIMITS;
        use std::sync::atomic::Ordering;
        model_run(None);
        // Lists that stay around the in-place bound: both forms and the moves between them.
        model_run(Some(2 * THIN_MAX_COUNT));
        LIMITS.list_size.store(4, Ordering::Relaxed);
        LIMITS.list_compress_depth.store(1, Ordering::Relaxed);
        let packed = model_run(None);
        LIMITS.list_compress_depth.store(0, Ordering::Relaxed);
        LIMITS.list_size.store(-2, Ordering::Relaxed);
        assert!(packed > 0, "inner nodes were compressed");
    }

    fn model_run(cap: Option<usize>) -> usize {
        let mut forms = [0usize; 2];
        let mut most_packed = 0;
        let mut l = ListValue::default();
        let mut m: std::collections::VecDeque<Vec<u8>> = Default::default();
        let mut seed = 99u64;
        for round in 0..20000usize {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let v = format!("v{}-{}", round % 50, "x".repeat((seed % 40) as usize)).into_bytes();
            match seed % 11 {
                0..=2 => {
                    l.push(End::Right, &v);
                    m.push_back(v);
                }
                3..=4 => {
                    l.push(End::Left, &v);
                    m.push_front(v);
                }
                5 => assert_eq!(l.pop(End::Left), m.pop_front()),
                6 => assert_eq!(l.pop(End::Right), m.pop_back()),
                7 if !m.is_empty() => {
                    let i = (seed as usize / 11) % m.len();
                    assert!(l.set(i, &v));
                    m[i] = v;
                }
                8 => {
                    let i = (seed as usize / 11) % (m.len() + 1);
                    l.insert(i, &v);
                    m.insert(i, v);
                }
                9 if !m.is_empty() => {
                    let i = (seed as usize / 11) % m.len();
                    assert_eq!(l.remove(i), m.remove(i));
                }
                10 if round % 50 == 0 => {
                    let target = m.front().cloned().unwrap_or_default();
                    let n = l.remove_matching(&target, 2, round % 100 == 0);
                    let mut removed = 0;
                    if round % 100 == 0 {
                        let mut i = 0;
                        while i < m.len() && removed < 2 {
                            if m[i] == target {
                                m.remove(i);
                                removed += 1;
                            } else {
                                i += 1;
                            }
                        }
                    } else {
                        let mut i = m.len();
                        while i > 0 && removed < 2 {
                            i -= 1;
                            if m[i] == target {
                                m.remove(i);
                                removed += 1;
                            }
                        }
                    }
                    assert_eq!(n, removed);
                }
                _ => {}
            }
            if let Some(cap) = cap {
                if m.len() > cap {
                    // LPUSH + LTRIM, as a capped list: back in place past the half.
                    let keep = cap / 4 - round % 7;
                    l.trim(0, keep - 1);
                    m.truncate(keep);
                    assert!(l.in_place());
                }
                forms[usize::from(l.in_place())] += 1;
            }
            assert_eq!(l.len(), m.len());
            if let ThinRef::Boxed(q) = l.repr.get() {
                assert_eq!(q.node_heap, q.nodes.iter().map(Node::heap).sum::<usize>());
            }
            most_packed = most_packed.max(l.compressed_nodes());
            if round % 501 == 0 && !m.is_empty() {
                let got: Vec<Vec<u8>> = l.iter().map(|v| v.into_owned()).collect();
                let want: Vec<Vec<u8>> = m.iter().cloned().collect();
                assert_eq!(got, want);
                let rev: Vec<Vec<u8>> = l.iter().rev().map(|v| v.into_owned()).collect();
                assert_eq!(rev, want.iter().rev().cloned().collect::<Vec<_>>());
                let (a, b) = (m.len() / 3, m.len() * 2 / 3);
                let got: Vec<Vec<u8>> = l.range(a, b).map(|v| v.into_owned()).collect();
                assert_eq!(got, want[a..=b].to_vec());
                for i in [0, a, b, m.len() - 1] {
                    assert_eq!(l.get(i).as_deref(), Some(m[i].as_slice()));
                }
            }
        }
        let n = l.len();
        l.trim(3, n.saturating_sub(4));
        let want: Vec<Vec<u8>> = m
            .iter()
            .skip(3)
            .take(n.saturating_sub(6))
            .cloned()
            .collect();
        assert_eq!(l.iter().map(|v| v.to_vec()).collect::<Vec<_>>(), want);
        if cap.is_some() {
            assert!(forms[0] > 1000 && forms[1] > 1000, "both forms: {forms:?}");
        }
        most_packed
    }
}
