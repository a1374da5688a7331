//! The check of every block a source returns: in range, aligned to its size, and not
//! overlapping any block handed out and not yet freed (a bitmap of live frames).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::outcome::BadBlock;
use crate::peers::{Block, HandleSpace};

/// Live frames of a frame-range source, one bit per frame; for address sources only
/// the alignment is checked.
#[derive(Debug)]
pub(crate) struct LiveMap {
    space: HandleSpace,
    bits: Vec<AtomicU64>,
}

impl LiveMap {
    pub(crate) fn new(space: HandleSpace) -> Self {
        let words = match space {
            HandleSpace::Frames { frames } => frames.div_ceil(64) as usize,
            HandleSpace::Addresses { .. } => 0,
        };
        LiveMap {
            space,
            bits: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Marks `block` live; an error if it is out of range, misaligned or overlaps a
    /// live block.
    pub(crate) fn claim(&self, block: Block) -> Result<(), BadBlock> {
        let pages = 1u64 << block.order;
        match self.space {
            HandleSpace::Addresses { size_aligned } => {
                let align = if size_aligned { pages * 4096 } else { 4096 };
                if block.handle == 0 || block.handle % align != 0 {
                    return Err(BadBlock::Misaligned { block, align });
                }
                Ok(())
            }
            HandleSpace::Frames { frames } => {
                if block.handle % pages != 0 || block.handle + pages > frames {
                    return Err(BadBlock::OutOfRange { block, frames });
                }
                self.update(block, true)
            }
        }
    }

    /// Marks `block` free; an error if it was not live.
    pub(crate) fn release(&self, block: Block) -> Result<(), BadBlock> {
        match self.space {
            HandleSpace::Addresses { .. } => Ok(()),
            HandleSpace::Frames { .. } => self.update(block, false),
        }
    }

    /// Number of live frames (0 at the end of a run).
    pub(crate) fn live_frames(&self) -> u64 {
        self.bits
            .iter()
            .map(|w| u64::from(w.load(Relaxed).count_ones()))
            .sum()
    }

    fn update(&self, block: Block, set: bool) -> Result<(), BadBlock> {
        let mut pfn = block.handle;
        let end = pfn + (1u64 << block.order);
        while pfn < end {
            let bit = pfn % 64;
            let n = (end - pfn).min(64 - bit);
            let mask = if n == 64 {
                !0
            } else {
                ((1u64 << n) - 1) << bit
            };
            let w = &self.bits[(pfn / 64) as usize];
            if set {
                let old = w.fetch_or(mask, Relaxed);
                if old & mask != 0 {
                    let first = pfn + u64::from((old & mask).trailing_zeros()) - bit;
                    return Err(BadBlock::AlreadyLive {
                        block,
                        frame: first,
                    });
                }
            } else {
                let old = w.fetch_and(!mask, Relaxed);
                if old & mask != mask {
                    return Err(BadBlock::NotLive { block });
                }
            }
            pfn += n;
        }
        Ok(())
    }
}
