"""The table of per-group gauges (app/api/group_table.py): at most `cap` groups, the least recently updated one's
row taken for a new group, rows shared by every process that maps the same file."""

from __future__ import annotations

import multiprocessing

from app.api.group_table import GroupTable

GAUGES = ["rscore", "consumers", "moves"]


def groups_of(table: GroupTable, gauge: str) -> dict[str, float]:
    return dict(table.series()[gauge])


def test_a_full_table_drops_the_least_recently_updated_group():
    table = GroupTable(GAUGES, cap=2)
    table.set("a", {"rscore": 0.5, "consumers": 3})
    table.set("b", {"rscore": 0.1})
    table.set("a", {"moves": 7})  # a is now the most recent
    table.set("c", {"rscore": 0.2})
    assert groups_of(table, "rscore") == {"a": 0.5, "c": 0.2}
    assert groups_of(table, "consumers") == {"a": 3} and groups_of(table, "moves") == {"a": 7}
    assert [group for group, _ in table.series()["rscore"]] == ["a", "c"]  # in the order they were updated


def test_a_forgotten_group_has_no_series_and_its_row_is_reused():
    table = GroupTable(GAUGES, cap=2)
    table.set("a", {"rscore": 1.0})
    table.set("b", {"rscore": 2.0})
    table.forget("a")
    table.set("c", {"consumers": 4})
    assert groups_of(table, "rscore") == {"b": 2.0} and groups_of(table, "consumers") == {"c": 4}
    assert table.series()["moves"] == []


def test_a_cap_of_zero_keeps_no_series():
    table = GroupTable(GAUGES, cap=0)
    table.set("a", {"rscore": 1.0})
    assert table.series() == {gauge: [] for gauge in GAUGES}


def _update(path: str, name: str, rounds: int) -> None:
    table = GroupTable(GAUGES, cap=3, path=path)  # type: ignore[arg-type]
    for i in range(rounds):
        table.set(f"{name}-{i % 5}", {"rscore": float(i), "consumers": 1})


def test_processes_mapping_one_file_share_one_table_and_one_cap(tmp_path):
    """Four processes update 5 groups each, at once: the table holds 3 groups, each row whole, and a group one
    process forgets is gone for all."""
    path = tmp_path / "groups.table"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_update, args=(str(path), f"w{w}", 200)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    reader = GroupTable(GAUGES, cap=3, path=path)
    seen = groups_of(reader, "rscore")
    assert len(seen) == 3 and groups_of(reader, "consumers") == dict.fromkeys(seen, 1)
    gone = next(iter(seen))
    GroupTable(GAUGES, cap=3, path=path).forget(gone)
    assert gone not in groups_of(reader, "rscore") and len(groups_of(reader, "rscore")) == 2
