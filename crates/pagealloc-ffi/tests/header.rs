//! The committed header `include/pagealloc.h` is what cbindgen generates from the
//! sources now. `PAGEALLOC_BLESS=1` rewrites it instead of failing.

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cfg = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(cfg)
        .generate()
        .expect("cbindgen")
        .write(&mut out);
    let fresh = String::from_utf8(out).expect("utf-8");
    let path = dir.join("include/pagealloc.h");
    if std::env::var_os("PAGEALLOC_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write header");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "include/pagealloc.h is stale: run `PAGEALLOC_BLESS=1 cargo test -p pagealloc-ffi --test header`"
    );
    for f in [
        "pagealloc_create",
        "pagealloc_destroy",
        "pagealloc_alloc",
        "pagealloc_free",
        "pagealloc_alloc_bulk",
        "pagealloc_free_bulk",
        "pagealloc_counters",
        "pagealloc_vmstat",
        "pagealloc_zoneinfo",
        "pagealloc_strerror",
        "PAGEALLOC_EDOUBLEFREE",
    ] {
        assert!(fresh.contains(f), "{f} missing from the header");
    }
}
