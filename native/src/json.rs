//! A strict JSON reader (RFC 8259) over the request's bytes, for request.rs: strings borrowed unless they
//! hold an escape, numbers as their text, any value skipped with every object checked for a key given twice
//! (in time linear in the object: `Keys`). Every method returns None on anything it does not take (invalid
//! JSON, a lone surrogate, nesting deeper than `MAX_DEPTH`): the caller then declines the request and the
//! reference decoder reads it.

use std::borrow::Cow;
use std::hash::Hash;

use crate::hash::Set;

const MAX_DEPTH: usize = 64;

/// Up to this many keys an object's keys are compared one by one (most objects have a few); beyond, hashed.
const FEW_KEYS: usize = 16;

/// The keys of one object read so far, to find one given twice: a short list while the object is small, a
/// hash set (SipHash with a random key: no input makes it slow) once it is not, so an object of n keys costs
/// O(n), not O(n²).
pub struct Keys<K> {
    few: Vec<K>,
    many: Set<K>,
}

impl<K> Default for Keys<K> {
    fn default() -> Self {
        Keys {
            few: Vec::new(),
            many: Set::default(),
        }
    }
}

impl<K: Hash + Eq> Keys<K> {
    /// Add `key`; false when it was there already.
    pub fn insert(&mut self, key: K) -> bool {
        if self.many.is_empty() {
            if self.few.contains(&key) {
                return false;
            }
            if self.few.len() < FEW_KEYS {
                self.few.push(key);
                return true;
            }
            self.many.extend(self.few.drain(..));
        }
        self.many.insert(key)
    }
}

