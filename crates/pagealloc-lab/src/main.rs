//! `pagealloc`: the lab's command line. See `pagealloc --help` and
//! [`pagealloc_lab::cli`].

/// Large blocks (a simulated machine's frame metadata) are kept and reused across the
/// runs of a sweep instead of faulted in afresh: [`pagealloc_lab::host_alloc`].
#[global_allocator]
static GLOBAL: pagealloc_lab::host_alloc::PoolingAlloc = pagealloc_lab::host_alloc::PoolingAlloc;

fn main() -> std::process::ExitCode {
    pagealloc_lab::cli::main()
}
