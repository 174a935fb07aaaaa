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
    /// `util::listpack`).
    ///
    /// Under mimalloc (the binary's allocator, see [`block_size`]) the `Vec` is given the
    /// whole block the buffer sits in as its capacity, and the block is kept while the new
    /// length stays in its size class: a run of small changes (LPUSH after LPUSH on one
    /// node, an HSET that grows a field's value by a byte) then calls the allocator only
    /// when it crosses a class, where an exact-size `realloc` per change cost about 250
    /// instructions even when mimalloc kept the block in place. The length recorded is
    /// always the bytes in use, and every size the allocator and its counting
    /// (`util::alloc`) see maps to the same class, so `heap()` and `used_memory` stay
    /// exact.
    pub fn edit<R>(&mut self, extra: usize, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let me = std::mem::ManuallyDrop::new(std::mem::take(self));
        let (ptr, len) = (me.ptr, me.len as usize);
        let cap = block_size(len, ptr);
        // SAFETY: `ptr` owns a block of `cap` bytes (`block_size`) whose first `len` are
        // initialized; the allocator frees or resizes it whatever size within its class it
        // is told (`block_size`), so a `Vec` may own it with that capacity. `me` is not
        // dropped, so the block has one owner.
        let mut v = unsafe { Vec::from_raw_parts(ptr.as_ptr(), len, cap) };
        v.reserve_exact(extra);
        let r = f(&mut v);
        if class_capacity(v.len()) != v.capacity() {
            v.shrink_to_fit();
        }
        let mut v = std::mem::ManuallyDrop::new(v);
        let len = v.len().min(MAX_LEN) as u32;
        // A `Vec` never holds a null pointer (a dangling one when it owns no block).
        let ptr = NonNull::new(v.as_mut_ptr()).unwrap_or(NonNull::dangling());
        *self = PackedBytes { ptr, len };
        r
    }
}

/// The capacity a `Vec` may claim over the block of an `n`-byte buffer: the block's size
/// class under mimalloc for blocks up to 64 KiB, else exactly `n`.
///
/// Why this is sound: the binary's global allocator (`util::alloc::Counting`, detected by
/// its count being active) is mimalloc, whose block for a request of `n` bytes is at least
/// `alloc_size(n)` bytes (mimalloc's bins; `util::mem`'s tests hold the two equal for every
/// size up to 4 KiB and at the larger classes), whose `free` ignores the size and whose
/// `realloc` reads the block's real size; and `Counting` counts every size as its class,
/// so a block given back as any length of the same class is counted out exactly as it was
/// counted in. Elsewhere (unit tests on the system allocator) nothing is assumed. Blocks
/// above 64 KiB (huge pages in mimalloc, where the estimate is not exact) are not used so.
///
/// The estimate is also checked against the block itself (`mi_usable_size`, a few
/// instructions): should the model ever claim more than the block holds, the buffer is
/// taken at its exact length instead, so no write can pass the block's end.
fn block_size(n: usize, ptr: NonNull<u8>) -> usize {
    let class = class_capacity(n);
    if class == n {
        return n;
    }
    // SAFETY: `ptr` is a live block of the global allocator, which is mimalloc (a class
    // above `n` is only given under it).
    let usable = unsafe { libmimalloc_sys::mi_usable_size(ptr.as_ptr().cast()) };
    if class <= usable {
        class
    } else {
        n
    }
}

/// The capacity a buffer of `n` bytes keeps: its mimalloc size class (up to 64 KiB) under
/// the binary's counting mimalloc, else exactly `n`.
fn class_capacity(n: usize) -> usize {
    use std::sync::atomic::{AtomicU8, Ordering};
    /// 0: not asked yet, 1: mimalloc with counting, 2: another allocator.
    static MIMALLOC: AtomicU8 = AtomicU8::new(0);
    const MAX_CLASSED: usize = 64 << 10;
    if n == 0 || n > MAX_CLASSED {
        return n;
    }
    let mut m = MIMALLOC.load(Ordering::Relaxed);
    if m == 0 {
        m = if crate::util::alloc::allocated().is_some() {
            1
        } else {
            2
        };
        MIMALLOC.store(m, Ordering::Relaxed);
    }
    if m == 1 {
        crate::util::mem::alloc_size(n)
    } else {
        n
    }
}

