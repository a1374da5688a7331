//! `pagealloc`: the lab's command line. See `pagealloc --help` and
//! [`pagealloc_lab::cli`].

fn main() -> std::process::ExitCode {
    pagealloc_lab::cli::main()
}
