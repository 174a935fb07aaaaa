//! A packed sequence of byte strings in one buffer, as Redis's listpack: the compact form of
//! small hashes, sets, sorted sets and of each node of a list.
//!
//! Each entry is `[length varint][bytes][back-length]`, where the back-length is the size of
//! the first two parts written as a varint read backwards, so the sequence can be walked from
//! either end (a list pops from both). An entry of up to 127 bytes costs two bytes of
//! overhead, against 16 to 48 for a separately allocated string; the whole sequence is one
//! allocation. Operations in the middle move the tail (`Vec::splice`), which is why callers
//! keep listpacks small (Redis's `*-max-listpack-*` limits) and convert past them.
//!
//! The buffer is held exactly sized ([`PackedBytes`]: a pointer and a 32-bit length), so a
//! `Listpack` is 16 bytes and the boxed value of a small set or sorted set that holds it
//! takes a 16-byte block instead of 32 (a small hash holds the buffer's parts in the key
//! space's value itself: see [`Listpack::into_raw`] and `util::packed::Thin`). A change
//! reallocates the buffer to its new size, as Redis reallocates a listpack on every change.
//! mimalloc's `realloc` stays in place while the size remains within the block's class (and
//! above half of it), so a run of pushes copies only when it crosses a class.

use crate::util::packed::PackedBytes;

/// A sequence of byte strings in one buffer.
#[derive(Clone, Default)]
pub struct Listpack {
    buf: PackedBytes,
    len: u32,
}

const _: () = assert!(std::mem::size_of::<Listpack>() == 16);

impl PartialEq for Listpack {
    fn eq(&self, other: &Listpack) -> bool {
        self.len == other.len && *self.buf == *other.buf
    }
}

impl Eq for Listpack {}

impl std::fmt::Debug for Listpack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

fn varint_len(mut n: usize) -> usize {
    let mut l = 1;
    while n >= 0x80 {
        n >>= 7;
        l += 1;
    }
    l
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a forward varint at `at`: (value, bytes read).
fn get_varint(buf: &[u8], at: usize) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    let mut i = at;
    loop {
        let b = buf[i];
        n |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b & 0x80 == 0 {
            return (n, i - at);
        }
        shift += 7;
    }
}

/// A forward varint at `at` that may run off the end: (value, bytes read).
fn try_varint(buf: &[u8], at: usize) -> Option<(usize, usize)> {
    let mut n = 0usize;
    let mut shift = 0;
    let mut i = at;
    loop {
        let b = *buf.get(i)?;
        if shift > 56 {
            return None;
        }
        n |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b & 0x80 == 0 {
            return Some((n, i - at));
        }
        shift += 7;
    }
}

/// Writes `n` so that it reads backwards from its last byte.
fn put_backlen(out: &mut Vec<u8>, n: usize) {
    let start = out.len();
    put_varint(out, n);
    out[start..].reverse();
}

/// Reads a backward varint ending just before `end`: (value, bytes read).
fn get_backlen(buf: &[u8], end: usize) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    let mut i = end;
    loop {
        i -= 1;
        let b = buf[i];
        n |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            return (n, end - i);
        }
        shift += 7;
    }
}

/// The bytes one entry of `data` takes.
pub fn entry_size(data_len: usize) -> usize {
    let head = varint_len(data_len) + data_len;
    head + varint_len(head)
}

/// A varint of up to 10 bytes held in place.
struct Small {
    buf: [u8; 10],
    len: usize,
}

