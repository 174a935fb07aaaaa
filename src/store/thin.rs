//! `ThinBytes`: a string value's bytes behind one 8-byte pointer, the length stored in
//! front of the bytes in the same allocation.
//!
//! Why: a `Box<[u8]>` is a 16-byte fat pointer, which made `Value` 24 bytes and every key's
//! `Entry` 64. With the length moved into the allocation, `Value` is 16 bytes and an
//! `Entry` 56, one allocator size class smaller, for every key. The 4-byte header usually
//! lands in the value allocation's rounding slack (a 100-byte value is a 112-byte block
//! either way), so most keys come out 8 bytes smaller.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

/// Lengths from this one on are written as this marker followed by an 8-byte length.
const LONG: u32 = u32::MAX;

pub struct ThinBytes {
    /// Points at `[len: u32 LE][bytes]`, or `[LONG][len: u64 LE][bytes]`; never shared.
    ptr: NonNull<u8>,
}

// SAFETY: a `ThinBytes` owns its allocation exclusively (like a `Box<[u8]>`) and has no
// interior mutability, so moving it to or sharing it with another thread is sound.
unsafe impl Send for ThinBytes {}
// SAFETY: as above; `&ThinBytes` only gives out `&[u8]`.
unsafe impl Sync for ThinBytes {}

fn header_len(len: usize) -> usize {
    if len < LONG as usize {
        4
    } else {
        12
    }
}

fn layout(len: usize) -> Layout {
    // A length that fits in memory at all fits here: `header_len + len` overflowing would
    // mean a value larger than the address space.
    match Layout::from_size_align(header_len(len).saturating_add(len), 1) {
        Ok(l) => l,
        Err(_) => handle_alloc_error(Layout::new::<u8>()),
    }
}

impl ThinBytes {
    pub fn new(bytes: &[u8]) -> ThinBytes {
        let len = bytes.len();
        let layout = layout(len);
        // SAFETY: the layout is never zero-sized (the header is at least 4 bytes); the
        // writes stay within the `header_len(len) + len` bytes just allocated.
        unsafe {
            let p = alloc(layout);
            let Some(ptr) = NonNull::new(p) else {
                handle_alloc_error(layout)
            };
            if len < LONG as usize {
                std::ptr::copy_nonoverlapping((len as u32).to_le_bytes().as_ptr(), p, 4);
            } else {
                std::ptr::copy_nonoverlapping(LONG.to_le_bytes().as_ptr(), p, 4);
                std::ptr::copy_nonoverlapping((len as u64).to_le_bytes().as_ptr(), p.add(4), 8);
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(header_len(len)), len);
            ThinBytes { ptr }
        }
    }

    fn stored_len(&self) -> usize {
        let mut w = [0u8; 4];
        // SAFETY: every allocation starts with at least 4 header bytes.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), w.as_mut_ptr(), 4) };
        let short = u32::from_le_bytes(w);
        if short != LONG {
            return short as usize;
        }
        let mut l = [0u8; 8];
        // SAFETY: the LONG marker is followed by the 8-byte length.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(4), l.as_mut_ptr(), 8) };
        u64::from_le_bytes(l) as usize
    }

    /// Bytes the allocation takes, header included (for the memory estimate).
    pub fn allocation_len(&self) -> usize {
        let len = self.stored_len();
        header_len(len) + len
    }
}

impl std::ops::Deref for ThinBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let len = self.stored_len();
        // SAFETY: `len` initialized bytes follow the header, owned by `self` for as long as
        // the borrow lasts.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(header_len(len)), len) }
    }
}

impl Drop for ThinBytes {
    fn drop(&mut self) {
        let len = self.stored_len();
        // SAFETY: allocated in `new` with exactly this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), layout(len)) }
    }
}

impl Clone for ThinBytes {
    fn clone(&self) -> ThinBytes {
        ThinBytes::new(self)
    }
}

impl std::fmt::Debug for ThinBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl From<&[u8]> for ThinBytes {
    fn from(b: &[u8]) -> ThinBytes {
        ThinBytes::new(b)
    }
}

#[cfg(test)]
mod tests {
    use super::ThinBytes;

    #[test]
    fn round_trips_every_small_length_and_clones() {
        for n in 0..300 {
            let v: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
            let t = ThinBytes::new(&v);
            assert_eq!(&*t, v.as_slice());
            assert_eq!(t.len(), n);
            assert_eq!(t.allocation_len(), n + 4);
            let c = t.clone();
            drop(t);
            assert_eq!(&*c, v.as_slice());
        }
        assert_eq!(std::mem::size_of::<ThinBytes>(), 8);
        assert_eq!(std::mem::size_of::<Option<ThinBytes>>(), 8);
    }
}
