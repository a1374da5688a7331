//! What the command-line test files share: running the built binary under a deadline.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` with stdout discarded and stderr captured: its exit code (None: killed by a
/// signal) and stderr. Panics, after killing it, if it outlives `deadline`.
pub(crate) fn run_until(mut cmd: Command, deadline: Duration) -> (Option<i32>, String) {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pagealloc");
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if t0.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read stderr");
    (status.code(), err)
}
