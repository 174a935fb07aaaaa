//! A list value: a deque of packed nodes (Redis's quicklist of listpacks).
//!
//! Each node is a [`Listpack`] bounded by `list-max-listpack-size` (a count of elements when
//! positive, 4 to 64 KiB of encoded bytes when -1 to -5), so an element of up to 127 bytes
//! costs its bytes plus two, and pushes and pops at either end touch one small node. A list
//! reports `quicklist`, as Redis 7.0 does for every list.
//! Access by index walks node lengths from the nearer end: O(nodes) + O(node size).

use crate::store::encoding::LIMITS;
use crate::util::listpack::{entry_size, Listpack};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

#[derive(Clone, Debug, Default)]
pub struct ListValue {
    nodes: VecDeque<Listpack>,
    len: usize,
}

/// Where the end of a list is (LPUSH/RPUSH, LMOVE's LEFT/RIGHT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// Does `node` have room for one more element of `n` bytes?
fn fits(node: &Listpack, n: usize) -> bool {
    let limit = LIMITS.list_size.load(Ordering::Relaxed);
    if limit > 0 {
        // A count limit; Redis still caps a node's bytes (SIZE_SAFETY_LIMIT, 8 KiB) for
        // large elements.
        node.len() < limit as usize && (node.bytes() + entry_size(n) <= 8192 || node.is_empty())
    } else {
        let bytes = 4096usize << (limit.clamp(-5, -1).unsigned_abs() - 1);
        node.is_empty() || node.bytes() + entry_size(n) <= bytes
    }
}

impl ListValue {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `quicklist`, what Redis 7.0 reports for every list (7.2 says `listpack` for a list of
    /// one small node; the reference here is 7.0).
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    /// Heap bytes owned (nodes and the deque).
    pub fn heap(&self) -> usize {
        self.nodes.iter().map(Listpack::heap).sum::<usize>()
            + crate::util::mem::alloc_size(self.nodes.capacity() * std::mem::size_of::<Listpack>())
    }

    pub fn push(&mut self, end: End, v: &[u8]) {
        match end {
            End::Left => match self.nodes.front_mut() {
                Some(n) if fits(n, v.len()) => n.push_front(v),
                _ => {
                    let mut n = Listpack::new();
                    n.push_back(v);
                    self.nodes.push_front(n);
                }
            },
            End::Right => match self.nodes.back_mut() {
                Some(n) if fits(n, v.len()) => n.push_back(v),
                _ => {
                    let mut n = Listpack::new();
                    n.push_back(v);
                    self.nodes.push_back(n);
                }
            },
        }
        self.len += 1;
    }

    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        let v = match end {
            End::Left => {
                let n = self.nodes.front_mut()?;
                let v = n.pop_front();
                if n.is_empty() {
                    self.nodes.pop_front();
                }
                v
            }
            End::Right => {
                let n = self.nodes.back_mut()?;
                let v = n.pop_back();
                if n.is_empty() {
                    self.nodes.pop_back();
                }
                v
            }
        }?;
        self.len -= 1;
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

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let (n, at) = self.locate(i)?;
        self.nodes[n].get(at)
    }

    /// Replaces element `i`; false when out of range.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        let Some((n, at)) = self.locate(i) else {
            return false;
        };
        self.nodes[n].replace(at, v);
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
        self.nodes[n].insert(at, v);
        self.len += 1;
        self.split_if_large(n);
    }

    /// A node grown past its bound by an insert or replace is cut in two.
    fn split_if_large(&mut self, n: usize) {
        let node = &self.nodes[n];
        if node.len() < 2 {
            return;
        }
        let over = {
            let limit = LIMITS.list_size.load(Ordering::Relaxed);
            if limit > 0 {
                node.len() > limit as usize
            } else {
                node.bytes() > 4096usize << (limit.clamp(-5, -1).unsigned_abs() - 1)
            }
        };
        if over {
            let half = node.len() / 2;
            let tail = self.nodes[n].split_off(half);
            self.nodes.insert(n + 1, tail);
        }
    }

    /// Removes element `i`.
    pub fn remove(&mut self, i: usize) -> Option<Vec<u8>> {
        let (n, at) = self.locate(i)?;
        let v = self.nodes[n].remove(at);
        if self.nodes[n].is_empty() {
            self.nodes.remove(n);
        }
        self.len -= 1;
        v
    }

    /// Keeps elements `start..=stop` (already clamped by the caller), drops the rest.
    pub fn trim(&mut self, start: usize, stop: usize) {
        if start > stop || start >= self.len {
            self.nodes.clear();
            self.len = 0;
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
                last.remove_range(l - right, l);
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
                first.remove_range(0, left);
                self.len -= left;
                left = 0;
            }
        }
        for n in self.nodes.iter_mut() {
            n.shrink();
        }
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
            let node = &mut self.nodes[n];
            if !node.iter().any(|e| e == v) {
                continue;
            }
            let budget = if count == 0 {
                usize::MAX
            } else {
                count - removed
            };
            // Which positions to drop inside this node, honouring the direction.
            let hits: Vec<usize> = {
                let all = node
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
            let mut idx = 0usize;
            let mut k = 0usize;
            node.retain(|_| {
                let drop = k < hits.len() && hits[k] == idx;
                if drop {
                    k += 1;
                }
                idx += 1;
                !drop
            });
            removed += hits.len();
        }
        self.nodes.retain(|n| !n.is_empty());
        self.len -= removed;
        removed
    }

    /// Elements from the head.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + '_ {
        self.nodes.iter().flat_map(|n| n.iter())
    }

    /// Elements `start..=stop` (clamped by the caller to the list).
    pub fn range(&self, start: usize, stop: usize) -> impl Iterator<Item = &[u8]> + '_ {
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
                n.iter().skip(s)
            })
            .take(take)
    }
}

#[cfg(test)]
mod tests {
    use super::{End, ListValue};

    #[test]
    fn matches_a_deque_model() {
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
            assert_eq!(l.len(), m.len());
            if round % 501 == 0 && !m.is_empty() {
                let got: Vec<&[u8]> = l.iter().collect();
                let want: Vec<&[u8]> = m.iter().map(|v| v.as_slice()).collect();
                assert_eq!(got, want);
                let (a, b) = (m.len() / 3, m.len() * 2 / 3);
                let got: Vec<&[u8]> = l.range(a, b).collect();
                assert_eq!(got, want[a..=b].to_vec());
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
    }
}
