//! Output written whole or not at all: a run writes into a staging directory beside its
//! destination, which takes its place only once everything is written.
//!
//! # Design
//! [`Staged::dir`] (a report directory): the destination is checked (a directory or
//! nothing; its parent writable) and the staging directory `.<name>.partial-<pid>` made
//! beside it *before* the run, so a bad path fails at once. [`Staged::commit_dir`] swaps
//! the staging directory in with one `renameat2(RENAME_EXCHANGE)` (or a `rename` when
//! there was nothing before), then removes the previous contents. [`Staged::commit_files`]
//! (a directory the user shares with other files, `twin --out`) renames each staged file
//! into the destination instead, each replacing its namesake whole.
//!
//! A run stopped by SIGINT or SIGTERM (or any error) never reaches the commit: the
//! destination keeps its previous contents, whole. Dropping an uncommitted [`Staged`]
//! removes its directory; one left by a killed process is removed by the next run into
//! the same destination (its process is gone).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// A destination and the staging directory the run writes into.
#[derive(Debug)]
pub struct Staged {
    dest: PathBuf,
    staging: PathBuf,
    done: bool,
}

/// An output path that cannot be used, or a write that failed, as one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OutputError(String);

fn io_err(p: &Path, e: io::Error) -> OutputError {
    OutputError(format!("{}: {e}", p.display()))
}

/// The parent directory of `dest` (`.` for a bare name) and the name.
fn split(dest: &Path) -> Result<(PathBuf, String), OutputError> {
    let name = dest
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| OutputError(format!("{}: not a file or directory name", dest.display())))?
        .to_owned();
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((parent, name))
}

/// Removes staging directories of `name` in `parent` whose process is gone.
fn remove_stale(parent: &Path, name: &str) {
    let prefix = format!(".{name}.partial-");
    let Ok(rd) = fs::read_dir(parent) else { return };
    for e in rd.flatten() {
        let file = e.file_name();
        let Some(pid) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

impl Staged {
    /// Checks `dest` (a directory or nothing yet; its parent exists or can be made and
    /// is writable) and makes the staging directory beside it.
    ///
    /// # Errors
    /// `dest` is a file, or the staging directory cannot be made.
    pub fn dir(dest: &Path) -> Result<Staged, OutputError> {
        if let Ok(m) = fs::metadata(dest) {
            if !m.is_dir() {
                return Err(OutputError(format!(
                    "{}: exists and is not a directory",
                    dest.display()
                )));
            }
        }
        let (parent, name) = split(dest)?;
        fs::create_dir_all(&parent).map_err(|e| io_err(&parent, e))?;
        remove_stale(&parent, &name);
        let staging = parent.join(format!(".{name}.partial-{}", std::process::id()));
        if staging.exists() {
            fs::remove_dir_all(&staging).map_err(|e| io_err(&staging, e))?;
        }
        fs::create_dir(&staging).map_err(|e| io_err(&staging, e))?;
        Ok(Staged {
            dest: dest.to_path_buf(),
            staging,
            done: false,
        })
    }

    /// Where the run writes.
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Puts the staging directory in the destination's place in one step, then removes
    /// what was there before.
    ///
    /// # Errors
    /// A rename that failed (the destination is then unchanged).
    pub fn commit_dir(mut self) -> Result<(), OutputError> {
        if fs::symlink_metadata(&self.dest).is_ok() {
            exchange(&self.staging, &self.dest).map_err(|e| io_err(&self.dest, e))?;
            // The staging path now holds the previous contents.
            let _ = fs::remove_dir_all(&self.staging);
        } else {
            fs::rename(&self.staging, &self.dest).map_err(|e| io_err(&self.dest, e))?;
        }
        self.done = true;
        Ok(())
    }

    /// Moves each staged file into the destination directory (made if missing), each
    /// with one rename (a file of that name there before is replaced whole).
    ///
    /// # Errors
    /// A rename that failed.
    pub fn commit_files(mut self) -> Result<Vec<PathBuf>, OutputError> {
        let mut names = Vec::new();
        for e in fs::read_dir(&self.staging).map_err(|e| io_err(&self.staging, e))? {
            let e = e.map_err(|e| io_err(&self.staging, e))?;
            names.push(e.file_name());
        }
        names.sort();
        fs::create_dir_all(&self.dest).map_err(|e| io_err(&self.dest, e))?;
        let mut out = Vec::new();
        for n in names {
            let to = self.dest.join(&n);
            fs::rename(self.staging.join(&n), &to).map_err(|e| io_err(&to, e))?;
            out.push(to);
        }
        let _ = fs::remove_dir(&self.staging);
        self.done = true;
        Ok(out)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_dir_all(&self.staging);
        }
    }
}

/// Swaps two paths atomically (`renameat2` with `RENAME_EXCHANGE`).
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let ca = CString::new(a.as_os_str().as_bytes())?;
    let cb = CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: 1. both are NUL-terminated paths that live across the call; AT_FDCWD
    // resolves them as `open` would.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("pagealloc-output-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_directory_is_replaced_whole_or_not_at_all() {
        let d = scratch("dir");
        let dest = d.join("report");
        fs::create_dir(&dest).unwrap();
        fs::write(dest.join("old.md"), "old").unwrap();
        // Not committed: the old contents stay, the staging directory goes.
        let s = Staged::dir(&dest).unwrap();
        fs::write(s.path().join("new.md"), "new").unwrap();
        let staging = s.path().to_path_buf();
        drop(s);
        assert!(!staging.exists());
        assert_eq!(fs::read_to_string(dest.join("old.md")).unwrap(), "old");
        // Committed: only the new contents.
        let s = Staged::dir(&dest).unwrap();
        fs::write(s.path().join("new.md"), "new").unwrap();
        s.commit_dir().unwrap();
        assert!(!dest.join("old.md").exists());
        assert_eq!(fs::read_to_string(dest.join("new.md")).unwrap(), "new");
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1, "staging left behind");
        // A file where the directory should be is refused before anything runs.
        fs::write(d.join("file"), "x").unwrap();
        assert!(Staged::dir(&d.join("file")).is_err());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn files_join_the_directory_and_leave_the_others() {
        let d = scratch("files");
        fs::write(d.join("mine.txt"), "mine").unwrap();
        fs::write(d.join("a.json"), "old").unwrap();
        let s = Staged::dir(&d).unwrap();
        fs::write(s.path().join("a.json"), "new").unwrap();
        fs::write(s.path().join("b.json"), "new").unwrap();
        assert_eq!(
            s.commit_files().unwrap(),
            vec![d.join("a.json"), d.join("b.json")]
        );
        assert_eq!(fs::read_to_string(d.join("a.json")).unwrap(), "new");
        assert_eq!(fs::read_to_string(d.join("mine.txt")).unwrap(), "mine");
        fs::remove_dir_all(&d).unwrap();
    }
}