pub struct Reader<'a> {
    pub bytes: &'a [u8],
    pub at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    pub fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes.get(self.at).copied()
    }

    /// Consume `byte` (after whitespace).
    pub fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// After an opening `[` or `{` and each item: whether another item follows (`,` consumed), or the
    /// container ends (`close` consumed). `first`: no item yet.
    pub fn more(&mut self, close: u8, first: bool) -> Option<bool> {
        match self.peek()? {
            b if b == close => {
                self.at += 1;
                Some(false)
            }
            b',' if !first => {
                self.at += 1;
                Some(true)
            }
            _ if first => Some(true),
            _ => None,
        }
    }

    pub fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.ws();
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    pub fn null(&mut self) -> bool {
        self.literal(b"null").is_some()
    }

    pub fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.at;
        let mut ascii = true;
        loop {
            match *self.bytes.get(self.at)? {
                b'"' => {
                    let raw = &self.bytes[start..self.at];
                    // ASCII is UTF-8: only a string with other bytes is checked
                    let text = if ascii {
                        unsafe { std::str::from_utf8_unchecked(raw) }
                    } else {
                        std::str::from_utf8(raw).ok()?
                    };
                    self.at += 1;
                    return Some(Cow::Borrowed(text));
                }
                b'\\' => break,
                0..=0x1f => return None,
                b => {
                    ascii &= b.is_ascii();
                    self.at += 1;
                }
            }
        }
        let mut text: Vec<u8> = self.bytes[start..self.at].to_vec();
        loop {
            match *self.bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return String::from_utf8(text).ok().map(Cow::Owned);
                }
                b'\\' => {
                    let escape = *self.bytes.get(self.at + 1)?;
                    self.at += 2;
                    let c = match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let high = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&high) {
                                (self.bytes.get(self.at..self.at + 2)? == b"\\u").then_some(())?;
                                self.at += 2;
                                let low = self.hex4()?;
                                (0xdc00..0xe000).contains(&low).then_some(())?;
                                0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00)
                            } else {
                                high
                            };
                            char::from_u32(code)? // a lone surrogate is not a character
                        }
                        _ => return None,
                    };
                    let mut buffer = [0u8; 4];
                    text.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
                }
                0..=0x1f => return None,
                b => {
                    text.push(b);
                    self.at += 1;
                }
            }
        }
    }

    /// An object key without escapes, as its bytes (for matching known keys: one with an escape, or not
    /// UTF-8, matches none of them and is declined).
    pub fn plain_key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        let end = start
            + self.bytes[start..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        (self.bytes[end] == b'"').then_some(())?;
        self.at = end + 1;
        Some(&self.bytes[start..end])
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = std::str::from_utf8(self.bytes.get(self.at..self.at + 4)?).ok()?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.at += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    /// A number's text, by the JSON grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
    pub fn number(&mut self) -> Option<&'a str> {
        self.ws();
        let start = self.at;
        let digits = |r: &mut Self| {
            let from = r.at;
            while r.bytes.get(r.at).is_some_and(u8::is_ascii_digit) {
                r.at += 1;
            }
            r.at > from
        };
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match self.bytes.get(self.at)? {
            b'0' => self.at += 1,
            b'1'..=b'9' => {
                digits(self);
            }
            _ => return None,
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            digits(self).then_some(())?;
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                self.at += 1;
            }
            digits(self).then_some(())?;
        }
        // ASCII by the grammar
        Some(unsafe { std::str::from_utf8_unchecked(&self.bytes[start..self.at]) })
    }

    /// A number as msgspec reads it into a float field: an integer literal (up to 18 digits, not negative:
    /// the longer and the negative ones are left to the reference) or a float literal, finite.
    pub fn float(&mut self) -> Option<f64> {
        let text = self.number()?;
        if let Some(value) = exact_decimal(text.as_bytes()) {
            return Some(value);
        }
        let integer = text.bytes().all(|b| b.is_ascii_digit());
        if integer {
            return (text.len() <= 18).then(|| text.parse::<u64>().ok().map(|v| v as f64))?;
        }
        if text.bytes().all(|b| b == b'-' || b.is_ascii_digit()) {
            return None; // a negative integer
        }
        text.parse::<f64>().ok().filter(|v| v.is_finite())
    }

    /// A non-negative integer literal (digits only) up to `max`.
    pub fn unsigned(&mut self, max: u64) -> Option<u64> {
        let text = self.number()?;
        if text.len() > 18 || !text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        text.parse::<u64>().ok().filter(|&v| v <= max)
    }

    /// Skip any value; false where it is not valid JSON or an object in it gives a key twice.
    pub fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => {
                self.at += 1;
                let mut keys = Keys::default();
                let mut first = true;
                while self.more(b'}', first)? {
                    first = false;
                    if !keys.insert(self.string()?) {
                        return None;
                    }
                    self.eat(b':')?;
                    self.skip(depth + 1)?;
                }
                Some(())
            }
            b'[' => {
                self.at += 1;
                let mut first = true;
                while self.more(b']', first)? {
                    first = false;
                    self.skip(depth + 1)?;
                }
                Some(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(drop),
        }
    }
}

