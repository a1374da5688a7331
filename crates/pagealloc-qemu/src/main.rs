//! `pagealloc-qemu`: build `crates/pagealloc-kernel` (target `x86_64-unknown-none`) and
//! run it under `qemu-system-x86_64` on `--cpus N` vCPUs for `--seconds S`, optionally
//! with two NUMA nodes (`--nodes 2`: QEMU's `-numa`, which the kernel reads from the
//! ACPI SRAT). The kernel's serial console is streamed to stdout. Exits 0 only when the
//! kernel reported `validate: ok`, `frames lost: 0` and `RESULT: PASS` and QEMU exited
//! with the pass status of isa-debug-exit; 1 when the run failed; 2 for bad arguments or
//! a missing QEMU.
//!
//! KVM is used when `/dev/kvm` can be opened for reading and writing, TCG otherwise
//! (`--accel kvm|tcg` forces one). Under `--accel auto`, a KVM guest that has not
//! started its CPUs `--kvm-stall-s` seconds after the kernel's first line (or whose
//! kernel prints nothing in four times that) is stopped and the run repeated under TCG,
//! saying so. The firmware is QEMU's qboot when its data directory has `qboot.rom`
//! (booting in well under a second where SeaBIOS, emulated instruction by instruction
//! under PVM, takes 20-30 s), SeaBIOS otherwise.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const HELP: &str = "\
pagealloc-qemu: run the pagealloc kernel under QEMU

USAGE:
    cargo run --release -p pagealloc-qemu -- --cpus N --seconds S [--nodes 2] [--accel auto|kvm|tcg]

OPTIONS:
    --cpus N          vCPUs, 1..=16 (default 2)
    --seconds S       run time of the workload, 1..=600 (default 5)
    --nodes K         NUMA nodes, 1 or 2 (default 1): 512 MiB of RAM per node
    --accel A         auto (KVM when /dev/kvm is usable, else TCG), kvm or tcg (default auto)
    --kvm-stall-s T   under auto: fall back to TCG when KVM has not started the CPUs T s after
                      the kernel's first line, or printed nothing in 4 T s (default 30)
    -h, --help        this text

Exit status: 0 when the kernel reported validate() passing and 0 frames lost; 1 when
the run failed; 2 for bad arguments or a missing qemu-system-x86_64.";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Accel {
    Auto,
    Kvm,
    Tcg,
}

#[derive(Debug)]
struct Args {
    cpus: u32,
    seconds: u32,
    nodes: u32,
    accel: Accel,
    kvm_stall_s: u64,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut a = Args {
        cpus: 2,
        seconds: 5,
        nodes: 1,
        accel: Accel::Auto,
        kvm_stall_s: 30,
    };
    fn num(flag: &str, v: Option<String>, lo: u64, hi: u64) -> Result<u64, String> {
        let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
        let n: u64 = v
            .parse()
            .map_err(|_| format!("{flag} {v}: not a whole number"))?;
        if !(lo..=hi).contains(&n) {
            return Err(format!("{flag} {v}: must be {lo}..={hi}"));
        }
        Ok(n)
    }
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut val = || inline.clone().or_else(|| it.next());
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--cpus" => a.cpus = num("--cpus", val(), 1, 16)? as u32,
            "--seconds" => a.seconds = num("--seconds", val(), 1, 600)? as u32,
            "--nodes" => a.nodes = num("--nodes", val(), 1, 2)? as u32,
            "--kvm-stall-s" => a.kvm_stall_s = num("--kvm-stall-s", val(), 5, 3600)?,
            "--accel" => {
                a.accel = match val().as_deref() {
                    Some("auto") => Accel::Auto,
                    Some("kvm") => Accel::Kvm,
                    Some("tcg") => Accel::Tcg,
                    Some(v) => return Err(format!("--accel {v}: must be auto, kvm or tcg")),
                    None => return Err("--accel needs a value".into()),
                }
            }
            _ => return Err(format!("unknown argument {arg} (see --help)")),
        }
    }
    Ok(Some(a))
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("pagealloc-qemu: {e}");
            return ExitCode::from(2);
        }
    };
    if Command::new("qemu-system-x86_64")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        eprintln!(
            "pagealloc-qemu: qemu-system-x86_64 not found (Debian: apt-get install qemu-system-x86)"
        );
        return ExitCode::from(2);
    }
    let kernel = match build_kernel() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("pagealloc-qemu: {e}");
            return ExitCode::from(1);
        }
    };
    let kvm_usable = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    let first = match args.accel {
        Accel::Kvm => Accel::Kvm,
        Accel::Tcg => Accel::Tcg,
        Accel::Auto if kvm_usable => Accel::Kvm,
        Accel::Auto => Accel::Tcg,
    };
    let stall = (args.accel == Accel::Auto && first == Accel::Kvm)
        .then(|| Duration::from_secs(args.kvm_stall_s));
    if first == Accel::Kvm && Path::new("/sys/module/kvm_pvm").exists() {
        println!(
            "pagealloc-qemu: /dev/kvm is PVM (kvm_pvm: no VMX/SVM in this CPU): the guest's CPL 3 \
             runs natively, its CPL 0 is emulated one instruction at a time"
        );
    }
    let bios = qboot();
    let bios = bios.as_deref();
    match run(&args, &kernel, bios, first, stall) {
        Outcome::Done(ok) => {
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Outcome::Stalled => {
            println!(
                "pagealloc-qemu: KVM made no progress in {} s; running again under TCG",
                args.kvm_stall_s
            );
            match run(&args, &kernel, bios, Accel::Tcg, None) {
                Outcome::Done(true) => ExitCode::SUCCESS,
                _ => ExitCode::from(1),
            }
        }
        Outcome::Failed(e) => {
            eprintln!("pagealloc-qemu: {e}");
            ExitCode::from(1)
        }
    }
}

