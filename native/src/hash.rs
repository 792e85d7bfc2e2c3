//! The hash maps of the compiled core: foldhash (seeded once per process, so a request cannot choose keys that
//! collide) instead of std's SipHash, which took a quarter of reading a 1 000-partition request's JSON.

pub type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type Set<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