impl PackedBytes {
    /// The bytes, to change in place (an edit that keeps the length needs no reallocation).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // Copies out of the packed struct (no reference to an unaligned field is formed).
        let (ptr, len) = (self.ptr, self.len);
        // SAFETY: `ptr` owns `len` initialized bytes, borrowed mutably with `self`.
        unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), len as usize) }
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

/// Either a byte buffer with a small count beside it, or a boxed `T`, in 12 bytes with
/// 4-byte alignment: what lets a small aggregate sit in the key space's 16-byte `Value`
/// without a box of its own (a small hash is its listpack's pointer, length and pair count;
/// a larger one a pointer to its table). The box of a 16-byte value was a second allocation
/// per key (16 bytes and a block header's worth of mimalloc page space).
///
/// The word beside the pointer is [`THIN_BOXED`] for a box, else the buffer's length (low 24
/// bits) and the count (high 8 bits, at most [`THIN_MAX_COUNT`]); buffers longer than
/// [`THIN_MAX_LEN`] or counts above that are refused by [`Thin::bytes`] (the caller boxes
/// them instead).
#[repr(C, packed(4))]
pub struct Thin<T> {
    ptr: NonNull<u8>,
    word: u32,
    _owns: std::marker::PhantomData<Box<T>>,
}

/// The word of a [`Thin`] that holds a box (never a length and count: see [`THIN_MAX_COUNT`]).
const THIN_BOXED: u32 = u32::MAX;
/// The longest buffer a [`Thin`] holds in place.
pub const THIN_MAX_LEN: usize = (1 << 24) - 1;
/// The largest count a [`Thin`] holds beside its buffer (255 would read as the box marker).
pub const THIN_MAX_COUNT: usize = 254;

// SAFETY: `Thin<T>` owns a byte buffer or a `Box<T>`, as an enum of the two would.
unsafe impl<T: Send> Send for Thin<T> {}
// SAFETY: shared access only reads the bytes or lends `&T`.
unsafe impl<T: Sync> Sync for Thin<T> {}

/// A borrowed [`Thin`]: the buffer and its count, or the boxed value.
pub enum ThinRef<'a, T> {
    Bytes(&'a [u8], usize),
    Boxed(&'a T),
}

impl<T> Thin<T> {
    /// Holds `b` and `count` in place; gives `b` back when it is too long or `count` too big.
    pub fn bytes(b: PackedBytes, count: usize) -> Result<Thin<T>, PackedBytes> {
        if b.len() > THIN_MAX_LEN || count > THIN_MAX_COUNT {
            return Err(b);
        }
        let me = std::mem::ManuallyDrop::new(b);
        let (ptr, len) = (me.ptr, me.len);
        Ok(Thin {
            ptr,
            word: len | (count as u32) << 24,
            _owns: std::marker::PhantomData,
        })
    }

    /// The empty buffer with count 0 (no allocation).
    pub fn empty() -> Thin<T> {
        match Thin::bytes(PackedBytes::default(), 0) {
            Ok(t) => t,
            Err(_) => unreachable!("an empty buffer fits"),
        }
    }

    pub fn boxed(b: Box<T>) -> Thin<T> {
        // `Box::leak` gives a non-null pointer that `drop` turns back into the box.
        let ptr = NonNull::from(Box::leak(b)).cast::<u8>();
        Thin {
            ptr,
            word: THIN_BOXED,
            _owns: std::marker::PhantomData,
        }
    }

    pub fn get(&self) -> ThinRef<'_, T> {
        let (ptr, word) = (self.ptr, self.word);
        if word == THIN_BOXED {
            // SAFETY: a boxed `Thin` owns a live `Box<T>` at `ptr`, borrowed with `self`.
            ThinRef::Boxed(unsafe { &*ptr.cast::<T>().as_ptr() })
        } else {
            let len = (word & 0xff_ffff) as usize;
            // SAFETY: `ptr` owns `len` initialized bytes for as long as `self` lives.
            let b = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len) };
            ThinRef::Bytes(b, (word >> 24) as usize)
        }
    }

    /// The boxed value, `None` for a buffer.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        let (ptr, word) = (self.ptr, self.word);
        // SAFETY: a boxed `Thin` owns a live `Box<T>` at `ptr`, borrowed mutably with `self`.
        (word == THIN_BOXED).then(|| unsafe { &mut *ptr.cast::<T>().as_ptr() })
    }

    /// Takes the buffer and its count out, leaving the empty buffer; `None` for a box
    /// (left in place).
    pub fn take_bytes(&mut self) -> Option<(PackedBytes, usize)> {
        if self.word == THIN_BOXED {
            return None;
        }
        let me = std::mem::ManuallyDrop::new(std::mem::replace(self, Thin::empty()));
        let (ptr, word) = (me.ptr, me.word);
        Some((
            PackedBytes {
                ptr,
                len: word & 0xff_ffff,
            },
            (word >> 24) as usize,
        ))
    }
}

