//! Span and body chunks as stored: the JSON text (`ingest::record`) compressed with zstd
//! into the `packed` column, `records` / `bodies` left empty (migration 0031). The chunk
//! text was 969 bytes a span on SQLite, four fifths of the database; packed it is 193
//! (docs/benchmarks.md). Chunks written before 0031 keep their text
//! and no `packed`: readers take whichever the row has.
//!
//! Level 1, zstd's fastest: the single ingest writer compresses every chunk, and at
//! 50,000 spans/s that is 45 MB of JSON a second (docs/adr/0009-compressed-chunks.md has
//! what it cost).
//!
//! Once a deployment has a dictionary trained on its own chunks
//! ([`super::dictionaries`], docs/adr/0010-chunk-dictionaries.md), chunks are compressed
//! with it: a chunk is a few kilobytes, too little for zstd to learn the attribute names
//! and resources that every chunk repeats, which the dictionary holds once. zstd writes
//! the dictionary's id into each frame, so a reader knows which one a chunk needs; this
//! module keeps every dictionary it has been given, by id, for the process's life (a
//! deployment makes one a week).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};
use zstd::zstd_safe::{CCtx, CDict, DCtx, DDict};

const LEVEL: i32 = 1;

/// Largest dictionary trained: zstd's usual size, about 1 % of the samples it learns from.
pub const DICTIONARY_BYTES: usize = 64 * 1024;

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
    // The same, for chunks with a dictionary: the prepared dictionary is passed per call,
    // so one context serves every dictionary.
    static DICT_COMPRESSOR: RefCell<CCtx<'static>> = RefCell::new(CCtx::create());
    static DICT_DECOMPRESSOR: RefCell<DCtx<'static>> = RefCell::new(DCtx::create());
}

/// A dictionary prepared for both directions.
pub struct Dictionary {
    id: u32,
    compress: CDict<'static>,
    decompress: DDict<'static>,
}

impl Dictionary {
    /// The id zstd gave it when training (derived from its content), which every frame
    /// compressed with it carries.
    pub fn id(&self) -> u32 {
        self.id
    }
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary").field("id", &self.id).finish()
    }
}

static KNOWN: LazyLock<RwLock<HashMap<u32, Arc<Dictionary>>>> = LazyLock::new(Default::default);

/// Prepares a stored or newly trained dictionary and keeps it for readers; the same
/// dictionary given twice is prepared once. `None` for bytes that are not a zstd
/// dictionary with an id.
pub fn remember(bytes: &[u8]) -> Option<Arc<Dictionary>> {
    let id = zstd::zstd_safe::get_dict_id_from_dict(bytes)?.get();
    if let Some(known) = known(id) {
        return Some(known);
    }
    let dictionary = Arc::new(prepare(bytes)?);
    let mut all = KNOWN.write().unwrap_or_else(|e| e.into_inner());
    Some(all.entry(id).or_insert(dictionary).clone())
}

/// Prepares a dictionary without keeping it (what [`remember`] keeps; on its own, for
/// tests that stand in for another instance).
pub fn prepare(bytes: &[u8]) -> Option<Dictionary> {
    Some(Dictionary {
        id: zstd::zstd_safe::get_dict_id_from_dict(bytes)?.get(),
        compress: CDict::try_create(bytes, LEVEL)?,
        decompress: DDict::try_create(bytes)?,
    })
}

/// The dictionary with this id, if this process has been given it.
pub fn known(id: u32) -> Option<Arc<Dictionary>> {
    KNOWN.read().unwrap_or_else(|e| e.into_inner()).get(&id).cloned()
}

/// The dictionary a packed chunk was compressed with, if any.
pub fn dictionary_of(packed: &[u8]) -> Option<u32> {
    zstd::zstd_safe::get_dict_id_from_frame(packed).map(|id| id.get())
}

/// A dictionary of at most [`DICTIONARY_BYTES`] learned from `samples` (chunk texts), or
/// `None` when zstd finds too little in them to learn from.
pub fn train<S: AsRef<[u8]>>(samples: &[S]) -> Option<Vec<u8>> {
    zstd::dict::from_samples(samples, DICTIONARY_BYTES).ok()
}

fn corrupt(e: impl std::error::Error + Send + Sync + 'static) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(e))
}

/// A chunk's text, compressed, with `dictionary` when given (the frame records its size,
/// for [`unpack`], and the dictionary's id).
pub fn pack(text: &str, dictionary: Option<&Dictionary>) -> Vec<u8> {
    // Compressing into memory cannot fail but for allocation, which aborts anyway.
    let Some(dictionary) = dictionary else {
        return COMPRESSOR.with(|c| c.borrow_mut().compress(text.as_bytes())).expect("zstd compresses into memory");
    };
    let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(text.len()));
    DICT_COMPRESSOR
        .with(|c| c.borrow_mut().compress_using_cdict(&mut out, text.as_bytes(), &dictionary.compress))
        .expect("zstd compresses into memory");
    out
}

