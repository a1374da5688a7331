//! Per-frame metadata (the `struct page` analogue) and the intrusive lists built on it.
//!
//! # Design
//! One [`PageMeta`] of 16 bytes per frame of every zone's span (holes included). List
//! links are `u32` indices into the metadata array, not pointers, so the array can be a
//! caller-supplied buffer (no_std) and the simulator can model large memories cheaply.
//! Every field is an atomic used with relaxed loads and stores only (plain `mov`s on x86):
//! the locks below give the ordering, and a buggy caller (a racing double free) can
//! produce a detected error or a wrong answer but never undefined behaviour.
//!
//! # Locking rules
//! Which lock protects a frame's fields follows its state, as in the kernel:
//! - [`State::Buddy`] (on a zone free list): the zone lock.
//! - [`State::Pcp`] (on a per-CPU list): that pageset's lock.
//! - [`State::Allocated`]: the owner of the block; `free` moves it to `Pcp` (under the pcp
//!   lock) or `Buddy` (under the zone lock), through `Freeing`: the move out of
//!   `Allocated` is a compare-and-swap on the state, so two racing frees of one block
//!   cannot both succeed.
//! - With [`Config::own_bitmap`](crate::Config::own_bitmap) an order-0 block's ownership
//!   is its bit in the zone's bitmap instead: a free clears the bit and leaves the state
//!   `Allocated` while the frame waits on a pageset ring (under that pageset's lock); the
//!   drain writes it (docs/mechanisms.md A.13).
//! - [`State::Tail`]: not a block head; nobody writes it except the zone-lock holder that
//!   merges or splits the block around it.
//!
//! A refill or drain moves frames between a pcp list and the buddy lists holding both
//! locks (pcp, then zone).

use crate::frame::MigrateType;
use crate::sync::atomic::{AtomicU32, AtomicU8, Ordering::Relaxed};
use core::fmt;

/// Where list operations report the frames whose metadata they touch (by metadata index):
/// the access seam's [`Rec`](crate::zone::Rec), or (the unit tests) `NoTouch`.
pub(crate) trait Touch {
    /// Frame at metadata index `idx` read (`write == false`) or written; `dep` as
    /// [`Access::dep`](crate::access::Access::dep): 0, or how many reports back the line holding its address is.
    fn meta(&mut self, idx: u32, write: bool, dep: u8);
}

/// Reports nothing (the unit tests' lists; the allocator's paths report through a
/// [`Rec`](crate::zone::Rec), whose sites compile away where no sink may be installed).
#[cfg(test)]
pub(crate) struct NoTouch;

#[cfg(test)]
impl Touch for NoTouch {
    #[inline(always)]
    fn meta(&mut self, _idx: u32, _write: bool, _dep: u8) {}
}

/// "No frame" in a list link.
pub const NIL: u32 = u32::MAX;

/// The state of a frame, kept in its metadata.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum State {
    /// Not the head of any block (inside a free or allocated block), or never used.
    Tail = 0,
    /// Head of a free block on a zone free list (`PageBuddy`).
    Buddy = 1,
    /// Head of a block on a per-CPU list.
    Pcp = 2,
    /// Head of a block handed out to a caller.
    Allocated = 3,
    /// In a hole of the zone's span: never managed.
    Reserved = 4,
    /// Claimed by a free that is in progress (the owner of the block is the freeing thread).
    Freeing = 5,
}

impl State {
    fn from_u8(v: u8) -> State {
        match v & STATE_MASK {
            1 => State::Buddy,
            2 => State::Pcp,
            3 => State::Allocated,
            4 => State::Reserved,
            5 => State::Freeing,
            _ => State::Tail,
        }
    }
}

const STATE_MASK: u8 = 0x0f;
/// Flag bit: an order-0 free that skipped buddy merging (Aaron Lu's RFC, appendix A).
pub const FLAG_MERGE_SKIPPED: u8 = 0x10;

