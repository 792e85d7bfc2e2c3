"""Redis keys (issue #13): whatever the group names and Idempotency-Keys, no two (group, kind, key) share a
Redis key, and every key of a group carries the same hash tag (one group = one Redis Cluster slot)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from app.codec.wire import GROUP_PATTERN
from app.store.groups import redis_key

KINDS = ("state", "history", "rates", "idempotency")
# the group alphabet, weighted towards what could forge a key: braces, colons, percent signs, kind names
groups = st.one_of(
    st.from_regex(GROUP_PATTERN, fullmatch=True),
    st.lists(st.sampled_from(["{", "}", ":", "%", "7D", "%7D", "g", "state", "idempotency", "Y"]), min_size=1).map(
        "".join
    ),
)
idempotency_keys = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.lists(st.sampled_from(["}", "{", ":", "state", "Y", "history", "%3A"]), max_size=6).map("".join),
)
things = st.tuples(groups, st.sampled_from(KINDS), idempotency_keys).map(
    lambda t: (t[0], t[1], t[2] if t[1] == "idempotency" else None)
)


def hash_tag(key: str) -> str:
    """What Redis Cluster hashes: the text between the first '{' and the next '}', if not empty."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key[start + 1 : end] if start >= 0 and end > start + 1 else key


@settings(max_examples=200)
@given(st.lists(things, min_size=2, max_size=12, unique=True))
def test_no_two_things_share_a_key(items):
    keys = [redis_key("groupfit", *item) for item in items]
    assert len(set(keys)) == len(keys)


@settings(max_examples=300)
@given(groups, st.lists(idempotency_keys, max_size=5), groups)
def test_a_groups_keys_share_one_hash_tag_and_other_groups_have_another(group, keys, other):
    tags = {hash_tag(redis_key("groupfit", group, kind)) for kind in KINDS}
    tags |= {hash_tag(redis_key("groupfit", group, "idempotency", key)) for key in keys if key is not None}
    assert len(tags) == 1
    if other != group:
        assert hash_tag(redis_key("groupfit", other, "state")) not in tags


def test_the_issues_pair_no_longer_collides_and_plain_names_keep_their_keys():
    assert redis_key("groupfit", "g", "idempotency", "Y}:state") != redis_key("groupfit", "g}:idempotency:Y", "state")
    assert redis_key("groupfit", "orders", "state") == "groupfit:{orders}:state"  # stored data stays where it was
    assert re.fullmatch(r"groupfit:\{g\}:idempotency:[0-9a-f]{64}", redis_key("groupfit", "g", "idempotency", "k"))
