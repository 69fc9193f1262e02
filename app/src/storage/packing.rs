//! Span and body chunks as stored: the JSON text (`ingest::record`) compressed with zstd
//! into the `packed` column, `records` / `bodies` left empty (migration 0031). The chunk
//! text was 969 bytes a span on SQLite, four fifths of the database; packed it is 193
//! (docs/benchmarks.md). Chunks written before 0031 keep their text
//! and no `packed`: readers take whichever the row has.
//!
//! Level 1, zstd's fastest: the single ingest writer compresses every chunk, and at
//! 50,000 spans/s that is 45 MB of JSON a second (docs/adr/0009-compressed-chunks.md has
//! what it cost).

use std::cell::RefCell;

const LEVEL: i32 = 1;

/// The most a chunk may decompress to (a write's spans of one run are far smaller; a
/// corrupt header must not make a reader allocate without bound).
const MAX_CHUNK_BYTES: u64 = 1 << 30;

thread_local! {
    // One compression and one decompression context per thread, reused: a chunk is a few
    // kilobytes and an export makes dozens, so creating a context per chunk (what
    // `zstd::bulk::compress` does) cost more than compressing.
    static COMPRESSOR: RefCell<zstd::bulk::Compressor<'static>> =
        RefCell::new(zstd::bulk::Compressor::new(LEVEL).expect("a zstd context"));
    static DECOMPRESSOR: RefCell<zstd::bulk::Decompressor<'static>> =
        RefCell::new(zstd::bulk::Decompressor::new().expect("a zstd context"));
}

fn corrupt(e: impl std::error::Error + Send + Sync + 'static) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(e))
}

/// A chunk's text, compressed (the frame records its size, for [`unpack`]).
pub fn pack(text: &str) -> Vec<u8> {
    // Compressing into memory cannot fail but for allocation, which aborts anyway.
    COMPRESSOR.with(|c| c.borrow_mut().compress(text.as_bytes())).expect("zstd compresses into memory")
}

/// A chunk's text from its row: `packed` when present, else the text column as written
/// before packing.
pub fn unpack(text: String, packed: Option<Vec<u8>>) -> Result<String, sqlx::Error> {
    let Some(bytes) = packed else { return Ok(text) };
    let size = match zstd::zstd_safe::get_frame_content_size(&bytes) {
        Ok(Some(size)) if size <= MAX_CHUNK_BYTES => size as usize,
        _ => return Err(corrupt(std::io::Error::other("a packed chunk without a readable size"))),
    };
    let out = DECOMPRESSOR.with(|d| d.borrow_mut().decompress(&bytes, size)).map_err(corrupt)?;
    String::from_utf8(out).map_err(corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_reads_back_as_written_packed_or_not() {
        let text =
            r#"[{"trace_id":"aa","span_id":"01","name":"tool send"},{"trace_id":"aa","span_id":"02"}]"#.repeat(20);
        let packed = pack(&text);
        assert!(packed.len() * 4 < text.len(), "{} → {}", text.len(), packed.len());
        assert_eq!(unpack(String::new(), Some(packed.clone())).unwrap(), text);
        assert_eq!(unpack(text.clone(), None).unwrap(), text, "a chunk from before packing");
        assert!(unpack(String::new(), Some(packed[..packed.len() / 2].to_vec())).is_err(), "a cut chunk is corrupt");
    }
}