/// Metadata of one frame: 16 bytes (checked by a test).
///
/// Fields: `next`/`prev` list links (protected by the lock of the list the frame is on),
/// `order` of the block it heads, `state` (a [`State`] plus flag bits), `mt` (the
/// migratetype of the list it is on, the cached pcp migratetype, or the requested type of
/// an allocated block), and `aux` (free for mechanisms: cluster ids, the allocating CPU).
#[repr(C)]
pub struct PageMeta {
    next: AtomicU32,
    prev: AtomicU32,
    order: AtomicU8,
    state: AtomicU8,
    mt: AtomicU8,
    spare: AtomicU8,
    aux: AtomicU32,
}

impl Default for PageMeta {
    fn default() -> Self {
        Self::new()
    }
}

impl PageMeta {
    /// A fresh, unused entry (state [`State::Tail`]): all its bytes are zero. `const`, so
    /// a kernel can declare its metadata as a `static` array
    /// (`[const { PageMeta::new() }; N]`, which lands in zeroed `.bss`), and an allocator
    /// can take its metadata from zeroed memory (`calloc`, which the OS maps lazily:
    /// frames never touched cost no memory, unless the platform has it faulted in at
    /// build, [`Platform::prefault_metadata`](crate::Platform::prefault_metadata)).
    ///
    /// The links of a frame are meaningful only while it is on a list (every insertion
    /// writes both), so a fresh entry's zero links are never read.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        PageMeta {
            next: AtomicU32::new(0),
            prev: AtomicU32::new(0),
            order: AtomicU8::new(0),
            state: AtomicU8::new(0),
            mt: AtomicU8::new(0),
            spare: AtomicU8::new(0),
            aux: AtomicU32::new(0),
        }
    }

    /// A fresh, unused entry (loom's atomics are not `const`).
    #[cfg(loom)]
    pub fn new() -> Self {
        PageMeta {
            next: AtomicU32::new(0),
            prev: AtomicU32::new(0),
            order: AtomicU8::new(0),
            state: AtomicU8::new(0),
            mt: AtomicU8::new(0),
            spare: AtomicU8::new(0),
            aux: AtomicU32::new(0),
        }
    }
    /// The frame's state.
    #[inline]
    pub fn state(&self) -> State {
        State::from_u8(self.state.load(Relaxed))
    }
    /// Set the state, clearing flag bits.
    #[inline]
    pub(crate) fn set_state(&self, s: State) {
        self.state.store(s as u8, Relaxed);
    }
    /// Set state and flags together.
    #[inline]
    pub(crate) fn set_state_flags(&self, s: State, flags: u8) {
        self.state.store(s as u8 | flags, Relaxed);
    }
    /// Start a free: one compare-and-swap `Allocated -> Freeing` (an allocated head never
    /// carries flag bits). Of two threads freeing one block at once exactly one gets
    /// `Ok`; the other gets the state it found (`Freeing`, `Pcp`, `Buddy`, ...).
    #[inline]
    pub(crate) fn begin_free(&self) -> Result<(), State> {
        self.state
            .compare_exchange(
                State::Allocated as u8,
                State::Freeing as u8,
                Relaxed,
                Relaxed,
            )
            .map(|_| ())
            .map_err(State::from_u8)
    }
    /// Undo a [`PageMeta::begin_free`] that found the wrong order: `Freeing` back to
    /// `Allocated`, unless someone wrote the state since (with
    /// [`Config::own_bitmap`](crate::Config::own_bitmap) the state of an order-0 frame on
    /// a ring is no ownership, and its drain writes it).
    #[inline]
    pub(crate) fn end_free_refused(&self) {
        let _ = self.state.compare_exchange(
            State::Freeing as u8,
            State::Allocated as u8,
            Relaxed,
            Relaxed,
        );
    }
    /// Flag bits.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.state.load(Relaxed) & !STATE_MASK
    }
    /// Order of the block this frame heads.
    #[inline]
    pub fn order(&self) -> u8 {
        self.order.load(Relaxed)
    }
    #[inline]
    pub(crate) fn set_order(&self, o: u8) {
        self.order.store(o, Relaxed);
    }
    /// Migratetype byte (meaning depends on state, see the type docs).
    #[inline]
    pub fn mt(&self) -> u8 {
        self.mt.load(Relaxed)
    }
    /// The migratetype byte as a type, MOVABLE if it names none: a free block's list
    /// (`get_pageblock_migratetype` is not asked), or a pageset block's cached type
    /// (`get_pcppage_migratetype`, [`Config::pcp_migratetype_cache`](crate::Config::pcp_migratetype_cache)).
    #[inline(always)]
    pub(crate) fn mt_type(&self) -> MigrateType {
        MigrateType::from_u8(self.mt()).unwrap_or(MigrateType::Movable)
    }
    #[inline]
    pub(crate) fn set_mt(&self, mt: u8) {
        self.mt.store(mt, Relaxed);
    }
    /// Mechanism-private word.
    #[inline]
    pub fn aux(&self) -> u32 {
        self.aux.load(Relaxed)
    }
    #[inline]
    pub(crate) fn set_aux(&self, v: u32) {
        self.aux.store(v, Relaxed);
    }
    #[inline]
    pub(crate) fn next(&self) -> u32 {
        self.next.load(Relaxed)
    }
    #[inline]
    pub(crate) fn prev(&self) -> u32 {
        self.prev.load(Relaxed)
    }
    #[inline]
    pub(crate) fn set_next(&self, v: u32) {
        self.next.store(v, Relaxed);
    }
    #[inline]
    pub(crate) fn set_prev(&self, v: u32) {
        self.prev.store(v, Relaxed);
    }
}

