//! A stored document as a thin pointer: the BSON bytes in an allocation of their own length,
//! which is the document's own header (its first 4 bytes, little-endian), so a slot of a
//! collection's slab is 8 bytes (`Option<StoredDoc>`) where a boxed slice takes 16 and a
//! `RawDocumentBuf` 24.

use bson::{RawDocument, RawDocumentBuf};
use std::ptr::NonNull;

/// The bytes of an empty document, stored in place of bytes too short to be one.
const EMPTY: [u8; 5] = [5, 0, 0, 0, 0];

pub struct StoredDoc(NonNull<u8>);

// SAFETY: `StoredDoc` owns its allocation exactly as `Box<[u8]>` does.
unsafe impl Send for StoredDoc {}
// SAFETY: shared access only reads the bytes.
unsafe impl Sync for StoredDoc {}

impl StoredDoc {
    /// Takes a document's bytes (cut to their length, so no encoder slack is kept). The
    /// header is what `len` reads back, so it is made to agree with the allocation whatever
    /// the bytes say (a `RawDocumentBuf`'s always does).
    pub fn new(doc: RawDocumentBuf) -> StoredDoc {
        let mut bytes = doc.into_bytes();
        if bytes.len() < EMPTY.len() || bytes.len() > i32::MAX as usize {
            bytes = EMPTY.to_vec();
        }
        let n = (bytes.len() as i32).to_le_bytes();
        bytes[..4].copy_from_slice(&n);
        let raw = Box::into_raw(bytes.into_boxed_slice()) as *mut u8;
        // `Box::into_raw` never returns null.
        StoredDoc(NonNull::new(raw).unwrap_or(NonNull::dangling()))
    }

    /// The allocation's length, from the header.
    fn len(&self) -> usize {
        // SAFETY: the allocation holds at least 5 bytes (see `new`).
        let h = unsafe { std::ptr::read_unaligned(self.0.as_ptr() as *const [u8; 4]) };
        i32::from_le_bytes(h) as usize
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `len` is the allocation's length (`new` wrote it, and `value_bytes_mut`
        // never reaches the header).
        unsafe { std::slice::from_raw_parts(self.0.as_ptr(), self.len()) }
    }

    /// The document (its header and terminator were checked when it was stored).
    pub fn doc(&self) -> Option<&RawDocument> {
        RawDocument::from_bytes(self.bytes()).ok()
    }

    /// The bytes after the header, to rewrite values in place (the length cannot change).
    pub fn value_bytes_mut(&mut self) -> &mut [u8] {
        let n = self.len();
        // SAFETY: as `bytes`, exclusively borrowed; the header stays out of reach.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_ptr().add(4), n - 4) }
    }

    /// The bytes handed back as a document, without a copy.
    pub fn into_doc(self) -> RawDocumentBuf {
        let n = self.len();
        let p = std::mem::ManuallyDrop::new(self).0.as_ptr();
        // SAFETY: `p` and `n` are the pointer and length of the boxed slice `new` made.
        let b = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) };
        RawDocumentBuf::from_bytes(b.into_vec()).unwrap_or_default()
    }
}

impl Drop for StoredDoc {
    fn drop(&mut self) {
        let n = self.len();
        // SAFETY: as in `into_doc`; dropped once.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.0.as_ptr(), n)) });
    }
}

impl std::fmt::Debug for StoredDoc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoredDoc({} bytes)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn round_trips_and_rewrites_in_place() {
        let d = rawdoc! {"_id": 1, "at": 5i64, "s": "text"};
        let mut s = StoredDoc::new(d.clone());
        assert_eq!(s.bytes(), d.as_bytes());
        assert_eq!(
            s.doc().map(|r| r.as_bytes().to_vec()),
            Some(d.as_bytes().to_vec())
        );
        assert_eq!(std::mem::size_of::<Option<StoredDoc>>(), 8);
        // `at`'s value: after the header (4), `_id` (9) and `at`'s type and name (4).
        let at = 9 + 4;
        s.value_bytes_mut()[at..at + 8].copy_from_slice(&9i64.to_le_bytes());
        let back = s.into_doc();
        assert_eq!(back.get_i64("at").ok(), Some(9));
        assert_eq!(back.as_bytes().len(), d.as_bytes().len());
    }
}
