//! Names as small integers: the one interner for topics and consumer ids, whichever way they come (the
//! request's JSON, the reference's Python objects, the ids the pool mints).

use crate::hash::Map;

/// Not a name: an empty slot, a partition without a consumer.
pub const NONE: u32 = u32::MAX;

/// Each distinct name once, numbered in the order first seen, with the names met lately in front of the map:
/// keys come grouped by topic or cycling through a few, so most lookups end in a slot without hashing the
/// whole name (a slot that holds another name only costs the map lookup).
#[derive(Clone)]
pub struct Interner {
    names: Vec<String>,
    ids: Map<String, u32>,
    recent: [u32; 64],
}

impl Default for Interner {
    fn default() -> Self {
        Interner {
            names: vec![],
            ids: Map::default(),
            recent: [NONE; 64],
        }
    }
}

impl Interner {
    /// The recent slot of a name: names like "orders-3" differ at the end, so the last two bytes, the first and
    /// the length.
    fn slot(name: &str) -> usize {
        let b = name.as_bytes();
        let at = |i: usize| b.get(i).map_or(0, |&c| c as usize);
        let n = b.len();
        let h = ((n * 31 + at(0)) * 31 + at(n.wrapping_sub(2))) * 31 + at(n.wrapping_sub(1));
        (h ^ h >> 6) & 63
    }

    /// `name`'s number, given it one if it is new and `admit` takes it; None when it is new and refused.
    pub fn intern(&mut self, name: &str, admit: impl FnOnce(&str) -> bool) -> Option<u32> {
        let slot = Self::slot(name);
        let recent = self.recent[slot];
        if recent != NONE && self.names[recent as usize] == name {
            return Some(recent);
        }
        let id = match self.ids.get(name) {
            Some(&id) => id,
            None => {
                if !admit(name) {
                    return None;
                }
                let id = self.names.len() as u32;
                self.ids.insert(name.to_owned(), id);
                self.names.push(name.to_owned());
                id
            }
        };
        self.recent[slot] = id;
        Some(id)
    }

    /// Room for `more` names without growing the map.
    pub fn reserve(&mut self, more: usize) {
        self.ids.reserve(more);
        self.names.reserve(more);
    }

    /// `name`'s number, new or not.
    pub fn id(&mut self, name: &str) -> u32 {
        self.intern(name, |_| true).unwrap_or(NONE)
    }

    /// `name`'s number if it has one.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_each_name_once_in_the_order_seen() {
        let mut names = Interner::default();
        assert_eq!(names.id("orders-1"), 0);
        assert_eq!(names.id("orders-2"), 1);
        assert_eq!(names.id("orders-1"), 0);
        assert_eq!(names.intern("", |n| !n.is_empty()), None);
        assert_eq!(names.intern("x", |n| !n.is_empty()), Some(2));
        assert_eq!(names.get("orders-2"), Some(1));
        assert_eq!(names.get("nope"), None);
        assert_eq!(names.names(), ["orders-1", "orders-2", "x"]);
        // names sharing a recent slot (same length, first and last two bytes) stay apart
        assert_eq!(names.id("ab-c"), 3);
        assert_eq!(names.id("aX-c"), 4);
        assert_eq!((names.id("ab-c"), names.name(4)), (3, "aX-c"));
    }
}
