"""Resource accounting for trial placement (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actors._engine.placement import Placement


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
    p.release("t2")
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


def test_a_member_registering_again_keeps_its_books_while_it_holds_trials() -> None:
    """(A member heard from again after a silence, or its convention registration renewed: its running trial still
    holds its CPU, so nothing is placed beside it beyond the member's size.)"""
    p = Placement()
    p.add("a", {"cpu": 2}, address="addr")
    p.place("t1", "a", {"cpu": 1.0})
    p.add("a", {"cpu": 2}, address="addr")
    assert p.members["a"].trials == {"t1"} and p.free_slots({"cpu": 1.0}) == 1
    p.add("a", {"cpu": 4}, address="addr2")  # (its size and address are the new registration's)
    assert (p.members["a"].resources, p.members["a"].address, p.free_slots({"cpu": 1.0})) == ({"cpu": 4}, "addr2", 3)
    p.release("t1")
    p.add("a", {"cpu": 1}, address="addr3")  # idle: registered afresh
    assert (p.members["a"].used, p.free_slots({"cpu": 1.0})) == ({}, 1)


def test_a_member_holds_a_trial_that_needs_exactly_what_it_has_left() -> None:
    p = Placement()
    p.add("a", {"cpu": 2, "gpu": 1})
    need = {"cpu": 1.0, "gpu": 1.0}
    assert p.choose(need) == "a" and p.free_slots(need) == 1
    p.place("t1", "a", need)
    assert p.choose({"cpu": 1.0}) == "a" and p.choose(need) is None and p.free_slots(need) == 0
    assert p.free_slots({"cpu": 1.0, "tpu": 0.0}) == 1, "a zero amount asks for nothing"


def test_only_the_system_a_trial_was_placed_on_takes_it_and_resources_are_read_from_its_capabilities() -> None:
    from actors._engine.placement import MEMBER_CAP, RESOURCES_CAP, parse_resources, placed_here

    assert placed_here({MEMBER_CAP: "w1"}, {MEMBER_CAP: "w1"})
    assert not placed_here({MEMBER_CAP: "w2"}, {MEMBER_CAP: "w1"})
    assert not placed_here({}, {MEMBER_CAP: "w1"}), "a system that is no member takes no placed actor"
    assert placed_here({MEMBER_CAP: "w2"}, None) and placed_here({}, {}), "an actor placed nowhere goes anywhere"
    assert parse_resources({RESOURCES_CAP: {"cpu": 2, "gpu": "1"}}) == {"cpu": 2.0, "gpu": 1.0}
    assert parse_resources({}) == {} and parse_resources({RESOURCES_CAP: None}) == {}


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
            p.release(tid)
            placed.discard(tid)
        for member in p.members.values():
            assert 0 <= member.used.get("cpu", 0) <= member.resources["cpu"]
        assert p.free_slots(need) == 5 - len(placed)


def test_lost_members_cannot_hold_anything() -> None:
    p = Placement()
    p.add("big", {"cpu": 8, "gpu": 1})
    p.add("small", {"cpu": 1})
    need = {"gpu": 1.0}
    assert p.could_ever_fit(need)
    assert not p.could_ever_fit(need, {"big"})  # a silent member is no place to wait for


def test_only_the_registration_we_hold_can_leave() -> None:
    p = Placement()
    p.add("w1", {"cpu": 1}, address="old")
    assert p.is_current("w1", "old") and not p.is_current("w1", "new")
    p.add("w1", {"cpu": 1}, address="new")  # restarted with the same id from a new port
    assert p.is_current("w1", "new") and not p.is_current("w1", "old")
    assert not p.is_current("nobody", "new")


def test_member_restarted_with_same_id_keeps_its_new_registration() -> None:
    """w1 is SIGKILLed and restarted at once from a new port: its old trial fails (it died with it)
    and restarts, the new w1 stays a member when Thespian later expires the old registration.
    Driven through the experiment core with MemberJoined/MemberLeft events, as the shell sends them."""
    from actors._engine.signals import ActorKind, MemberJoined, MemberLeft, Retire, Spawn, Start, WatchMembers
    from actors._engine.trial import TrialStatus
    from actors.messages import ProbeStart, RunTrial
    from tests._core_harness import Harness, make_spec, of_type, sent

    h = Harness(make_spec(num_samples=1, max_concurrent=1, multi_host=True, leader_resources={}, max_failures=1))
    assert WatchMembers() in h.handle(Start(), at=0.0)
    h.ready()
    assert h.open_calls() == [], "no member yet: nothing can run"
    out = h.handle(MemberJoined("w1", {"cpu": 1.0}, "addr-1"), at=1.0)
    assert [(s.kind, s.member) for s in of_type(out, Spawn)] == [(ActorKind.PROBE, "w1")]
    assert [p.member_id for p in sent(out, ProbeStart)] == ["w1"]
    out = h.answer_all()
    [trial] = of_type(out, Spawn)
    assert (trial.kind, trial.member) == (ActorKind.TRIAL, "w1")
    [run] = sent(out, RunTrial, to=trial.handle)
    tid = run.trial_id
    assert h.core.members.where(tid) == "w1"

    out = h.handle(MemberJoined("w1", {"cpu": 1.0}, "addr-2"), at=2.0)  # restarted before its heartbeats stopped
    assert Retire(trial.handle) in out
    rec = h.core.table.get(tid)
    assert rec.status is TrialStatus.PENDING and rec.num_failures == 1, "the trial on the dead incarnation restarts"
    assert "lost contact with member 'w1'" in (rec.error or "")
    assert h.store.fenced == [tid], "what the old incarnation commits later is fenced off"
    assert [(s.kind, s.member) for s in of_type(out, Spawn)] == [(ActorKind.PROBE, "w1")], "a probe on the new w1"
    assert "w1" not in h.core.members.lost and h.core.members.placement.members["w1"].address == "addr-2"

    assert h.handle(MemberLeft("w1", "addr-1"), at=3.0) == [], "the old registration expires: nothing to do"
    assert "w1" not in h.core.members.lost and h.core.members.choose() == "w1"
    out = h.answer_all()
    [again] = of_type(out, Spawn)
    assert (again.kind, again.member) == (ActorKind.TRIAL, "w1")
    assert [(r.trial_id, r.run_id) for r in sent(out, RunTrial, to=again.handle)] == [(tid, 2)]

    out = h.handle(MemberLeft("w1", "addr-2"), at=4.0)  # the current one leaves: now it is gone
    assert "w1" in h.core.members.lost
    assert Retire(again.handle) in out
    assert rec.status is TrialStatus.ERROR and rec.num_failures == 2


def test_lost_members_get_no_trials() -> None:
    p = Placement()
    p.add("a", {"cpu": 4})
    p.add("b", {"cpu": 1})
    need = {"cpu": 1.0}
    assert p.choose(need) == "a" and p.free_slots(need) == 5
    assert p.choose(need, {"a"}) == "b" and p.free_slots(need, {"a"}) == 1
    assert p.choose(need, {"a", "b"}) is None and p.free_slots(need, {"a", "b"}) == 0
