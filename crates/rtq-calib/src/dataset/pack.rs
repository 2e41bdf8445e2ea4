//! Sample packs: many `.npy`/`.npz` samples in one file (extension `.rtqpack`).
//!
//! Writing one file per sample costs a file creation each, which for small samples
//! takes longer than calibrating on them; a pack is written by appending. rtq's Python
//! package spools a generator's samples into one, and `--calib` accepts one in place
//! of a directory.
//!
//! Layout: the samples' bytes, each a complete `.npy` array or `.npz` archive, back to
//! back; then one 17-byte index entry per sample (`offset: u64`, `length: u64`,
//! `kind: u8` with 0 = `.npy`, 1 = `.npz`); then the sample count (`u64`) and the
//! 8-byte magic `RTQPACK1`. Integers are little-endian.

use crate::CalibError;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The file name extension of a sample pack.
pub const PACK_EXTENSION: &str = "rtqpack";

/// The pack's last 8 bytes.
const MAGIC: &[u8; 8] = b"RTQPACK1";
/// Bytes of one index entry.
const ENTRY_BYTES: u64 = 17;

/// What one packed sample's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackedKind {
    /// A `.npy` array.
    Npy,
    /// A `.npz` archive.
    Npz,
}

/// Where one sample lies in the pack.
#[derive(Debug, Clone, Copy)]
struct Entry {
    offset: u64,
    length: u64,
    kind: PackedKind,
}

/// An opened pack: its path and index.
#[derive(Debug)]
pub(crate) struct Pack {
    path: PathBuf,
    entries: Vec<Entry>,
}

impl Pack {
    /// Reads the index of the pack at `path`, checking that every entry lies
    /// inside the data part.
    pub(crate) fn open(path: &Path) -> Result<Pack, CalibError> {
        let bad = |reason: String| CalibError::Decode {
            file: path.to_path_buf(),
            reason: format!("not a valid sample pack: {reason}"),
        };
        let io = |source| CalibError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = File::open(path).map_err(io)?;
        let size = file.metadata().map_err(io)?.len();
        if size < 16 {
            return Err(bad(format!("{size} bytes is too short for its trailer")));
        }
        let mut trailer = [0u8; 16];
        file.seek(SeekFrom::Start(size - 16)).map_err(io)?;
        file.read_exact(&mut trailer).map_err(io)?;
        if &trailer[8..] != MAGIC {
            return Err(bad("it does not end with `RTQPACK1`".into()));
        }
        let count = u64::from_le_bytes(trailer[..8].try_into().expect("8 bytes"));
        let index_bytes = count
            .checked_mul(ENTRY_BYTES)
            .filter(|&n| n <= size - 16)
            .ok_or_else(|| bad(format!("an index of {count} samples does not fit")))?;
        let data_end = size - 16 - index_bytes;
        let mut index = vec![0u8; index_bytes as usize];
        file.seek(SeekFrom::Start(data_end)).map_err(io)?;
        file.read_exact(&mut index).map_err(io)?;
        let entries = index
            .chunks_exact(ENTRY_BYTES as usize)
            .enumerate()
            .map(|(i, raw)| {
                let offset = u64::from_le_bytes(raw[..8].try_into().expect("8 bytes"));
                let length = u64::from_le_bytes(raw[8..16].try_into().expect("8 bytes"));
                let kind = match raw[16] {
                    0 => PackedKind::Npy,
                    1 => PackedKind::Npz,
                    k => return Err(bad(format!("sample {i} has unknown kind {k}"))),
                };
                if offset.checked_add(length).is_none_or(|end| end > data_end) {
                    return Err(bad(format!(
                        "sample {i} ({length} bytes at {offset}) lies past the data ({data_end} bytes)"
                    )));
                }
                Ok(Entry {
                    offset,
                    length,
                    kind,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Pack {
            path: path.to_path_buf(),
            entries,
        })
    }

    /// How many samples the pack holds.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Sample `index`'s kind and bytes.
    pub(crate) fn read(&self, index: usize) -> Result<(PackedKind, Vec<u8>), CalibError> {
        let entry = self.entries[index];
        let io = |source| CalibError::Io {
            path: self.path.clone(),
            source,
        };
        let mut file = File::open(&self.path).map_err(io)?;
        file.seek(SeekFrom::Start(entry.offset)).map_err(io)?;
        let mut bytes = vec![0u8; entry.length as usize];
        file.read_exact(&mut bytes).map_err(io)?;
        Ok((entry.kind, bytes))
    }
}

/// Writes a sample pack: samples appended one by one, the index on
/// [`PackWriter::finish`].
pub struct PackWriter<W: Write> {
    out: W,
    written: u64,
    index: Vec<u8>,
    count: u64,
}

impl<W: Write> PackWriter<W> {
    /// A pack written to `out` (from its start).
    pub fn new(out: W) -> PackWriter<W> {
        PackWriter {
            out,
            written: 0,
            index: Vec::new(),
            count: 0,
        }
    }

    /// Appends one sample: the complete bytes of a `.npy` array or `.npz` archive.
    pub fn append(&mut self, kind: PackedKind, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)?;
        self.index.extend_from_slice(&self.written.to_le_bytes());
        self.index
            .extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        self.index.push(match kind {
            PackedKind::Npy => 0,
            PackedKind::Npz => 1,
        });
        self.written += bytes.len() as u64;
        self.count += 1;
        Ok(())
    }

    /// Writes the index and trailer; returns the output.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.write_all(&self.index)?;
        self.out.write_all(&self.count.to_le_bytes())?;
        self.out.write_all(MAGIC)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_packs_read_back_and_broken_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.rtqpack");
        let mut w = PackWriter::new(File::create(&path).unwrap());
        w.append(PackedKind::Npy, b"first").unwrap();
        w.append(PackedKind::Npz, b"second!").unwrap();
        w.finish().unwrap();
        let pack = Pack::open(&path).unwrap();
        assert_eq!(pack.len(), 2);
        assert_eq!(pack.read(0).unwrap(), (PackedKind::Npy, b"first".to_vec()));
        assert_eq!(
            pack.read(1).unwrap(),
            (PackedKind::Npz, b"second!".to_vec())
        );

        let bytes = std::fs::read(&path).unwrap();
        let broken = dir.path().join("b.rtqpack");
        std::fs::write(&broken, &bytes[..bytes.len() - 1]).unwrap();
        let e = Pack::open(&broken).unwrap_err().to_string();
        assert!(e.contains("RTQPACK1") && e.contains("b.rtqpack"), "{e}");
        // A count larger than the file.
        let mut big = bytes.clone();
        let n = big.len();
        big[n - 16..n - 8].copy_from_slice(&1000u64.to_le_bytes());
        std::fs::write(&broken, &big).unwrap();
        let e = Pack::open(&broken).unwrap_err().to_string();
        assert!(e.contains("index of 1000 samples"), "{e}");
        // An entry pointing past the data.
        let mut past = bytes;
        past[5 + 7 + 17..5 + 7 + 25].copy_from_slice(&99u64.to_le_bytes());
        std::fs::write(&broken, &past).unwrap();
        let e = Pack::open(&broken).unwrap_err().to_string();
        assert!(e.contains("sample 1") && e.contains("past the data"), "{e}");
    }
}
