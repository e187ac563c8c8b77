//! The log file's format: a 12-byte header (`FAUXPAYL`, then the schema version as a
//! little-endian u32), then frames of `payload length (u32 LE), CRC-32 of the payload
//! (u32 LE), payload`. Reading it back finds a torn tail and says where to cut it.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The log file's name in the data dir.
pub const LOG_FILE: &str = "fauxpay.log";
/// The schema this fauxpay writes and reads; a newer one is refused.
pub const SCHEMA_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"FAUXPAYL";
const HEADER_LEN: u64 = 12;
/// A frame longer than this is not one fauxpay wrote (a request body is at most 1 MiB).
pub const MAX_FRAME: u32 = 64 << 20;

/// Why a data dir cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error("data dir {dir}: {source}")]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("data dir {0}: {1} is not a fauxpay data file (it does not start with FAUXPAYL); refusing to use it")]
    NotOurs(PathBuf, PathBuf),
    #[error("data dir {0}: another fauxpay is using it ({1} is locked); refusing to start a second writer")]
    InUse(PathBuf, PathBuf),
    #[error("data dir {dir}: written by a newer fauxpay (schema {found}; this one reads up to {SCHEMA_VERSION}); refusing to use it")]
    Newer { dir: PathBuf, found: u32 },
    #[error("data dir {dir}: the record at byte {offset} is corrupt ({why}) and {after} bytes follow it, so this is not a torn last write; refusing to start (move {file} away to start empty)")]
    Corrupt {
        dir: PathBuf,
        file: PathBuf,
        offset: u64,
        after: u64,
        why: &'static str,
    },
    #[error("data dir {dir}: record {index} at byte {offset} cannot be read: {why}")]
    Unreadable {
        dir: PathBuf,
        index: u64,
        offset: u64,
        why: String,
    },
}

/// What reading the log found.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Whole records read.
    pub records: u64,
    /// Where the whole records end (the file is cut there before appending).
    pub valid_len: u64,
    /// Bytes of a torn last write after `valid_len`, discarded.
    pub torn_bytes: u64,
    /// Whether the log file was created now (an empty data dir).
    pub created: bool,
}

/// Encodes one frame around `payload` into `out`.
pub fn encode_frame(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

fn io(dir: &Path) -> impl Fn(std::io::Error) -> DataDirError + '_ {
    move |source| DataDirError::Io {
        dir: dir.to_path_buf(),
        source,
    }
}

/// Takes the log's lock (`flock`, exclusive, not waiting): two processes appending to
/// one log would interleave their records. The lock is the open file's, so it ends with
/// the writer (or the process, however it dies). A file system without `flock` (some
/// network mounts) is used without it, with a warning.
fn lock(file: &File, dir: &Path, path: &Path) -> Result<(), DataDirError> {
    use rustix::fs::{flock, FlockOperation};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(DataDirError::InUse(dir.to_path_buf(), path.to_path_buf())),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "the data dir's log cannot be locked: nothing stops a second fauxpay from using it");
            Ok(())
        }
    }
}

/// Opens the data dir's log (creating the dir and an empty log if needed), calls
/// `each(index, offset, payload)` for every whole frame in order, cuts a torn tail, and
/// returns the file positioned for appending.
pub fn open(
    dir: &Path,
    mut each: impl FnMut(u64, u64, &[u8]) -> Result<(), String>,
) -> Result<(File, Recovered), DataDirError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let path = dir.join(LOG_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io(dir))?;
    lock(&file, dir, &path)?;
    let len = file.metadata().map_err(io(dir))?.len();
    let mut found = Recovered::default();
    if len < HEADER_LEN {
        // Empty, or a crash while the header itself was written: nothing was ever logged.
        if len > 0 && !MAGIC.starts_with(&read_prefix(&mut file, len).map_err(io(dir))?) {
            return Err(DataDirError::NotOurs(dir.to_path_buf(), path));
        }
        file.set_len(0).map_err(io(dir))?;
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(&SCHEMA_VERSION.to_le_bytes());
        file.write_all(&header).map_err(io(dir))?;
        file.sync_all().map_err(io(dir))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        found.valid_len = HEADER_LEN;
        found.created = true;
        return Ok((file, found));
    }
    let mut reader = BufReader::with_capacity(1 << 20, &mut file);
    let mut header = [0u8; HEADER_LEN as usize];
    reader.read_exact(&mut header).map_err(io(dir))?;
    if &header[..8] != MAGIC {
        return Err(DataDirError::NotOurs(dir.to_path_buf(), path));
    }
    let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    if version > SCHEMA_VERSION {
        return Err(DataDirError::Newer {
            dir: dir.to_path_buf(),
            found: version,
        });
    }
    let mut offset = HEADER_LEN;
    let mut payload = Vec::new();
    loop {
        let remaining = len - offset;
        if remaining == 0 {
            break;
        }
        let corrupt = |why: &'static str, frame_end: u64| {
            if frame_end >= len {
                Ok(())
            } else {
                Err(DataDirError::Corrupt {
                    dir: dir.to_path_buf(),
                    file: path.clone(),
                    offset,
                    after: len - frame_end,
                    why,
                })
            }
        };
        if remaining < 8 {
            break; // a torn frame header
        }
        let mut head = [0u8; 8];
        reader.read_exact(&mut head).map_err(io(dir))?;
        let size = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let frame_end = offset + 8 + u64::from(size);
        if size > MAX_FRAME {
            corrupt("impossible length", len)?;
            break;
        }
        if frame_end > len {
            break; // a torn payload
        }
        payload.resize(size as usize, 0);
        reader.read_exact(&mut payload).map_err(io(dir))?;
        if crc32fast::hash(&payload) != crc {
            corrupt("checksum mismatch", frame_end)?;
            break;
        }
        each(found.records, offset, &payload).map_err(|why| DataDirError::Unreadable {
            dir: dir.to_path_buf(),
            index: found.records,
            offset,
            why,
        })?;
        found.records += 1;
        offset = frame_end;
    }
    drop(reader);
    found.valid_len = offset;
    found.torn_bytes = len - offset;
    if found.torn_bytes > 0 {
        file.set_len(offset).map_err(io(dir))?;
        file.sync_all().map_err(io(dir))?;
    }
    file.seek(SeekFrom::Start(offset)).map_err(io(dir))?;
    Ok((file, found))
}

