//! [`Ring`]: a pageset list as an array of metadata indices
//! ([`Config::own_bitmap`](crate::Config::own_bitmap)'s order-0 lists). Its pushes and
//! pops report the buffer line they touch to a [`SlotTouch`], [`RingRec`]: the access
//! seam's, whose sites compile away where no sink may be installed.

use crate::zone::{Rec, Seam};
use alloc::vec::Vec;

/// Where ring operations report the buffer slot they touch (its line is `slot / 16`).
pub(crate) trait SlotTouch {
    /// Buffer slot `slot` read (`write == false`) or written.
    fn slot(&mut self, slot: u32, write: bool);
}

/// Reports a ring's buffer lines as those of list `pi` of the pageset of (`cpu`, the
/// [`Rec`]'s zone).
pub(crate) struct RingRec<'r, 'a, S: Seam> {
    pub(crate) r: &'r Rec<'a, S>,
    pub(crate) cpu: usize,
    pub(crate) pi: usize,
}

impl<S: Seam> SlotTouch for RingRec<'_, '_, S> {
    #[inline]
    fn slot(&mut self, slot: u32, write: bool) {
        self.r.pcp_array(self.cpu, self.pi as u8, slot, write);
    }
}

/// One order-0 list of a pageset with [`Config::own_bitmap`](crate::Config::own_bitmap): the
/// metadata indices of its blocks, head first, in a ring buffer of a power-of-two size
/// that doubles when full (under the pageset's lock; it never shrinks, so it ends at the
/// largest count the list has held).
#[derive(Debug, Default)]
pub(crate) struct Ring {
    buf: Vec<u32>,
    head: u32,
    len: u32,
}

impl Ring {
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline(always)]
    pub(crate) fn len(&self) -> u32 {
        self.len
    }
    #[inline(always)]
    fn mask(&self) -> u32 {
        (self.buf.len() as u32).wrapping_sub(1)
    }
    /// Position in the buffer of entry `k` (0: the head); the buffer line it lies in is
    /// `slot / 16`.
    #[inline(always)]
    pub(crate) fn slot_of(&self, k: u32) -> u32 {
        self.head.wrapping_add(k) & self.mask()
    }
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let cap = (self.buf.len() * 2).max(64);
        let mut buf = Vec::with_capacity(cap);
        buf.extend(self.iter());
        buf.resize(cap, 0);
        (self.buf, self.head) = (buf, 0);
    }
    /// A free: `list_add(&page->pcp_list, ...)`; reports the slot written.
    #[inline(always)]
    pub(crate) fn push_head(&mut self, i: u32, t: &mut impl SlotTouch) {
        if self.len as usize == self.buf.len() {
            self.grow();
        }
        self.head = self.head.wrapping_sub(1) & self.mask();
        self.buf[self.head as usize] = i;
        self.len += 1;
        t.slot(self.head, true);
    }
    /// A refill: `list_add_tail`; reports the slot written.
    #[inline]
    pub(crate) fn push_tail(&mut self, i: u32, t: &mut impl SlotTouch) {
        if self.len as usize == self.buf.len() {
            self.grow();
        }
        let s = self.slot_of(self.len);
        self.buf[s as usize] = i;
        self.len += 1;
        t.slot(s, true);
    }
    /// An allocation: the head; reports the slot read.
    #[inline(always)]
    pub(crate) fn pop_head(&mut self, t: &mut impl SlotTouch) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        t.slot(self.head, false);
        let i = self.buf[self.head as usize];
        self.head = self.head.wrapping_add(1) & self.mask();
        self.len -= 1;
        Some(i)
    }
    /// A drain: the tail; reports the slot read.
    #[inline]
    pub(crate) fn pop_tail(&mut self, t: &mut impl SlotTouch) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        let s = self.slot_of(self.len);
        t.slot(s, false);
        Some(self.buf[s as usize])
    }
    /// Drop the last `n` entries (a drain that has read them).
    #[inline]
    pub(crate) fn truncate_tail(&mut self, n: u32) {
        debug_assert!(n <= self.len);
        self.len -= n;
    }
    /// The `k`-th entry from the tail (0: the tail).
    #[inline]
    pub(crate) fn nth_from_tail(&self, k: u32) -> u32 {
        debug_assert!(k < self.len);
        self.buf[self.slot_of(self.len - 1 - k) as usize]
    }
    /// Entries head to tail.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.len).map(|k| self.buf[self.slot_of(k) as usize])
    }
    /// Move the last `n` entries in front of the `m` entries before them (a refill's
    /// clusters, cut first but joined after the blocks taken one by one).
    pub(crate) fn rotate_back(&mut self, m: u32, n: u32) {
        // Three reversals: [A B] -> [B^r A^r]^r = [B A].
        let start = self.len - m - n;
        self.reverse(start, start + m);
        self.reverse(start + m, self.len);
        self.reverse(start, self.len);
    }
    /// Reverse the entries `from..to` (0: the head).
    fn reverse(&mut self, from: u32, to: u32) {
        let (mut a, mut b) = (from, to);
        while a + 1 < b {
            b -= 1;
            let (sa, sb) = (self.slot_of(a) as usize, self.slot_of(b) as usize);
            self.buf.swap(sa, sb);
            a += 1;
        }
    }
}