/// `cargo build --release` of the kernel in its own directory (its `.cargo/config.toml`
/// picks the target and flags) into its own target directory; the ELF's path.
fn build_kernel() -> Result<PathBuf, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pagealloc-kernel");
    let target_dir = dir.join("target");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!("pagealloc-qemu: building the kernel (crates/pagealloc-kernel, x86_64-unknown-none)");
    let st = Command::new(cargo)
        .current_dir(&dir)
        .args(["build", "--release", "--quiet", "--target-dir"])
        .arg(&target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTFLAGS")
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !st.success() {
        return Err(
            "building the kernel failed (needs the x86_64-unknown-none target: rustup target add x86_64-unknown-none)"
                .into(),
        );
    }
    Ok(target_dir.join("x86_64-unknown-none/release/pagealloc-kernel"))
}

/// QEMU's qboot firmware (`qboot.rom`) in the usual data directories, if installed.
fn qboot() -> Option<PathBuf> {
    [
        "/usr/share/qemu",
        "/usr/local/share/qemu",
        "/usr/share/qemu-kvm",
    ]
    .iter()
    .map(|d| Path::new(d).join("qboot.rom"))
    .find(|p| p.is_file())
}

enum Outcome {
    /// QEMU ran to the end: whether the kernel passed.
    Done(bool),
    /// KVM printed nothing past boot within the stall limit; QEMU was stopped.
    Stalled,
    /// QEMU could not run or timed out.
    Failed(String),
}

fn qemu_args(a: &Args, kernel: &Path, bios: Option<&Path>, accel: Accel) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let mut push = |s: &str| v.push(s.to_string());
    push("-accel");
    push(if accel == Accel::Kvm { "kvm" } else { "tcg" });
    if let Some(b) = bios {
        push("-bios");
        push(&b.display().to_string());
    }
    push("-smp");
    push(&a.cpus.to_string());
    if a.nodes == 2 {
        push("-m");
        push("1G");
        let split = a.cpus.div_ceil(2);
        for n in 0..2u32 {
            push("-object");
            push(&format!("memory-backend-ram,id=m{n},size=512M"));
            let (lo, hi) = if n == 0 { (0, split) } else { (split, a.cpus) };
            push("-numa");
            if lo < hi {
                push(&format!("node,nodeid={n},cpus={lo}-{},memdev=m{n}", hi - 1));
            } else {
                push(&format!("node,nodeid={n},memdev=m{n}"));
            }
        }
    } else {
        push("-m");
        push("512M");
    }
    for s in [
        "-display",
        "none",
        "-serial",
        "stdio",
        "-monitor",
        "none",
        "-no-reboot",
        "-device",
        "isa-debug-exit,iobase=0xf4,iosize=0x04",
        "-kernel",
    ] {
        push(s);
    }
    push(&kernel.display().to_string());
    push("-append");
    push(&format!("seconds={}", a.seconds));
    v
}

/// Whether a KVM guest counts as stalled: its CPUs not started (`progressed`) `limit`
/// after the kernel's first line, or no kernel line in `4 * limit` (the firmware ran
/// that long).
fn stalled(
    limit: Duration,
    since_start: Duration,
    since_entry: Option<Duration>,
    progressed: bool,
) -> bool {
    !progressed
        && match since_entry {
            Some(e) => e > limit,
            None => since_start > 4 * limit,
        }
}