/// A chunk's text from its row: `packed` when present, else the text column as written
/// before packing. A chunk whose dictionary this process has not been given is an error:
/// readers load the dictionaries their rows need first ([`super::dictionaries`]).
pub fn unpack(text: String, packed: Option<Vec<u8>>) -> Result<String, sqlx::Error> {
    let Some(bytes) = packed else { return Ok(text) };
    let size = match zstd::zstd_safe::get_frame_content_size(&bytes) {
        Ok(Some(size)) if size <= MAX_CHUNK_BYTES => size as usize,
        _ => return Err(corrupt(std::io::Error::other("a packed chunk without a readable size"))),
    };
    let out = match dictionary_of(&bytes) {
        None => DECOMPRESSOR.with(|d| d.borrow_mut().decompress(&bytes, size)).map_err(corrupt)?,
        Some(id) => {
            let dictionary = known(id).ok_or_else(|| {
                corrupt(std::io::Error::other(format!("a packed chunk needs dictionary {id}, which is not loaded")))
            })?;
            let mut out = Vec::with_capacity(size);
            DICT_DECOMPRESSOR
                .with(|d| d.borrow_mut().decompress_using_ddict(&mut out, &bytes, &dictionary.decompress))
                .map_err(|code| corrupt(std::io::Error::other(zstd::zstd_safe::get_error_name(code))))?;
            out
        }
    };
    String::from_utf8(out).map_err(corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_reads_back_as_written_packed_or_not() {
        let text =
            r#"[{"trace_id":"aa","span_id":"01","name":"tool send"},{"trace_id":"aa","span_id":"02"}]"#.repeat(20);
        let packed = pack(&text, None);
        assert!(packed.len() * 4 < text.len(), "{} → {}", text.len(), packed.len());
        assert_eq!(dictionary_of(&packed), None);
        assert_eq!(unpack(String::new(), Some(packed.clone())).unwrap(), text);
        assert_eq!(unpack(text.clone(), None).unwrap(), text, "a chunk from before packing");
        assert!(unpack(String::new(), Some(packed[..packed.len() / 2].to_vec())).is_err(), "a cut chunk is corrupt");
    }

    /// Chunks alike in shape, as an agent's are: the same attribute names and resource,
    /// different ids and values.
    fn chunk(n: usize) -> String {
        let spans: Vec<String> = (0..3)
            .map(|i| {
                format!(
                    r#"{{"trace_id":"{n:032x}","span_id":"{i:016x}","name":"tool lookup_customer","resource":{{"service.name":"billing-agent","telemetry.sdk.language":"python","host.name":"worker-{}"}},"attributes":{{"tool.name":"lookup_customer","tool.side_effect":"read","customer.id":"cus_{}","step.index":{i}}}}}"#,
                    n % 7,
                    n * 31 + i
                )
            })
            .collect();
        format!("[{}]", spans.join(","))
    }

    #[test]
    fn a_dictionary_learned_from_chunks_makes_them_smaller_and_its_frames_name_it() {
        let samples: Vec<String> = (0..2_000).map(chunk).collect();
        let bytes = train(&samples).expect("enough to learn from");
        assert!(bytes.len() <= DICTIONARY_BYTES);
        let dictionary = remember(&bytes).expect("a dictionary with an id");
        assert!(Arc::ptr_eq(&dictionary, &remember(&bytes).unwrap()), "prepared once");

        let text = chunk(5_000);
        let (plain, small) = (pack(&text, None), pack(&text, Some(&dictionary)));
        assert!(small.len() * 2 < plain.len(), "{} bytes with the dictionary, {} without", small.len(), plain.len());
        assert_eq!(dictionary_of(&small), Some(dictionary.id()));
        assert_eq!(unpack(String::new(), Some(small.clone())).unwrap(), text);
        assert!(remember(b"not a dictionary").is_none());
    }

    #[test]
    fn a_chunk_whose_dictionary_is_not_loaded_is_an_error_not_garbage() {
        // Prepared here but never given to `remember`, as a dictionary another instance
        // trained is until this process loads it.
        let samples: Vec<String> = (0..2_000).map(|n| chunk(n).replace("billing", "support")).collect();
        let prepared = prepare(&train(&samples).unwrap()).unwrap();
        let id = prepared.id();
        let packed = pack(&chunk(1), Some(&prepared));
        assert!(known(id).is_none(), "no other test trains on these samples");
        let err = unpack(String::new(), Some(packed)).unwrap_err().to_string();
        assert!(err.contains(&format!("dictionary {id}")), "{err}");
    }
}
