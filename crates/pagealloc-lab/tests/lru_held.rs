//! The prelude's last pages the CPU's LRU add batch holds past thp_mix's prelude unmap
//! (`lru_held_thp`, `lru_held_base`): 6.18's unmap does not drain the batch, so its
//! pages are freed when it next moves, inside the window (a THP moves it at once, 4 KiB
//! faults once they fill it), as `predict` reads them off each recording
//! (`predict::foreign::lru_held`): frees and pageset pages of the program's window.

use pagealloc::{MigrateType, SeedList};
use pagealloc_lab::predict::program::Size;
use pagealloc_lab::predict::{self, Figures, PredictOptions};
use pagealloc_lab::sim::start::{PagesetStart, StartState};

/// thp_mix at `cpus` CPUs, two loops of 2 MiB a CPU after a prelude of 512 pages, from
/// pagesets holding the prelude's pages and the page tables (the pageset lines count
/// from a start state), with `held` pages per CPU left in the LRU batch.
fn run(cpus: u32, held: &[u32]) -> Figures {
    let opts = PredictOptions {
        workload: "thp_mix".into(),
        cpus,
        size: Size {
            pages: 512,
            count: 2,
            extra: 512,
        },
        config: None,
        exe: "unused".into(),
        runs: 1,
    };
    let normal = predict::saved::host_zones()
        .iter()
        .position(|z| z.starts_with("Normal"))
        .expect("the host has a Normal zone");
    let st = StartState {
        pagesets: (0..cpus as usize)
            .map(|cpu| PagesetStart {
                cpu,
                zone: normal,
                count: 620,
                high: 28_500,
                taken: vec![
                    SeedList {
                        order: 0,
                        mt: MigrateType::Movable,
                        blocks: 600,
                    },
                    SeedList {
                        order: 0,
                        mt: MigrateType::Unmovable,
                        blocks: 20,
                    },
                ],
                used: [(0, 0), (0, 1)].into_iter().collect(),
                alloc_factor: 0,
                free_count: 0,
            })
            .collect(),
        lru_held: held.to_vec(),
        ..StartState::default()
    };
    predict::simulate(&opts, "linux-6.18", &st).unwrap().0
}

/// Each held page is one more order-0 free of the window, on the pageset at its end;
/// nothing else moves (the THP CPU's order-9 blocks, the allocations).
#[test]
fn the_batchs_pages_are_freed_in_the_window() {
    let ops = 2.0 * 512.0;
    let frees = |f: &Figures| (f.free_per_op[0] * ops).round();
    let none = run(1, &[]);
    let held = run(1, &[23]);
    assert_eq!(frees(&held) - frees(&none), 23.0);
    assert_eq!(held.pcp_end - none.pcp_end, 23.0, "{none:?} {held:?}");
    assert_eq!(held.pcp_peak - none.pcp_peak, 23.0);
    assert_eq!(held.alloc_per_op, none.alloc_per_op);
    assert_eq!(held.free_per_op[9], none.free_per_op[9]);
    // At two CPUs each group's CPU frees its own: the order-0 CPU's after its faults
    // filled the batch.
    let ops = 2.0 * ops;
    let frees = |f: &Figures| (f.free_per_op[0] * ops).round();
    let none = run(2, &[]);
    let both = run(2, &[5, 7]);
    assert_eq!(frees(&both) - frees(&none), 12.0);
    assert_eq!(both.pcp_end - none.pcp_end, 12.0);
}
