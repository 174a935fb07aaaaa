//! Byte strings of up to `N` bytes held in place, longer ones boxed: a key space's keys
//! (inside their entry) and an index's entries (inside the B-tree's nodes). Held in place,
//! a short string costs no allocation of its own and is read without a pointer chase.

use crate::util::mem::alloc_size;

#[derive(Clone)]
pub enum InlineBytes<const N: usize> {
    Inline { len: u8, buf: [u8; N] },
    Heap(Box<[u8]>),
}

impl<const N: usize> InlineBytes<N> {
    const FITS: () = assert!(N <= u8::MAX as usize);

    /// `a` followed by `b` (one string, without an intermediate vector).
    pub fn concat(a: &[u8], b: &[u8]) -> InlineBytes<N> {
        let () = Self::FITS;
        let n = a.len() + b.len();
        if n <= N {
            let mut buf = [0u8; N];
            buf[..a.len()].copy_from_slice(a);
            buf[a.len()..n].copy_from_slice(b);
            return InlineBytes::Inline { len: n as u8, buf };
        }
        let mut v = Vec::with_capacity(n);
        v.extend_from_slice(a);
        v.extend_from_slice(b);
        InlineBytes::Heap(v.into_boxed_slice())
    }

    pub fn new(bytes: &[u8]) -> InlineBytes<N> {
        Self::concat(bytes, &[])
    }

    /// Bytes allocated outside the value itself.
    pub fn heap(&self) -> usize {
        match self {
            InlineBytes::Inline { .. } => 0,
            InlineBytes::Heap(b) => alloc_size(b.len()),
        }
    }
}

impl<const N: usize> std::ops::Deref for InlineBytes<N> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            InlineBytes::Inline { len, buf } => &buf[..*len as usize],
            InlineBytes::Heap(b) => b,
        }
    }
}

// Hashed, compared and borrowed as its bytes, so a map keyed by it is searched with a
// plain `&[u8]` (a collection's `_id` map).
impl<const N: usize> std::hash::Hash for InlineBytes<N> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl<const N: usize> PartialEq for InlineBytes<N> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<const N: usize> Eq for InlineBytes<N> {}

impl<const N: usize> std::borrow::Borrow<[u8]> for InlineBytes<N> {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl<const N: usize> std::fmt::Debug for InlineBytes<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::InlineBytes;

    #[test]
    fn inline_up_to_n_boxed_beyond() {
        for n in 0..40usize {
            let v: Vec<u8> = (0..n as u8).collect();
            let b = InlineBytes::<22>::new(&v);
            assert_eq!(&*b, v.as_slice());
            assert_eq!(b.heap() == 0, n <= 22, "{n}");
            let (x, y) = v.split_at(n / 3);
            assert_eq!(&*InlineBytes::<30>::concat(x, y), v.as_slice());
        }
        assert_eq!(std::mem::size_of::<InlineBytes<22>>(), 24);
        assert_eq!(std::mem::size_of::<InlineBytes<30>>(), 32);
    }
}