impl Small {
    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The length varint and the back-length of an entry of `n` bytes.
fn frame(n: usize) -> (Small, Small) {
    if n < 127 {
        // The usual short element: one byte each (the back-length `n + 1` is below 128).
        let one = |b: usize| Small {
            buf: [b as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            len: 1,
        };
        return (one(n), one(n + 1));
    }
    let varint = |mut x: usize, backward: bool| {
        let mut out = Small {
            buf: [0; 10],
            len: 0,
        };
        loop {
            let b = (x as u8 & 0x7f) | if x >= 0x80 { 0x80 } else { 0 };
            out.buf[out.len] = b;
            out.len += 1;
            x >>= 7;
            if x == 0 {
                break;
            }
        }
        if backward {
            out.buf[..out.len].reverse();
        }
        out
    };
    let head = varint(n, false);
    let back = varint(head.len + n, true);
    (head, back)
}

impl Listpack {
    pub fn new() -> Listpack {
        Listpack::default()
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// The encoded buffer and the entry count (to store it compressed).
    pub fn as_parts(&self) -> (&[u8], usize) {
        (&self.buf, self.len())
    }

    /// Rebuilds a listpack from [`as_parts`](Self::as_parts); `None` when the buffer does not
    /// walk to exactly `len` entries.
    pub fn from_parts(buf: Vec<u8>, len: usize) -> Option<Listpack> {
        let lp = Listpack {
            buf: PackedBytes::from(buf),
            len: u32::try_from(len).ok()?,
        };
        let mut at = 0;
        let mut n = 0;
        while at < lp.buf.len() {
            let (size, l) = try_varint(&lp.buf, at)?;
            let total = entry_size(size);
            if l > 9 || at.checked_add(total)? > lp.buf.len() {
                return None;
            }
            at += total;
            n += 1;
        }
        (n == len).then_some(lp)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the encoded entries.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Heap bytes held (the buffer's size class, as the allocator sees it).
    pub fn heap(&self) -> usize {
        crate::util::mem::alloc_size(self.buf.len())
    }

    /// Changes the buffer (see the module comment and [`PackedBytes::edit`]).
    fn edit<R>(&mut self, extra: usize, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        self.buf.edit(extra, f)
    }

    /// The entry starting at byte `at`: (data, size of the whole entry).
    fn entry_at(&self, at: usize) -> (&[u8], usize) {
        let (n, l) = get_varint(&self.buf, at);
        let data = &self.buf[at + l..at + l + n];
        (data, entry_size(n))
    }

    /// Byte offset of entry `i` (`len` gives the end), walking from the nearer end.
    fn offset_of(&self, i: usize) -> usize {
        let len = self.len();
        if i >= len {
            return self.buf.len();
        }
        if i <= len / 2 {
            let mut at = 0;
            for _ in 0..i {
                at += self.entry_at(at).1;
            }
            at
        } else {
            let mut end = self.buf.len();
            for _ in 0..(len - i) {
                let (head, l) = get_backlen(&self.buf, end);
                end -= head + l;
            }
            end
        }
    }

    pub fn push_back(&mut self, data: &[u8]) {
        self.push_back_all(&[data]);
    }

    /// Appends several entries with one reallocation of the buffer (a stream entry's
    /// header, fields and values).
    pub fn push_back_all(&mut self, items: &[&[u8]]) {
        let extra = items.iter().map(|d| entry_size(d.len())).sum();
        self.edit(extra, |buf| {
            for data in items {
                let start = buf.len();
                put_varint(buf, data.len());
                buf.extend_from_slice(data);
                let head = buf.len() - start;
                put_backlen(buf, head);
            }
        });
        self.len += items.len() as u32;
    }

    pub fn push_front(&mut self, data: &[u8]) {
        self.insert(0, data);
    }

    /// Inserts before entry `i` (`i == len` appends).
    pub fn insert(&mut self, i: usize, data: &[u8]) {
        if i >= self.len() {
            return self.push_back(data);
        }
        let at = self.offset_of(i);
        let (head, back) = frame(data.len());
        // One move of the tail, no temporary buffer (LPUSH lands here for every element):
        // the buffer grows by the entry, the tail moves up with one `copy_within`, and the
        // entry's three parts are copied into the gap (a `splice` of a chained iterator
        // filled the gap a byte at a time, about 400 instructions per LPUSH).
        let size = head.len + data.len() + back.len;
        self.edit(size, |buf| {
            let old = buf.len();
            buf.resize(old + size, 0);
            buf.copy_within(at..old, at + size);
            let gap = &mut buf[at..at + size];
            gap[..head.len].copy_from_slice(head.bytes());
            gap[head.len..head.len + data.len()].copy_from_slice(data);
            gap[head.len + data.len()..].copy_from_slice(back.bytes());
        });
        self.len += 1;
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len() {
            return None;
        }
        Some(self.entry_at(self.offset_of(i)).0)
    }

    pub fn first(&self) -> Option<&[u8]> {
        self.get(0)
    }

    pub fn last(&self) -> Option<&[u8]> {
        let end = self.buf.len();
        if end == 0 {
            return None;
        }
        let (head, l) = get_backlen(&self.buf, end);
        Some(self.entry_at(end - l - head).0)
    }

    /// Removes entry `i` and returns its bytes.
    pub fn remove(&mut self, i: usize) -> Option<Vec<u8>> {
        if i >= self.len() {
            return None;
        }
        let at = self.offset_of(i);
        let (data, size) = self.entry_at(at);
        let out = data.to_vec();
        self.edit(0, |buf| drop(buf.drain(at..at + size)));
        self.len -= 1;
        Some(out)
    }

    /// Removes entries `from..to`.
    pub fn remove_range(&mut self, from: usize, to: usize) {
        let to = to.min(self.len());
        if from >= to {
            return;
        }
        let a = self.offset_of(from);
        let mut b = a;
        for _ in from..to {
            b += self.entry_at(b).1;
        }
        self.edit(0, |buf| drop(buf.drain(a..b)));
        self.len -= (to - from) as u32;
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        self.remove(0)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let end = self.buf.len();
        if end == 0 {
            return None;
        }
        let (head, l) = get_backlen(&self.buf, end);
        let at = end - l - head;
        let out = self.entry_at(at).0.to_vec();
        self.edit(0, |buf| buf.truncate(at));
        self.len -= 1;
        Some(out)
    }

    /// Replaces entry `i`. An entry of the same encoded size is overwritten in place (HSET of
    /// an existing field with a value of the same length: no reallocation, no temporary);
    /// otherwise the tail moves once and the buffer is resized once.
    pub fn replace(&mut self, i: usize, data: &[u8]) {
        if i >= self.len() {
            return;
        }
        let at = self.offset_of(i);
        let (n, l) = get_varint(&self.buf, at);
        if n == data.len() {
            // Same length, same frame: only the bytes change.
            self.buf.as_mut_slice()[at + l..at + l + n].copy_from_slice(data);
            return;
        }
        let size = entry_size(n);
        let (head, back) = frame(data.len());
        let new = head.len + data.len() + back.len;
        let write = |gap: &mut [u8]| {
            gap[..head.len].copy_from_slice(head.bytes());
            gap[head.len..head.len + data.len()].copy_from_slice(data);
            gap[head.len + data.len()..].copy_from_slice(back.bytes());
        };
        if new == size {
            write(&mut self.buf.as_mut_slice()[at..at + new]);
            return;
        }
        self.edit(new.saturating_sub(size), |buf| {
            let old = buf.len();
            if new > size {
                buf.resize(old + new - size, 0);
                buf.copy_within(at + size..old, at + new);
            } else {
                buf.copy_within(at + size..old, at + new);
                buf.truncate(old - (size - new));
            }
            write(&mut buf[at..at + new]);
        });
    }

    /// Keeps the entries for which `keep` is true; returns how many were removed.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) -> usize {
        let mut out = Vec::with_capacity(self.buf.len());
        let mut kept = 0u32;
        let mut at = 0;
        while at < self.buf.len() {
            let (data, size) = self.entry_at(at);
            if keep(data) {
                out.extend_from_slice(&self.buf[at..at + size]);
                kept += 1;
            }
            at += size;
        }
        let removed = self.len - kept;
        self.buf = PackedBytes::from(out);
        self.len = kept;
        removed as usize
    }

    /// Moves entries `at..` into a new listpack (splitting a node).
    pub fn split_off(&mut self, at: usize) -> Listpack {
        let off = self.offset_of(at);
        let tail = PackedBytes::from(self.edit(0, |buf| buf.split_off(off)));
        let moved = self.len() - at.min(self.len());
        self.len -= moved as u32;
        Listpack {
            buf: tail,
            len: moved as u32,
        }
    }

    /// Appends every entry of `other`.
    pub fn append(&mut self, other: &Listpack) {
        self.edit(other.buf.len(), |buf| buf.extend_from_slice(&other.buf));
        self.len += other.len;
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter {
            buf: &self.buf,
            front: 0,
            back: self.buf.len(),
        }
    }

    /// A borrowed view of the entries (what a value that keeps the buffer in place, as a
    /// small hash does in the key space, reads through).
    pub fn view(&self) -> ListpackRef<'_> {
        ListpackRef {
            buf: &self.buf,
            len: self.len(),
        }
    }

    /// The buffer and the entry count, to be held elsewhere and given back to
    /// [`from_raw`](Self::from_raw) unchanged.
    pub fn into_raw(self) -> (PackedBytes, usize) {
        (self.buf, self.len as usize)
    }

    /// A listpack from the parts [`into_raw`](Self::into_raw) gave (not checked: see
    /// [`from_parts`](Self::from_parts) for bytes from outside).
    pub fn from_raw(buf: PackedBytes, len: usize) -> Listpack {
        Listpack {
            buf,
            len: len as u32,
        }
    }

    /// The position of the first entry equal to `data`.
    pub fn position(&self, data: &[u8]) -> Option<usize> {
        self.iter().position(|e| e == data)
    }
}

/// A listpack's buffer and entry count, borrowed: the reads of [`Listpack`] without owning it.
#[derive(Clone, Copy)]
pub struct ListpackRef<'a> {
    buf: &'a [u8],
    len: usize,
}

impl<'a> ListpackRef<'a> {
    /// A view of a buffer from [`Listpack::into_raw`] with its count.
    pub fn new(buf: &'a [u8], len: usize) -> ListpackRef<'a> {
        ListpackRef { buf, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes held (the buffer's size class, as the allocator sees it).
    pub fn heap(&self) -> usize {
        crate::util::mem::alloc_size(self.buf.len())
    }

    pub fn iter(&self) -> Iter<'a> {
        Iter {
            buf: self.buf,
            front: 0,
            back: self.buf.len(),
        }
    }
}

/// Walks a listpack from either end.
pub struct Iter<'a> {
    buf: &'a [u8],
    front: usize,
    back: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.front >= self.back {
            return None;
        }
        let (n, l) = get_varint(self.buf, self.front);
        let data = &self.buf[self.front + l..self.front + l + n];
        self.front += entry_size(n);
        Some(data)
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        let (head, l) = get_backlen(self.buf, self.back);
        let at = self.back - l - head;
        let (n, vl) = get_varint(self.buf, at);
        let data = &self.buf[at + vl..at + vl + n];
        self.back = at;
        Some(data)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn push_back_all_is_push_back_each() {
        let items: Vec<Vec<u8>> = (0..40).map(|i| vec![b'x'; i * 7]).collect();
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        let mut one = Listpack::new();
        one.push_back(b"head");
        one.push_back_all(&refs);
        let mut each = Listpack::new();
        each.push_back(b"head");
        for r in &refs {
            each.push_back(r);
        }
        assert_eq!(one, each);
        assert_eq!(one.len(), 41);
        assert_eq!(one.last(), Some(&items[39][..]));
    }

    use super::Listpack;

    fn items(lp: &Listpack) -> Vec<Vec<u8>> {
        lp.iter().map(|e| e.to_vec()).collect()
    }

    #[test]
    fn both_ends_and_the_middle() {
        let mut lp = Listpack::new();
        let mut model: std::collections::VecDeque<Vec<u8>> = Default::default();
        let mut seed = 7u64;
        for round in 0..3000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let n = (seed % 300) as usize;
            let v: Vec<u8> = (0..n).map(|i| (i + round) as u8).collect();
            match seed % 9 {
                0 | 1 => {
                    lp.push_back(&v);
                    model.push_back(v);
                }
                2 | 3 => {
                    lp.push_front(&v);
                    model.push_front(v);
                }
                4 => assert_eq!(lp.pop_front(), model.pop_front()),
                5 => assert_eq!(lp.pop_back(), model.pop_back()),
                6 if !model.is_empty() => {
                    let i = (seed as usize / 9) % model.len();
                    lp.replace(i, &v);
                    model[i] = v;
                }
                7 => {
                    let i = (seed as usize / 9) % (model.len() + 1);
                    lp.insert(i, &v);
                    model.insert(i, v);
                }
                8 if !model.is_empty() => {
                    let i = (seed as usize / 9) % model.len();
                    assert_eq!(lp.remove(i), model.remove(i));
                }
                _ => {}
            }
            assert_eq!(lp.len(), model.len());
            if round % 97 == 0 {
                assert_eq!(items(&lp), Vec::from(model.clone()));
                let rev: Vec<Vec<u8>> = lp.iter().rev().map(|e| e.to_vec()).collect();
                let mut m: Vec<Vec<u8>> = model.iter().cloned().collect();
                m.reverse();
                assert_eq!(rev, m);
                for (i, m) in model.iter().enumerate() {
                    assert_eq!(lp.get(i), Some(m.as_slice()));
                }
                assert_eq!(lp.last(), model.back().map(|v| v.as_slice()));
            }
        }
    }

    #[test]
    fn split_retain_and_ranges() {
        let mut lp = Listpack::new();
        for i in 0..20u8 {
            lp.push_back(&[i]);
        }
        let tail = lp.split_off(15);
        assert_eq!(lp.len(), 15);
        assert_eq!(tail.len(), 5);
        assert_eq!(tail.first(), Some(&[15u8][..]));
        lp.remove_range(2, 5);
        assert_eq!(lp.len(), 12);
        assert_eq!(lp.get(2), Some(&[5u8][..]));
        assert_eq!(lp.retain(|e| e[0] % 2 == 0), 6);
        lp.append(&tail);
        assert_eq!(
            items(&lp),
            [0u8, 6, 8, 10, 12, 14, 15, 16, 17, 18, 19]
                .iter()
                .map(|b| vec![*b])
                .collect::<Vec<_>>()
        );
    }
}
