//! An owned byte string in 12 bytes with 4-byte alignment: a pointer and a `u32` length.
//!
//! `Box<[u8]>` is 16 bytes with 8-byte alignment, which makes an enum over it 24 bytes. With
//! this type the key space's `Value` is 16 bytes, and a key's entry 48 (one mimalloc size
//! class below 64): 16 bytes less for every key. The length stays beside the pointer rather
//! than in the allocation, so a 32-byte value still takes a 32-byte block.
//!
//! Strings are limited to `u32::MAX` bytes; `proto-max-bulk-len` cannot be set higher, so no
//! client can build a longer one (the constructors saturate rather than panic regardless).

use std::ptr::NonNull;

#[repr(C, packed(4))]
pub struct PackedBytes {
    ptr: NonNull<u8>,
    len: u32,
}

// SAFETY: `PackedBytes` owns its allocation exactly as `Box<[u8]>` does.
unsafe impl Send for PackedBytes {}
// SAFETY: shared access only reads the bytes.
unsafe impl Sync for PackedBytes {}

/// The longest string a `PackedBytes` holds.
pub const MAX_LEN: usize = u32::MAX as usize;

impl PackedBytes {
    /// Takes ownership of a boxed slice (cut to [`MAX_LEN`] bytes, which no caller reaches:
    /// see the module comment).
    pub fn from_box(b: Box<[u8]>) -> PackedBytes {
        let b = if b.len() > MAX_LEN {
            let mut v = b.into_vec();
            v.truncate(MAX_LEN);
            v.into_boxed_slice()
        } else {
            b
        };
        let len = b.len() as u32;
        // `Box::into_raw` never returns null; a zero-length box gives a dangling, non-null
        // pointer, which `from_raw_parts` and `Box::from_raw` accept for length 0.
        let ptr = NonNull::new(Box::into_raw(b) as *mut u8).unwrap_or(NonNull::dangling());
        PackedBytes { ptr, len }
    }

    pub fn into_box(self) -> Box<[u8]> {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so the box is rebuilt exactly once.
        unsafe { me.rebuild() }
    }

    /// The `Box<[u8]>` that `from_box` took apart.
    ///
    /// # Safety
    /// Called once per value: from `drop`, or from `into_box` (which skips `drop`).
    unsafe fn rebuild(&self) -> Box<[u8]> {
        // Copies out of the packed struct (no reference to an unaligned field is formed).
        let (ptr, len) = (self.ptr, self.len);
        // SAFETY: `ptr`/`len` came from a `Box<[u8]>` in `from_box`; the caller rebuilds once.
        unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                ptr.as_ptr(),
                len as usize,
            ))
        }
    }
}

impl PackedBytes {
    /// Changes the bytes as a `Vec` with room for `extra` more, then keeps them exactly
    /// sized again (the packed buffers of listpacks and small sorted sets: see
    /// `util::listpack`). mimalloc's `realloc` stays in place while the size remains within
    /// the block's class, so a run of small changes copies only when it crosses one.
    pub fn edit<R>(&mut self, extra: usize, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let mut v = std::mem::take(self).into_box().into_vec();
        v.reserve_exact(extra);
        let r = f(&mut v);
        *self = PackedBytes::from(v);
        r
    }
}

impl From<&[u8]> for PackedBytes {
    fn from(b: &[u8]) -> PackedBytes {
        PackedBytes::from_box(Box::from(b))
    }
}

impl From<Vec<u8>> for PackedBytes {
    fn from(v: Vec<u8>) -> PackedBytes {
        PackedBytes::from_box(v.into_boxed_slice())
    }
}

impl std::ops::Deref for PackedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // Copies out of the packed struct (no reference to an unaligned field is formed).
        let (ptr, len) = (self.ptr, self.len);
        // SAFETY: `ptr` owns `len` initialized bytes for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len as usize) }
    }
}

impl Drop for PackedBytes {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and `into_box` skips it.
        drop(unsafe { self.rebuild() });
    }
}

impl Default for PackedBytes {
    /// The empty string (no allocation).
    fn default() -> PackedBytes {
        PackedBytes::from_box(Box::default())
    }
}

impl Clone for PackedBytes {
    fn clone(&self) -> PackedBytes {
        PackedBytes::from(&**self)
    }
}

impl std::fmt::Debug for PackedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::PackedBytes;

    #[test]
    fn round_trips_and_stays_small() {
        assert_eq!(std::mem::size_of::<PackedBytes>(), 12);
        for n in [0usize, 1, 7, 32, 100, 4097] {
            let v: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let p = PackedBytes::from(v.as_slice());
            assert_eq!(&*p, v.as_slice());
            let q = p.clone();
            drop(p);
            assert_eq!(&*q, v.as_slice());
            assert_eq!(&*q.into_box(), v.as_slice());
            assert_eq!(&*PackedBytes::from(v.clone()), v.as_slice());
        }
    }
}
