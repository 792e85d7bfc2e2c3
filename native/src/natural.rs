//! Natural order of consumer ids ("c2" before "c10"), as `app.core.model.consumer_sort_key` orders them:
//! the id split into text and digit runs, compared chunk by chunk, digit runs as integers; ids whose chunks
//! are all equal ("c01" and "c1") by the id itself, so the order is total.
//!
//! Only ASCII ids are accepted (`supported`): Python's `\d` also matches other scripts' digits. The Python
//! side falls back to the reference core for any other request.

use std::cmp::Ordering;

pub fn supported(id: &str) -> bool {
    id.is_ascii()
}

/// The next chunk of `s` from `i`: (is a digit run, end).
fn chunk(s: &[u8], i: usize, digits: bool) -> usize {
    let mut j = i;
    while j < s.len() && s[j].is_ascii_digit() == digits {
        j += 1;
    }
    j
}

/// Python's comparison of the two keys: the chunks' tuples (text, number, text, …: each starts and ends with
/// a text chunk, possibly empty; the shorter is smaller when one is a prefix of the other), then the ids.
pub fn compare(a: &str, b: &str) -> Ordering {
    chunks(a.as_bytes(), b.as_bytes()).then_with(|| a.cmp(b))
}

/// A digit run's value as its digits without leading zeros (compared by length, then bytes).
fn value(run: &[u8]) -> &[u8] {
    let zeros = run.iter().take_while(|&&d| d == b'0').count();
    &run[zeros..]
}

fn chunks(a: &[u8], b: &[u8]) -> Ordering {
    let (mut i, mut j) = (0, 0);
    let mut digits = false;
    loop {
        let (ie, je) = (chunk(a, i, digits), chunk(b, j, digits));
        let (x, y) = (&a[i..ie], &b[j..je]);
        let order = if digits {
            let (x, y) = (value(x), value(y));
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
        // equal numbers: the ids themselves decide ("0" before "1"), never a tie
        let mut tied = vec!["c1", "c001", "c01", "c1a", "c01a", "c0", "c00"];
        tied.sort_by(|a, b| compare(a, b));
        assert_eq!(tied, vec!["c0", "c00", "c001", "c01", "c1", "c01a", "c1a"]);
        assert!(supported("c01") && supported("c0"));
        assert!(!supported("cé"));
    }
}
