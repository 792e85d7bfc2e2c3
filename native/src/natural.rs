//! Natural order of consumer ids ("c2" before "c10"), as `app.core.model.consumer_sort_key` orders them:
//! the id split into text and digit runs, compared chunk by chunk, digit runs as integers.
//!
//! Only ids this module orders exactly like the reference are accepted (`supported`): ASCII, and no digit
//! run with a leading zero (where "c01" and "c1" would tie). The Python side falls back to the reference core
//! for any other request.

use std::cmp::Ordering;

pub fn supported(id: &str) -> bool {
    if !id.is_ascii() {
        return false;
    }
    let bytes = id.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i - start > 1 && bytes[start] == b'0' {
                return false;
            }
        } else {
            i += 1;
        }
    }
    true
}

/// The next chunk of `s` from `i`: (is a digit run, end).
fn chunk(s: &[u8], i: usize, digits: bool) -> usize {
    let mut j = i;
    while j < s.len() && s[j].is_ascii_digit() == digits {
        j += 1;
    }
    j
}

/// Python's tuple comparison of the two keys: text, number, text, … (each key starts and ends with a text
/// chunk, possibly empty; the shorter key is smaller when one is a prefix of the other).
pub fn compare(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    let mut digits = false;
    loop {
        let (ie, je) = (chunk(a, i, digits), chunk(b, j, digits));
        let (x, y) = (&a[i..ie], &b[j..je]);
        let order = if digits {
            x.len().cmp(&y.len()).then_with(|| x.cmp(y))
        } else {
            x.cmp(y)
        };
        if order != Ordering::Equal {
            return order;
        }
        let (a_done, b_done) = (ie == a.len(), je == b.len());
        // A key ends after a text chunk; the key that ends first is the shorter tuple.
        if !digits {
            match (a_done, b_done) {
                (true, true) => return Ordering::Equal,
                (true, false) => return Ordering::Less,
                (false, true) => return Ordering::Greater,
                _ => {}
            }
        }
        i = ie;
        j = je;
        digits = !digits;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order() {
        let mut ids = vec![
            "c10",
            "c2",
            "b",
            "c",
            "c2x",
            "surplus-3",
            "c2a1",
            "",
            "10",
            "9",
        ];
        ids.sort_by(|a, b| compare(a, b));
        assert_eq!(
            ids,
            vec![
                "",
                "9",
                "10",
                "b",
                "c",
                "c2",
                "c2a1",
                "c2x",
                "c10",
                "surplus-3"
            ]
        );
        assert!(!supported("c01"));
        assert!(supported("c0"));
        assert!(!supported("cé"));
    }
}
