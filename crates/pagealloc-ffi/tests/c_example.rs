//! Compiles `examples/c/example.c` with the system C compiler against the static and
//! the shared library, runs both, and checks their output (which includes a double
//! free refused with `PAGEALLOC_EDOUBLEFREE`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Build the static and shared libraries (cargo builds only the rlib for tests) into
/// the profile directory this test binary runs from (it lives in its `deps/`), and
/// return that directory.
fn lib_dir() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("current_exe");
            let dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("target dir")
                .to_path_buf();
            let target = dir.parent().expect("target root");
            let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cmd.args(["build", "-p", "pagealloc-ffi", "--lib"])
                .env("CARGO_TARGET_DIR", target);
            if dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let st = cmd.status().expect("run cargo build");
            assert!(st.success(), "cargo build -p pagealloc-ffi failed");
            dir
        })
        .clone()
}

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

fn compile_and_run(name: &str, link: &[&str], env: &[(&str, &Path)]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("pagealloc-c-{name}-{}", std::process::id()));
    let st = Command::new(cc())
        .arg("-std=c11")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(dir.join("include"))
        .arg(dir.join("examples/c/example.c"))
        .args(link)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("run the C compiler (cc): is one installed?");
    assert!(st.success(), "{name}: compiling the C example failed");
    let mut cmd = Command::new(&out);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let run = cmd.output().expect("run the C example");
    let _ = std::fs::remove_file(&out);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "{name}: the C example failed ({}):\n{stdout}\n{stderr}",
        run.status
    );
    assert!(
        stdout.contains("double free refused: not an allocated block (double free?)"),
        "{name}: {stdout}"
    );
    assert!(stdout.trim_end().ends_with("ok"), "{name}: {stdout}");
}

#[test]
fn c_example_static() {
    let lib = lib_dir().join("libpagealloc_ffi.a");
    assert!(lib.exists(), "{} not built", lib.display());
    compile_and_run(
        "static",
        &[lib.to_str().unwrap(), "-lpthread", "-ldl", "-lm"],
        &[],
    );
}

#[test]
fn c_example_shared() {
    let dir = lib_dir();
    assert!(
        dir.join("libpagealloc_ffi.so").exists(),
        "shared library not built"
    );
    let l = format!("-L{}", dir.display());
    compile_and_run(
        "shared",
        &[&l, "-lpagealloc_ffi"],
        &[("LD_LIBRARY_PATH", &dir)],
    );
}