fn run(
    a: &Args,
    kernel: &Path,
    bios: Option<&Path>,
    accel: Accel,
    stall: Option<Duration>,
) -> Outcome {
    let qargs = qemu_args(a, kernel, bios, accel);
    println!(
        "pagealloc-qemu: qemu-system-x86_64 {} ({} vCPUs, {} node(s), {})",
        qargs.join(" "),
        a.cpus,
        a.nodes,
        if accel == Accel::Kvm { "KVM" } else { "TCG" }
    );
    let mut child = match Command::new("qemu-system-x86_64")
        .args(&qargs)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(format!("cannot start qemu-system-x86_64: {e}")),
    };
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Generous: boot and the PCP-hit measurement under TCG take tens of seconds on a
    // busy 2-core machine, and every vCPU is a host thread.
    let limit = Duration::from_secs(180 + 4 * a.seconds as u64 * a.cpus.max(2) as u64);
    let t0 = Instant::now();
    let (mut validated, mut lost0, mut pass, mut progressed) = (false, false, false, false);
    let mut entered: Option<Instant> = None;
    let stdout = std::io::stdout();
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                let mut o = stdout.lock();
                let _ = writeln!(o, "{line}");
                let l = line.trim();
                validated |= l.starts_with("validate: ok");
                lost0 |= l == "frames lost: 0";
                pass |= l == "RESULT: PASS";
                progressed |= l.starts_with("smp:");
                if entered.is_none() && l.starts_with("pagealloc-kernel:") {
                    entered = Some(Instant::now());
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Some(s) = stall {
            if stalled(s, t0.elapsed(), entered.map(|e| e.elapsed()), progressed) {
                let _ = child.kill();
                let _ = child.wait();
                return Outcome::Stalled;
            }
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Outcome::Failed(format!("QEMU did not finish in {} s", limit.as_secs()));
        }
    }
    let status = match child.wait() {
        Ok(s) => s,
        Err(e) => return Outcome::Failed(format!("waiting for QEMU: {e}")),
    };
    // isa-debug-exit: status = value * 2 + 1; the kernel writes 0x10 on a pass.
    let qemu_pass = status.code() == Some(0x10 * 2 + 1);
    let ok = qemu_pass && validated && lost0 && pass;
    println!(
        "pagealloc-qemu: {} (validate {}, frames lost 0 {}, QEMU status {:?}, {:.1} s)",
        if ok { "PASS" } else { "FAIL" },
        if validated { "ok" } else { "not seen" },
        if lost0 { "seen" } else { "not seen" },
        status.code(),
        t0.elapsed().as_secs_f64()
    );
    Outcome::Done(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Option<Args>, String> {
        parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn arguments() {
        let a = p("--cpus 4 --seconds 5 --nodes 2").unwrap().unwrap();
        assert_eq!(
            (a.cpus, a.seconds, a.nodes, a.accel),
            (4, 5, 2, Accel::Auto)
        );
        let a = p("--cpus=8 --accel tcg").unwrap().unwrap();
        assert_eq!((a.cpus, a.accel), (8, Accel::Tcg));
        assert!(p("--help").unwrap().is_none());
        for bad in [
            "--cpus 0",
            "--cpus 17",
            "--nodes 3",
            "--seconds x",
            "--accel hw",
            "--frob",
            "--cpus",
        ] {
            let e = p(bad).unwrap_err();
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn stall_counts_from_the_kernel() {
        let (t, s) = (Duration::from_secs(30), Duration::from_secs);
        // Slow firmware, kernel just entered: not stalled.
        assert!(!stalled(t, s(100), Some(s(5)), false));
        assert!(stalled(t, s(100), Some(s(31)), false));
        assert!(!stalled(t, s(100), None, false));
        assert!(stalled(t, s(121), None, false));
        assert!(!stalled(t, s(500), Some(s(400)), true));
    }

    #[test]
    fn firmware_and_accelerator() {
        let a = p("--cpus 2").unwrap().unwrap();
        let q = qemu_args(
            &a,
            Path::new("k"),
            Some(Path::new("/q/qboot.rom")),
            Accel::Kvm,
        );
        let q = q.join(" ");
        assert!(q.starts_with("-accel kvm -bios /q/qboot.rom "), "{q}");
        let q = qemu_args(&a, Path::new("k"), None, Accel::Tcg).join(" ");
        assert!(q.starts_with("-accel tcg -smp 2 "), "{q}");
    }

    #[test]
    fn two_nodes_split_the_cpus() {
        let a = p("--cpus 3 --nodes 2").unwrap().unwrap();
        let q = qemu_args(&a, Path::new("k"), None, Accel::Tcg).join(" ");
        assert!(q.contains("node,nodeid=0,cpus=0-1,memdev=m0"), "{q}");
        assert!(q.contains("node,nodeid=1,cpus=2-2,memdev=m1"), "{q}");
        let a = p("--cpus 1 --nodes 2").unwrap().unwrap();
        let q = qemu_args(&a, Path::new("k"), None, Accel::Tcg).join(" ");
        assert!(q.contains("node,nodeid=1,memdev=m1"), "{q}");
    }
}
