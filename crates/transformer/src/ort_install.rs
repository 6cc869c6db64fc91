//! Installing the ONNX Runtime library that [`crate::onnx`] loads: the `onnxruntime` wheel
//! from PyPI (through a [`Downloader`], i.e. pip), the library taken out of it, its SHA-256
//! checked, and the file written atomically to `DATA_DIR/lib/` ([`library_path`]).
//!
//! The pinned release is the one the `ort` crate is built for; Linux x86-64 only (elsewhere
//! `ORT_DYLIB_PATH` names a library built by the user).

use rampart_fetch::{
    Downloader, FetchError, check_archive_size, extract, sha256_file, sha256_hex, write_atomic,
};
use std::path::{Path, PathBuf};

/// The ONNX Runtime release installed: the version `ort` 2.0.0-rc.15 is built for.
pub const ORT_VERSION: &str = "1.31.1";
/// The library inside the wheel (identical bytes in the cp311 and cp312 manylinux wheels).
const ORT_MEMBER: &str = "onnxruntime/capi/libonnxruntime.so.1.31.1";
const ORT_SHA256: &str = "fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3";

/// Where [`install`] puts the library under a data directory.
pub fn library_path(data_dir: &Path) -> PathBuf {
    data_dir.join("lib").join("libonnxruntime.so.1.31.1")
}

/// What [`install`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// The library was already there with the pinned checksum; nothing was done.
    UpToDate(PathBuf),
    /// The library was extracted, checked and written.
    Written(PathBuf),
}

/// Why the library could not be installed. Nothing is written on any of them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// Downloading, reading the wheel, hashing or writing failed.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The download folder could not be created or read.
    #[error("{action} {}", path.display())]
    Io {
        /// `creating` or `reading`.
        action: &'static str,
        /// The folder.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// pip succeeded but left no wheel.
    #[error("pip produced no wheel for onnxruntime=={ORT_VERSION}")]
    NoWheel,
    /// The wheel holds no library.
    #[error("{} holds no {ORT_MEMBER}", wheel.display())]
    NoLibrary {
        /// The wheel.
        wheel: PathBuf,
    },
    /// The library in the wheel is not the pinned one (another release or platform, or a
    /// corrupt download).
    #[error(
        "{}!{ORT_MEMBER}: SHA-256 {actual}, expected {ORT_SHA256} (onnxruntime {ORT_VERSION}, \
         Linux x86-64)",
        wheel.display()
    )]
    Checksum {
        /// The wheel.
        wheel: PathBuf,
        /// The library's SHA-256.
        actual: String,
    },
}

/// Installs ONNX Runtime [`ORT_VERSION`] into [`library_path`]`(data_dir)`: from `wheel` when
/// given (always re-installed), else from a pip download unless the installed library
/// already has the pinned checksum. `before_download` runs just before pip does (to tell the
/// user about a ~24 MB download). The download folder, under `DATA_DIR/cache/`, is removed
/// whatever happens.
pub fn install(
    data_dir: &Path,
    wheel: Option<&Path>,
    dl: &dyn Downloader,
    before_download: &dyn Fn(),
) -> Result<Installed, InstallError> {
    let dest = library_path(data_dir);
    if wheel.is_none() && dest.is_file() && sha256_file(&dest)? == ORT_SHA256 {
        return Ok(Installed::UpToDate(dest));
    }
    let tmp = data_dir
        .join("cache")
        .join(format!(".ort-{}", std::process::id()));
    let result = (|| {
        let wheel = match wheel {
            Some(w) => w.to_path_buf(),
            None => {
                let io = |action, source| InstallError::Io {
                    action,
                    path: tmp.clone(),
                    source,
                };
                std::fs::create_dir_all(&tmp).map_err(|e| io("creating", e))?;
                before_download();
                dl.pip_download("onnxruntime", ORT_VERSION, &tmp)?;
                std::fs::read_dir(&tmp)
                    .map_err(|e| io("reading", e))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .find(|p| p.extension().is_some_and(|x| x == "whl"))
                    .ok_or(InstallError::NoWheel)?
            }
        };
        check_archive_size(&wheel)?;
        let lib = extract(&wheel, &[ORT_MEMBER.to_string()])?
            .into_iter()
            .next()
            .ok_or_else(|| InstallError::NoLibrary {
                wheel: wheel.clone(),
            })?;
        let actual = sha256_hex(&lib.bytes);
        if actual != ORT_SHA256 {
            return Err(InstallError::Checksum { wheel, actual });
        }
        write_atomic(&dest, &lib.bytes)?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    result.map(|()| Installed::Written(dest))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report

    use super::*;
    use std::cell::Cell;
    use std::io::Write;

    /// A wheel holding `bytes` as the library.
    fn wheel(dir: &Path, bytes: &[u8]) -> PathBuf {
        let path = dir.join("onnxruntime-1.31.1-cp312-cp312-manylinux_2_27_x86_64.whl");
        let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        z.start_file(ORT_MEMBER, zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(bytes).unwrap();
        z.finish().unwrap();
        path
    }

    /// pip that copies a prepared wheel, counting its calls.
    struct FakePip {
        wheel: PathBuf,
        calls: Cell<usize>,
    }

    impl Downloader for FakePip {
        fn pip_download(
            &self,
            package: &str,
            version: &str,
            dest: &Path,
        ) -> Result<(), FetchError> {
            assert_eq!((package, version), ("onnxruntime", ORT_VERSION));
            self.calls.set(self.calls.get() + 1);
            std::fs::copy(&self.wheel, dest.join(self.wheel.file_name().unwrap())).unwrap();
            Ok(())
        }
        fn http_get(&self, url: &str, _: &Path) -> Result<(), FetchError> {
            panic!("no HTTP in this test ({url})")
        }
    }

    #[test]
    fn refuses_a_library_with_the_wrong_checksum_and_leaves_nothing() {
        let src = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let pip = FakePip {
            wheel: wheel(src.path(), b"not the real library"),
            calls: Cell::new(0),
        };
        let announced = Cell::new(false);
        let e = install(data.path(), None, &pip, &|| announced.set(true)).unwrap_err();
        assert!(matches!(e, InstallError::Checksum { .. }), "{e}");
        assert!(e.to_string().contains("SHA-256"), "{e}");
        assert_eq!(pip.calls.get(), 1);
        assert!(announced.get());
        assert!(!library_path(data.path()).exists());
        let leftovers: Vec<_> = std::fs::read_dir(data.path().join("cache"))
            .unwrap()
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        // An explicit wheel is checked the same way, without pip.
        let e = install(data.path(), Some(&pip.wheel), &pip, &|| ()).unwrap_err();
        assert!(matches!(e, InstallError::Checksum { .. }), "{e}");
        assert_eq!(pip.calls.get(), 1);
    }

    #[test]
    fn a_wheel_without_the_library_is_refused() {
        let src = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let path = src.path().join("empty.whl");
        let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        z.start_file(
            "onnxruntime/__init__.py",
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
        z.finish().unwrap();
        let pip = FakePip {
            wheel: path.clone(),
            calls: Cell::new(0),
        };
        let e = install(data.path(), Some(&path), &pip, &|| ()).unwrap_err();
        assert!(e.to_string().contains(ORT_MEMBER), "{e}");
        assert!(!library_path(data.path()).exists());
    }
}
