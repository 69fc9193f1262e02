//! The precompressed siblings of each bundle file, made once at build time at the highest
//! settings (the server's `ServeDir` picks one by the request's `Accept-Encoding`, so no
//! request pays for compressing).

use anyhow::{Context, Result};
use std::io::Write;

/// Brotli at quality 11 with a 4 MiB window (`lgwin` 22, brotli's own default and what
/// every browser decodes).
pub fn brotli(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len() / 4);
    {
        let mut writer = brotli::CompressorWriter::new(&mut out, 64 * 1024, 11, 22);
        writer.write_all(bytes).context("brotli compression failed")?;
        writer.flush().context("brotli compression failed")?;
    }
    Ok(out)
}

/// gzip at level 9, for clients without brotli.
pub fn gzip(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 3), flate2::Compression::best());
    encoder.write_all(bytes).context("gzip compression failed")?;
    encoder.finish().context("gzip compression failed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn both_encodings_round_trip() {
        let text = "fn hydrate() { leptos::mount::hydrate_body(App) }\n".repeat(200);
        let br = brotli(text.as_bytes()).unwrap();
        let mut back = String::new();
        brotli::Decompressor::new(&br[..], 4096).read_to_string(&mut back).unwrap();
        assert_eq!(back, text);
        assert!(br.len() < text.len() / 10, "{} bytes", br.len());

        let gz = gzip(text.as_bytes()).unwrap();
        let mut back = String::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_string(&mut back).unwrap();
        assert_eq!(back, text);
    }
}
