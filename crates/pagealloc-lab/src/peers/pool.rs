//! A lock-free pool of order-0 frames: crossbeam's bounded MPMC `ArrayQueue` holding
//! every free frame number. The lower bound of what a page cache can cost.

use crossbeam_queue::ArrayQueue;

use super::{Block, HandleSpace, Memory, PageSource, SourceError};
use crate::workload::MigrateKind;

const NAME: &str = "pool";

/// An `ArrayQueue` of the free frames of `0..frames`.
#[derive(Debug)]
pub struct PoolSource {
    free: ArrayQueue<u32>,
    frames: u64,
    memory: Option<Memory>,
}

impl PoolSource {
    /// A pool of `frames` order-0 frames; with `memory`, backed by a prefaulted mapping.
    ///
    /// # Errors
    /// [`SourceError::Build`] for 0 or more than 2^32 frames, or a failed mapping.
    pub fn new(frames: u64, memory: bool) -> Result<Self, SourceError> {
        let n = u32::try_from(frames)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| SourceError::Build {
                source: NAME,
                why: format!("{frames} frames: must be 1..2^32"),
            })?;
        let free = ArrayQueue::new(n as usize);
        for f in 0..n {
            free.push(f).expect("the queue holds every frame");
        }
        Ok(PoolSource {
            free,
            frames,
            memory: Memory::wanted(memory, NAME, frames)?,
        })
    }
}

impl PageSource for PoolSource {
    fn name(&self) -> &'static str {
        NAME
    }

    #[inline]
    fn allocate(&self, _cpu: usize, order: u8, _kind: MigrateKind) -> Result<Block, SourceError> {
        if order != 0 {
            return Err(SourceError::Unsupported {
                source: NAME,
                why: format!("serves order-0 frames only, order {order} was requested"),
            });
        }
        self.free
            .pop()
            .map(|f| Block {
                handle: u64::from(f),
                order: 0,
            })
            .ok_or(SourceError::OutOfMemory)
    }

    #[inline]
    fn free(&self, _cpu: usize, block: Block) -> Result<(), SourceError> {
        let frame = u32::try_from(block.handle)
            .ok()
            .filter(|&f| block.order == 0 && u64::from(f) < self.frames);
        match frame {
            Some(f) => self.free.push(f).map_err(|_| SourceError::Broken {
                source: NAME,
                what: format!("free of {block:?}: the pool is already full (double free)"),
            }),
            None => Err(SourceError::Broken {
                source: NAME,
                what: format!("free of {block:?}: not an order-0 frame of this pool"),
            }),
        }
    }

    fn memory(&self) -> Option<&Memory> {
        self.memory.as_ref()
    }

    fn handle_space(&self) -> HandleSpace {
        HandleSpace::Frames {
            frames: self.frames,
        }
    }

    fn validate(&self) -> Result<(), SourceError> {
        let free = self.free.len() as u64;
        if free != self.frames {
            return Err(SourceError::Broken {
                source: NAME,
                what: format!(
                    "{} frames still allocated after the run",
                    self.frames - free
                ),
            });
        }
        Ok(())
    }
}