impl fmt::Debug for PageMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageMeta")
            .field("state", &self.state())
            .field("order", &self.order())
            .field("mt", &self.mt())
            .field("flags", &self.flags())
            .finish()
    }
}

/// Bytes of metadata needed for `frames` frames (spanned, holes included).
pub const fn metadata_size(frames: u64) -> usize {
    (frames as usize).saturating_mul(core::mem::size_of::<PageMeta>())
}

/// A doubly linked list of frames threaded through their metadata.
///
/// The list head itself lives in the structure the owning lock protects (a pageset or a
/// zone's free area), so `&mut List` proves the lock is held; the frames' links are
/// touched only through it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for List {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "List(len {})", self.len)
    }
}

impl List {
    /// An empty list.
    pub(crate) const fn new() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
    /// No entries.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head == NIL
    }
    /// Number of entries (blocks, not pages).
    #[inline]
    pub(crate) fn len(&self) -> u32 {
        self.len
    }
    /// First entry.
    #[inline]
    pub(crate) fn head(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }
    /// Last entry.
    #[inline]
    pub(crate) fn tail(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }
    /// Insert `i` at the head (inlined: the PCP free hit's push), reporting the frames
    /// whose metadata it touches to `t`: `i` and the old head (its `prev`).
    #[inline(always)]
    pub(crate) fn push_head(&mut self, m: &[PageMeta], i: u32, t: &mut impl Touch) {
        let e = &m[i as usize];
        e.set_prev(NIL);
        e.set_next(self.head);
        t.meta(i, true, 0);
        if self.head != NIL {
            m[self.head as usize].set_prev(i);
            t.meta(self.head, true, 0);
        } else {
            self.tail = i;
        }
        self.head = i;
        self.len += 1;
    }
    /// Insert `i` at the tail, reporting `i` and the old tail (its `next`).
    #[inline]
    pub(crate) fn push_tail(&mut self, m: &[PageMeta], i: u32, t: &mut impl Touch) {
        let e = &m[i as usize];
        e.set_next(NIL);
        e.set_prev(self.tail);
        t.meta(i, true, 0);
        if self.tail != NIL {
            m[self.tail as usize].set_next(i);
            t.meta(self.tail, true, 0);
        } else {
            self.head = i;
        }
        self.tail = i;
        self.len += 1;
    }
    /// Remove and return the head, reporting the popped frame (unlinked: written) and the new head (written).
    #[inline]
    pub(crate) fn pop_head(&mut self, m: &[PageMeta], t: &mut impl Touch) -> Option<u32> {
        if self.head == NIL {
            return None;
        }
        Some(self.pop_head_nonempty(m, t))
    }
    /// Remove and return the head of a list the caller saw non-empty (the hot path's
    /// pop: no emptiness branch of its own, and no bounds tests of the indices it follows),
    /// reporting as [`List::pop_head`] does.
    #[inline(always)]
    pub(crate) fn pop_head_nonempty(&mut self, m: &[PageMeta], t: &mut impl Touch) -> u32 {
        debug_assert!(self.head != NIL);
        let i = self.head;
        debug_assert!((i as usize) < m.len());
        // SAFETY: every index on a list is the metadata index of a frame on it, below
        // `m.len()` (the list's owner's lock, held by the caller through `&mut self`,
        // guards the links; the store's length never changes), and a non-empty list's head
        // is such an index.
        let n = unsafe { m.get_unchecked(i as usize) }.next();
        t.meta(i, true, 0);
        self.head = n;
        if n != NIL {
            debug_assert!((n as usize) < m.len());
            // SAFETY: `n` is the next entry of the same list (see above).
            unsafe { m.get_unchecked(n as usize) }.set_prev(NIL);
            // `n` was read from `i`'s link.
            t.meta(n, true, 1);
        } else {
            self.tail = NIL;
        }
        self.len -= 1;
        i
    }
    /// Remove and return the tail, reporting the popped frame (unlinked: written) and the new tail (written).
    #[inline(always)]
    pub(crate) fn pop_tail(&mut self, m: &[PageMeta], t: &mut impl Touch) -> Option<u32> {
        let i = self.tail;
        if i == NIL {
            return None;
        }
        let p = m[i as usize].prev();
        t.meta(i, true, 0);
        self.tail = p;
        if p != NIL {
            m[p as usize].set_next(NIL);
            t.meta(p, true, 1);
        } else {
            self.head = NIL;
        }
        self.len -= 1;
        Some(i)
    }
    /// Unlink `i`, which must be on this list, reporting `i` (unlinked: written, as `list_del` does) and both neighbours
    /// (written).
    #[inline]
    pub(crate) fn remove(&mut self, m: &[PageMeta], i: u32, t: &mut impl Touch) {
        let e = &m[i as usize];
        let (p, n) = (e.prev(), e.next());
        t.meta(i, true, 0);
        // Both neighbours were read from `i`'s links.
        let mut back = 1;
        if p != NIL {
            m[p as usize].set_next(n);
            t.meta(p, true, back);
            back += 1;
        } else {
            debug_assert_eq!(self.head, i);
            self.head = n;
        }
        if n != NIL {
            m[n as usize].set_prev(p);
            t.meta(n, true, back);
        } else {
            debug_assert_eq!(self.tail, i);
            self.tail = p;
        }
        self.len -= 1;
    }
    /// Cut the first `n` entries, ending at `last`, off the front in O(1) (the kernel's
    /// `list_cut_position`); returns the cut chain's head. The chain keeps its internal
    /// links; `last`'s `next` still points into this list until the caller relinks it
    /// (see [`List::splice_after`]). Writes one frame of this list: the new head's `prev`.
    /// Reports `last` (read) and the new head (written).
    pub(crate) fn cut_front(
        &mut self,
        m: &[PageMeta],
        last: u32,
        n: u32,
        t: &mut impl Touch,
    ) -> u32 {
        debug_assert!(n >= 1 && n <= self.len);
        let first = self.head;
        let rest = m[last as usize].next();
        t.meta(last, false, 0);
        self.head = rest;
        if rest != NIL {
            m[rest as usize].set_prev(NIL);
            t.meta(rest, true, 1);
        } else {
            self.tail = NIL;
        }
        self.len -= n;
        first
    }
    /// Cut the last `n` entries, starting at `first`, off the back in O(1) (the tail
    /// end of `list_cut_before`). The chain `first..=old tail` keeps its internal links;
    /// `first`'s `prev` still points into this list until the caller relinks it. Reads
    /// `first` and writes one frame of this list, the new tail's `next`, both reported.
    pub(crate) fn cut_back(&mut self, m: &[PageMeta], first: u32, n: u32, t: &mut impl Touch) {
        debug_assert!(n >= 1 && n <= self.len);
        let p = m[first as usize].prev();
        t.meta(first, false, 0);
        if p != NIL {
            m[p as usize].set_next(NIL);
            // `p` was read from `first`'s link.
            t.meta(p, true, 1);
        } else {
            debug_assert_eq!(self.head, first);
            self.head = NIL;
        }
        self.tail = p;
        self.len -= n;
    }
    /// Drop the last `n` entries in O(1), `tail` becoming the tail (`NIL`: none are left):
    /// for a caller that has walked them from the old tail and read `tail` from the link
    /// of the last one it walked (and may have relinked them since). Writes `tail`'s
    /// `next`, reported.
    pub(crate) fn truncate_back(&mut self, m: &[PageMeta], tail: u32, n: u32, t: &mut impl Touch) {
        debug_assert!(n <= self.len);
        if tail != NIL {
            m[tail as usize].set_next(NIL);
            // `tail` was read from the link of the entry walked before it.
            t.meta(tail, true, 1);
        } else {
            debug_assert_eq!(n, self.len);
            self.head = NIL;
        }
        self.tail = tail;
        self.len -= n;
    }
    /// Insert the chain `first..=last` of `n` entries (linked by their `next`/`prev`,
    /// outer links ignored) after entry `after`, or at the head when `None`. O(1).
    /// Reports `after`, `first`, `last` and the entry after the chain (all written).
    pub(crate) fn splice_after(
        &mut self,
        m: &[PageMeta],
        after: Option<u32>,
        first: u32,
        last: u32,
        n: u32,
        t: &mut impl Touch,
    ) {
        let next = match after {
            Some(a) => {
                let nx = m[a as usize].next();
                m[a as usize].set_next(first);
                t.meta(a, true, 0);
                nx
            }
            None => {
                let nx = self.head;
                self.head = first;
                nx
            }
        };
        m[first as usize].set_prev(after.unwrap_or(NIL));
        t.meta(first, true, 0);
        m[last as usize].set_next(next);
        // `next` was read from `after`'s link (reported this many reports back), or
        // held in the list head.
        let mut back: u8 = if after.is_some() { 2 } else { 0 };
        if last != first {
            t.meta(last, true, 0);
            if back > 0 {
                back += 1;
            }
        }
        if next != NIL {
            m[next as usize].set_prev(last);
            t.meta(next, true, back);
        } else {
            self.tail = last;
        }
        self.len += n;
    }
    /// Walk the entries head to tail.
    pub(crate) fn iter<'a>(&self, m: &'a [PageMeta]) -> ListIter<'a> {
        ListIter {
            m,
            cur: self.head,
            left: self.len,
        }
    }
}