fn read_prefix(file: &mut File, len: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len as usize];
    file.read_exact(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fauxpay-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn write_frames(d: &Path, payloads: &[&[u8]]) -> u64 {
        let (mut f, _) = open(d, |_, _, _| Ok(())).unwrap();
        let mut buf = Vec::new();
        for p in payloads {
            encode_frame(p, &mut buf);
        }
        f.write_all(&buf).unwrap();
        f.metadata().unwrap().len()
    }

    fn read_all(d: &Path) -> Result<(Vec<Vec<u8>>, Recovered), DataDirError> {
        let mut seen = Vec::new();
        let (_, r) = open(d, |_, _, p| {
            seen.push(p.to_vec());
            Ok(())
        })?;
        Ok((seen, r))
    }

    #[test]
    fn frames_come_back_in_order() {
        let d = dir("order");
        write_frames(&d, &[b"one", b"two", b""]);
        let (seen, r) = read_all(&d).unwrap();
        assert_eq!(seen, vec![b"one".to_vec(), b"two".to_vec(), vec![]]);
        assert_eq!((r.records, r.torn_bytes, r.created), (3, 0, false));
    }

    #[test]
    fn a_torn_last_frame_is_cut_at_the_last_whole_one() {
        for cut in 1..=10u64 {
            let d = dir(&format!("torn{cut}"));
            let len = write_frames(&d, &[b"first", b"second!"]);
            let f = OpenOptions::new().write(true).open(d.join(LOG_FILE)).unwrap();
            f.set_len(len - cut).unwrap();
            let (seen, r) = read_all(&d).unwrap();
            assert_eq!(seen, vec![b"first".to_vec()], "cut {cut}");
            assert_eq!(r.torn_bytes, 15 - cut, "cut {cut}");
            // Cut for good: reading again finds nothing torn.
            assert_eq!(read_all(&d).unwrap().1.torn_bytes, 0);
        }
    }

    #[test]
    fn a_corrupt_frame_before_the_end_is_refused() {
        let d = dir("corrupt");
        write_frames(&d, &[b"first", b"second", b"third"]);
        let mut bytes = std::fs::read(d.join(LOG_FILE)).unwrap();
        bytes[HEADER_LEN as usize + 9] ^= 0xFF; // inside "first"
        std::fs::write(d.join(LOG_FILE), &bytes).unwrap();
        let e = read_all(&d).unwrap_err().to_string();
        assert!(e.contains("checksum mismatch") && e.contains("byte 12"), "{e}");
        // Nothing was cut.
        assert_eq!(std::fs::read(d.join(LOG_FILE)).unwrap(), bytes);
    }

    #[test]
    fn another_file_or_a_newer_schema_is_refused() {
        let d = dir("foreign");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(LOG_FILE), b"hello, this is not ours").unwrap();
        assert!(read_all(&d)
            .unwrap_err()
            .to_string()
            .contains("not a fauxpay data file"));
        let mut newer = MAGIC.to_vec();
        newer.extend_from_slice(&(SCHEMA_VERSION + 1).to_le_bytes());
        std::fs::write(d.join(LOG_FILE), &newer).unwrap();
        let e = read_all(&d).unwrap_err().to_string();
        assert!(e.contains("newer fauxpay (schema 2"), "{e}");
    }
}
