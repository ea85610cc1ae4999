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


class _Host:
    """Just enough of a controller for ClusterMixin's membership bookkeeping (no actor system)."""

    def __init__(self) -> None:
        from types import SimpleNamespace

        from actors._shell.controller_cluster import ClusterMixin

        class Host(ClusterMixin):
            def __init__(self) -> None:
                self.spec = SimpleNamespace(multi_host=True, leader_resources={}, heartbeat_interval_s=1.0,
                                            heartbeat_timeout_s=10.0, resources_per_trial=None)
                self.gone: list[tuple[str, str]] = []
                self._cluster_init()

            def notifyOnSystemRegistrationChanges(self, on: bool) -> None:
                pass

            def createActor(self, *args: object, **kwargs: object) -> object:
                return object()

            def send(self, *args: object) -> None:
                pass

            def _fill(self) -> None:
                pass

            def _host_lost(self, trial_id: str, member: str, why: str) -> None:
                self.gone.append((trial_id, why))
                self.placement.release(trial_id, {"cpu": 1.0})

        self.host = Host()

    def update(self, member: str, address: str, added: bool) -> None:
        from types import SimpleNamespace

        from actors._engine.placement import MEMBER_CAP, RESOURCES_CAP

        self.host.receiveMsg_ActorSystemConventionUpdate(SimpleNamespace(
            remoteCapabilities={MEMBER_CAP: member, RESOURCES_CAP: {"cpu": 1}},
            remoteAdminAddress=address, remoteAdded=added), None)


def test_member_restarted_with_same_id_keeps_its_new_registration() -> None:
    """w1 is SIGKILLed and restarted at once from a new port: its old trials fail (they died with
    it), the new w1 stays a member when Thespian later expires the old registration."""
    c = _Host()
    c.update("w1", "addr-1", True)
    c.host.placement.place("t1", "w1", {"cpu": 1.0})
    c.update("w1", "addr-2", True)
    assert [t for t, _ in c.host.gone] == ["t1"], "the trial on the dead incarnation restarts"
    assert "w1" not in c.host.lost and c.host.placement.members["w1"].address == "addr-2"
    c.update("w1", "addr-1", False)  # the old registration expires
    assert "w1" not in c.host.lost and c.host.placement.choose({"cpu": 1.0}) == "w1"
    c.update("w1", "addr-2", False)  # the current one leaves: now it is gone
    assert "w1" in c.host.lost


def test_lost_members_get_no_trials() -> None:
    p = Placement()
    p.add("a", {"cpu": 4})
    p.add("b", {"cpu": 1})
    need = {"cpu": 1.0}
    assert p.choose(need) == "a" and p.free_slots(need) == 5
    assert p.choose(need, {"a"}) == "b" and p.free_slots(need, {"a"}) == 1
    assert p.choose(need, {"a", "b"}) is None and p.free_slots(need, {"a", "b"}) == 0