/// Iterator over a [`List`], head to tail (bounded by the recorded length, so a corrupted
/// list cannot loop forever).
#[derive(Debug)]
pub(crate) struct ListIter<'a> {
    m: &'a [PageMeta],
    cur: u32,
    left: u32,
}

impl Iterator for ListIter<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        if self.cur == NIL || self.left == 0 {
            return None;
        }
        let i = self.cur;
        self.cur = self.m[i as usize].next();
        self.left -= 1;
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn metadata_is_16_bytes() {
        assert_eq!(core::mem::size_of::<PageMeta>(), 16);
        assert_eq!(metadata_size(1000), 16000);
    }

    #[cfg(not(loom))]
    #[test]
    fn a_fresh_entry_is_all_zero_bytes() {
        let e = PageMeta::new();
        // SAFETY: `e` is a live local of 16 bytes (checked above) with no padding (four
        // u8 atomics between u32 atomics, `repr(C)`), so all of them are initialised;
        // nobody else can touch a local, so no lock is needed to read it.
        let bytes = unsafe { core::slice::from_raw_parts(&e as *const PageMeta as *const u8, 16) };
        assert_eq!(bytes, &[0u8; 16]);
        let e = PageMeta::new();
        assert_eq!(
            (e.state(), e.order(), e.mt(), e.flags()),
            (State::Tail, 0, 0, 0)
        );
        assert_eq!((e.next(), e.prev(), e.aux()), (0, 0, 0));
    }

    #[test]
    fn list_ops() {
        let m: Vec<PageMeta> = (0..8).map(|_| PageMeta::new()).collect();
        let mut l = List::new();
        l.push_head(&m, 1, &mut NoTouch);
        l.push_head(&m, 2, &mut NoTouch);
        l.push_tail(&m, 3, &mut NoTouch);
        assert_eq!(l.iter(&m).collect::<Vec<_>>(), [2, 1, 3]);
        l.remove(&m, 1, &mut NoTouch);
        assert_eq!(l.iter(&m).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(l.pop_tail(&m, &mut NoTouch), Some(3));
        assert_eq!(l.pop_head(&m, &mut NoTouch), Some(2));
        assert!(l.is_empty());
        assert_eq!(l.pop_head(&m, &mut NoTouch), None);
    }

    #[test]
    fn cut_and_splice() {
        let m: Vec<PageMeta> = (0..8).map(|_| PageMeta::new()).collect();
        let mut a = List::new();
        for i in 0..5 {
            a.push_tail(&m, i, &mut NoTouch);
        }
        let first = a.cut_front(&m, 2, 3, &mut NoTouch);
        assert_eq!(first, 0);
        assert_eq!(a.iter(&m).collect::<Vec<_>>(), [3, 4]);
        let mut b = List::new();
        b.push_tail(&m, 6, &mut NoTouch);
        b.push_tail(&m, 7, &mut NoTouch);
        b.splice_after(&m, Some(6), 0, 2, 3, &mut NoTouch);
        assert_eq!(b.iter(&m).collect::<Vec<_>>(), [6, 0, 1, 2, 7]);
        assert_eq!(b.len(), 5);
        assert_eq!(b.pop_tail(&m, &mut NoTouch), Some(7));
        assert_eq!(b.pop_tail(&m, &mut NoTouch), Some(2));
        let first = a.cut_front(&m, 4, 2, &mut NoTouch);
        assert!(a.is_empty());
        b.splice_after(&m, None, first, 4, 2, &mut NoTouch);
        assert_eq!(b.iter(&m).collect::<Vec<_>>(), [3, 4, 6, 0, 1]);
        let mut c = List::new();
        c.splice_after(&m, None, 3, 4, 2, &mut NoTouch);
        assert_eq!(c.tail(), Some(4));
        assert_eq!(c.pop_tail(&m, &mut NoTouch), Some(4));
        // cut_back: the last two of [0 1 2 3 4] go, then join another list whole
        let mut d = List::new();
        for i in 0..5 {
            d.push_tail(&m, i, &mut NoTouch);
        }
        d.cut_back(&m, 3, 2, &mut NoTouch);
        assert_eq!(d.iter(&m).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!((d.tail(), d.len()), (Some(2), 3));
        let mut e = List::new();
        e.push_tail(&m, 7, &mut NoTouch);
        e.splice_after(&m, None, 3, 4, 2, &mut NoTouch);
        assert_eq!(e.iter(&m).collect::<Vec<_>>(), [3, 4, 7]);
        d.cut_back(&m, 0, 3, &mut NoTouch);
        assert!(d.is_empty() && d.tail().is_none());
        assert_eq!(d.len(), 0);
    }
}
