//! [`Ring`]: a pageset list as an array of metadata indices
//! ([`Config::own_bitmap`](crate::Config::own_bitmap)'s order-0 lists), and its reported
//! push and pop of a refill and a drain.

use crate::zone::Rec;
use alloc::vec::Vec;

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
    /// A free: `list_add(&page->pcp_list, ...)`.
    #[inline(always)]
    pub(crate) fn push_head(&mut self, i: u32) {
        if self.len as usize == self.buf.len() {
            self.grow();
        }
        self.head = self.head.wrapping_sub(1) & self.mask();
        self.buf[self.head as usize] = i;
        self.len += 1;
    }
    /// A refill: `list_add_tail`.
    #[inline]
    pub(crate) fn push_tail(&mut self, i: u32) {
        if self.len as usize == self.buf.len() {
            self.grow();
        }
        let s = self.slot_of(self.len);
        self.buf[s as usize] = i;
        self.len += 1;
    }
    /// An allocation: the head.
    #[inline(always)]
    pub(crate) fn pop_head(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let i = self.buf[self.head as usize];
        self.head = self.head.wrapping_add(1) & self.mask();
        self.len -= 1;
        Some(i)
    }
    /// A drain: the tail.
    #[inline]
    pub(crate) fn pop_tail(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        Some(self.buf[self.slot_of(self.len) as usize])
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

/// [`Ring::push_tail`] of a refill, reported: the buffer line written and the frame.
#[inline]
pub(super) fn ring_push_tail_t<const SINK: bool>(
    cpu: usize,
    ring: &mut Ring,
    pi: usize,
    i: u32,
    r: &Rec<'_, SINK>,
) {
    ring.push_tail(i);
    r.pcp_array(cpu, pi as u8, ring.slot_of(ring.len() - 1), true);
    r.frame(r.z.pfn_of(i), true);
}

/// [`Ring::pop_tail`] of a drain, reported: the buffer line read.
#[inline]
pub(super) fn ring_pop_tail_t<const SINK: bool>(
    cpu: usize,
    ring: &mut Ring,
    pi: usize,
    r: &Rec<'_, SINK>,
) -> Option<u32> {
    let s = ring.slot_of(ring.len().checked_sub(1)?);
    r.pcp_array(cpu, pi as u8, s, false);
    ring.pop_tail()
}
