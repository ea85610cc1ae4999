"""Resource accounting for trial placement (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actors._placement import Placement


def test_spreads_and_respects_capacity() -> None:
    p = Placement()
    p.add("a", {"cpu": 2})
    p.add("b", {"cpu": 1})
    need = {"cpu": 1.0}
    assert p.free_slots(need) == 3
    first = p.choose(need)
    assert first == "a"  # most free CPU first
    p.place("t1", first, need)
    p.place("t2", p.choose(need) or "", need)
    p.place("t3", p.choose(need) or "", need)
    assert p.choose(need) is None and p.free_slots(need) == 0
    p.release("t2", need)
    assert p.free_slots(need) == 1


def test_gpu_trials_only_where_gpus_are() -> None:
    p = Placement()
    p.add("cpu-box", {"cpu": 8})
    p.add("gpu-box", {"cpu": 2, "gpu": 1})
    need = {"cpu": 1.0, "gpu": 1.0}
    assert p.choose(need) == "gpu-box"
    p.place("t", "gpu-box", need)
    assert p.choose(need) is None and p.could_ever_fit(need)
    assert not p.could_ever_fit({"gpu": 2.0})


def test_removed_member_returns_its_trials() -> None:
    p = Placement()
    p.add("a", {"cpu": 2})
    p.place("t1", "a", {"cpu": 1.0})
    assert p.remove("a") == ["t1"]
    assert p.free_slots({"cpu": 1.0}) == 0


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=60))
def test_never_overcommits(ops: list[tuple[bool, int]]) -> None:
    p = Placement()
    p.add("a", {"cpu": 2})
    p.add("b", {"cpu": 3})
    need = {"cpu": 1.0}
    placed: set[str] = set()
    for place, n in ops:
        tid = f"t{n}"
        if place and tid not in placed:
            m = p.choose(need)
            if m is not None:
                p.place(tid, m, need)
                placed.add(tid)
        elif not place and tid in placed:
            p.release(tid, need)
            placed.discard(tid)
        for member in p.members.values():
            assert 0 <= member.used.get("cpu", 0) <= member.resources["cpu"]
        assert p.free_slots(need) == 5 - len(placed)
