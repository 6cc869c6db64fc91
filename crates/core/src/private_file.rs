//! Files that hold decisions, hashes and model explanations (the audit log, the judge
//! cache, the conversation state) are readable by their owner only: created `0600` before
//! SQLite opens them (SQLite gives its `-wal` and `-shm` files the main file's mode). A file
//! that exists keeps its mode: an operator who chose another keeps it.

use std::path::Path;

/// Creates `path` empty with mode `0600` (owner read and write) if it does not exist. Other
/// platforms: nothing (their access control is not a mode).
pub fn create_private(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_new_file_is_private_and_an_existing_one_keeps_its_mode() {
        let dir = std::env::temp_dir().join(format!("rampart-private-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let f = dir.join("a.db");
        let _ = std::fs::remove_file(&f);
        create_private(&f).unwrap_or_else(|e| panic!("{e}"));
        let mode = std::fs::metadata(&f)
            .map(|m| m.permissions().mode() & 0o777)
            .ok();
        assert_eq!(mode, Some(0o600));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640))
            .unwrap_or_else(|e| panic!("{e}"));
        create_private(&f).unwrap_or_else(|e| panic!("{e}"));
        let mode = std::fs::metadata(&f)
            .map(|m| m.permissions().mode() & 0o777)
            .ok();
        assert_eq!(mode, Some(0o640));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