/// Powers of ten a double holds exactly.
const EXACT_TENS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A decimal `digits.digits` (no sign, no exponent) whose digits make an integer m ≤ 2^53 with at most 22 after
/// the point: m / 10^k, one correctly rounded division of two exact doubles (Clinger's fast path), so the
/// same double as a full parse — in one pass over the text, where rates like 34.56 are the common case.
/// None for any other number (the full parse reads it).
fn exact_decimal(text: &[u8]) -> Option<f64> {
    let (mut mantissa, mut fraction, mut point) = (0u64, 0usize, false);
    for &b in text {
        match b {
            b'0'..=b'9' => {
                mantissa = mantissa.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
                fraction += usize::from(point);
            }
            b'.' => point = true,
            _ => return None,
        }
    }
    (point && mantissa <= 1 << 53 && fraction < EXACT_TENS.len())
        .then(|| mantissa as f64 / EXACT_TENS[fraction])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings() {
        let mut r = Reader::new(br#" "a\u00e9\n\ud83d\ude00" "b" "\ud800" "#);
        assert_eq!(r.string().unwrap(), "aé\n😀");
        assert_eq!(r.string().unwrap(), "b");
        assert!(r.string().is_none());
    }

    #[test]
    fn numbers() {
        for (text, value) in [
            ("0", Some(0.0)),
            ("12.5e1", Some(125.0)),
            ("-0.0", Some(-0.0)),
            ("1e400", None),
        ] {
            assert_eq!(Reader::new(text.as_bytes()).float(), value, "{text}");
        }
        for bad in ["01", "1.", ".5", "+1", "-", "1e", "-3", "NaN"] {
            let mut r = Reader::new(bad.as_bytes());
            assert!(r.float().is_none() || r.at < bad.len(), "{bad}");
        }
        assert_eq!(
            Reader::new(b"2147483647").unsigned(2147483647),
            Some(2147483647)
        );
        assert_eq!(Reader::new(b"2147483648").unsigned(2147483647), None);
    }

    #[test]
    fn the_fast_decimals_are_the_full_parse() {
        let mut x = 0x2545_f491_4f6c_dd1du64; // xorshift: decimals of every length the fast path takes
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 10u64.pow((x >> 60) as u32 % 17 + 1)).to_string();
            let point = (x >> 40) as usize % digits.len(); // a digit after the point, as JSON asks
            let text = format!(
                "{}.{}",
                &digits[..point].trim_start_matches('0'),
                &digits[point..]
            );
            let text = if text.starts_with('.') {
                format!("0{text}")
            } else {
                text
            };
            let full: f64 = text.parse().unwrap();
            assert_eq!(Reader::new(text.as_bytes()).float(), Some(full), "{text}");
        }
        for text in [
            "9007199254740993.5",
            "1.00000000000000000000001",
            "12345678901234567890.5",
        ] {
            assert_eq!(exact_decimal(text.as_bytes()), None, "{text}");
            assert_eq!(
                Reader::new(text.as_bytes()).float(),
                text.parse().ok(),
                "{text}"
            );
        }
    }

    #[test]
    fn skipping() {
        assert!(Reader::new(br#"{"a":[1,{"b":null}],"c":true}"#)
            .skip(0)
            .is_some());
        assert!(Reader::new(br#"{"a":1,"a":2}"#).skip(0).is_none());
        assert!(Reader::new(br#"[1,]"#).skip(0).is_none());
        assert!(Reader::new(br#"{"a" 1}"#).skip(0).is_none());
        assert!(Reader::new(br#"{"a":1,"\u0061":2}"#).skip(0).is_none());
    }

    /// An object of many distinct keys, and the same with one key repeated last: taken, and declined.
    #[test]
    fn many_keys() {
        let object = |n: usize, repeat: bool| {
            let mut text = String::from("{");
            for i in 0..n {
                text.push_str(&format!("\"k{i}\":{i},"));
            }
            text.push_str(if repeat { "\"k7\":0}" } else { "\"last\":0}" });
            text
        };
        assert!(Reader::new(object(100_000, false).as_bytes())
            .skip(0)
            .is_some());
        assert!(Reader::new(object(100_000, true).as_bytes())
            .skip(0)
            .is_none());
    }

    /// A key compared with another, counted: what finding repeats costs, in comparisons, not in seconds.
    struct Counted<'c>(u64, &'c std::cell::Cell<u64>);

    impl Hash for Counted<'_> {
        fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
            self.0.hash(state);
        }
    }

    impl PartialEq for Counted<'_> {
        fn eq(&self, other: &Self) -> bool {
            self.1.set(self.1.get() + 1);
            self.0 == other.0
        }
    }

    impl Eq for Counted<'_> {}

    #[test]
    fn keys_cost_linear_comparisons() {
        let comparisons = std::cell::Cell::new(0);
        let mut keys = Keys::default();
        let n = 100_000;
        for i in 0..n {
            assert!(keys.insert(Counted(i, &comparisons)));
        }
        assert!(!keys.insert(Counted(n / 2, &comparisons)));
        assert!(!keys.insert(Counted(3, &comparisons)));
        // each key is compared with the few first ones, then only on a hash match: about one comparison a key
        // (a list would make n²/2 = 5·10⁹)
        assert!(
            comparisons.get() < 2 * n,
            "{} comparisons",
            comparisons.get()
        );
    }
}
