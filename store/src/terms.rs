//! The run search-term index: which runs an idempotency key or external resource id
//! appears in, so an operator can paste either into the run search.
//!
//! Which values are terms is decided in one place, `ingest::record::terms_of`; how each
//! backend stores and finds them is in `dialect`.
//!
//! On PostgreSQL it is the `run_terms` table, one row per (term, run).
//!
//! On SQLite it is an FTS5 index, `run_terms_fts` (migration 0015): one document per
//! `span_chunks` row (its rowid is the chunk's id) holding that chunk's terms. Why not a
//! table: its B-tree is keyed by terms that are random by nature, so once it is larger than
//! one commit's terms nearly every term inserted rewrites a page of its own, and such a
//! table was the largest share of the pages ingest wrote to SQLite's log. FTS5 writes each commit's terms as one
//! sorted segment and merges segments during later writes: a few bytes per term instead of
//! a page. A chunk's document is written with the chunk and deleted with it.
//!
//! A term becomes one FTS5 token whatever characters it has: the upper-case hex of its
//! UTF-8 bytes, which is exactly what SQLite's `hex()` returns, so a search computes the
//! token in SQL from the term as typed and the match is exact (no prefix, no case folding
//! of the term itself).

use std::collections::BTreeSet;

/// The FTS5 document of a chunk: each distinct term's token, space separated. Empty when
/// the chunk has no terms (no document is written then).
pub fn document<'a>(terms: impl IntoIterator<Item = &'a str>) -> String {
    let distinct: BTreeSet<&str> = terms.into_iter().filter(|t| !t.is_empty()).collect();
    let mut doc = String::new();
    for term in distinct {
        if !doc.is_empty() {
            doc.push(' ');
        }
        doc.push_str(&hex::encode_upper(term));
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_holds_each_distinct_term_once_as_hex() {
        assert_eq!(document(["ab", "", "ab", "A b\"é"]), "41206222C3A9 6162");
        assert_eq!(document(std::iter::empty()), "");
    }
}