impl<T> Drop for Thin<T> {
    fn drop(&mut self) {
        let (ptr, word) = (self.ptr, self.word);
        if word == THIN_BOXED {
            // SAFETY: `ptr` came from `Box::leak` in `boxed`; `drop` runs once.
            drop(unsafe { Box::from_raw(ptr.cast::<T>().as_ptr()) });
        } else {
            // The buffer is a `PackedBytes` taken apart in `bytes`: rebuilt once, dropped.
            drop(PackedBytes {
                ptr,
                len: word & 0xff_ffff,
            });
        }
    }
}

impl<T: Clone> Clone for Thin<T> {
    fn clone(&self) -> Thin<T> {
        match self.get() {
            ThinRef::Boxed(b) => Thin::boxed(Box::new(b.clone())),
            ThinRef::Bytes(b, n) => match Thin::bytes(PackedBytes::from(b), n) {
                Ok(t) => t,
                Err(_) => unreachable!("a copy of a held buffer fits as the original did"),
            },
        }
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

    #[test]
    fn thin_holds_bytes_or_a_box() {
        use super::{Thin, ThinRef, THIN_MAX_COUNT};
        assert_eq!(std::mem::size_of::<Thin<String>>(), 12);
        assert_eq!(std::mem::align_of::<Thin<String>>(), 4);
        let mut t: Thin<String> = Thin::bytes(PackedBytes::from(&b"abc"[..]), 7).unwrap();
        assert!(matches!(t.get(), ThinRef::Bytes(b"abc", 7)));
        assert!(t.get_mut().is_none());
        let c = t.clone();
        let (b, n) = t.take_bytes().unwrap();
        assert_eq!((&*b, n), (&b"abc"[..], 7));
        assert!(matches!(t.get(), ThinRef::Bytes(b"", 0)));
        assert!(matches!(c.get(), ThinRef::Bytes(b"abc", 7)));
        assert!(Thin::<String>::bytes(PackedBytes::from(&b"x"[..]), THIN_MAX_COUNT + 1).is_err());
        let mut bx: Thin<String> = Thin::boxed(Box::new("hello".to_string()));
        bx.get_mut().unwrap().push('!');
        assert!(bx.take_bytes().is_none());
        let bc = bx.clone();
        assert!(matches!(bc.get(), ThinRef::Boxed(s) if s == "hello!"));
        drop(bx);
        assert!(matches!(bc.get(), ThinRef::Boxed(s) if s == "hello!"));
    }
}
