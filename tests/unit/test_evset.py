"""The EV set: rotation, spraying choice, retirement, replacement, probes, denial."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from hosts.config import ConfigError, ProtocolConfig
from hosts.evset import ASSUMED_BAD, DENIED, GOOD, SKIP, EvSet, EvSetError
from hosts.protocol import ev_choice, ev_plane, make_ev
from hosts.sender import Sender
from topologies.model import load_topology
from topologies.paths import choices_per_plane, path_for_ev


def make(planes=2, paths=2, per_plane=4, seed=1):
    return EvSet(planes, paths, per_plane, random.Random(seed))


def ready(plane):
    return True


def test_rotation_interleaves_planes_and_covers_paths_evenly():
    evs = make(planes=3, paths=2, per_plane=4)
    assert [e.plane for e in evs.rotation[:6]] == [0, 1, 2, 0, 1, 2]
    assert len(evs.rotation) == 12
    per_path = Counter(e.key for e in evs.rotation)
    assert set(per_path.values()) == {2}  # 4 EVs over 2 paths: 2 each
    for e in evs.rotation:
        assert ev_plane(e.ev) == e.plane  # the EV rule of hosts/protocol.py
        assert evs.path_key(e.ev) == e.key


def test_evs_name_the_paths_of_the_catalogue():
    fabric = load_topology("2tier-2plane")
    paths = choices_per_plane(fabric, 0, 3)
    evs = make(planes=fabric.spec.planes, paths=paths, per_plane=paths * 2)
    for e in evs.rotation:
        path = path_for_ev(fabric, 0, 3, e.ev)
        assert (path.plane, path.spine) == (e.plane, e.key[1])


def test_ev_count_is_split_over_the_planes_and_defaults_to_eight_per_plane():
    config = ProtocolConfig()
    # Eight per plane whatever the plane's paths; ev_count (OCP MRC's name) is the
    # connection's total, rounded down to a multiple of the planes, at most 256.
    assert config.evs_for(1) == 8 and config.evs_for(8) == 8 and config.evs_for(32) == 8
    assert ProtocolConfig(ev_count=20).evs_for(3) == 6
    assert ProtocolConfig(ev_count=2).evs_for(4) == 1  # at least one per plane
    assert ProtocolConfig(ev_count=256).evs_for(2) == 128
    with pytest.raises(ConfigError, match="protocol.ev_count: at most 256"):
        ProtocolConfig(ev_count=257)
    with pytest.raises(ConfigError, match="protocol.ev_min_active: must not be above ev_count"):
        ProtocolConfig(ev_count=2, ev_min_active=3)
    # The old per-plane setting is refused with its replacement named.
    with pytest.raises(ConfigError, match="protocol.evs_per_plane: renamed; use ev_count"):
        ProtocolConfig.with_overrides({"evs_per_plane": 4})


def ev_set(me, peer, conn_id, seed=0, planes=2, paths=2):
    config = ProtocolConfig(ev_seed=seed)
    sender = Sender(me, peer, conn_id, planes, paths, config, lambda e: None,
                    lambda *a: None)
    return sender.evs


def test_ev_sets_are_random_per_connection_and_repeat_with_the_seed():
    a, b = ev_set(0, 3, 3), ev_set(1, 3, 1 << 16 | 3)
    values = [e.ev for e in a.rotation]
    assert values != [e.ev for e in b.rotation]  # two connections, two sets
    assert not set(values) & {e.ev for e in b.rotation}
    assert values == [e.ev for e in ev_set(0, 3, 3).rotation]  # same seed: same set
    assert values != [e.ev for e in ev_set(0, 3, 3, seed=1).rotation]
    # The choice bits are drawn from the whole field, not a few small numbers.
    assert max(ev_choice(v) for v in values) > 1 << 20


def test_every_plane_gets_an_equal_share_and_paths_differ_by_at_most_one():
    evs = make(planes=4, paths=3, per_plane=8, seed=5)
    assert Counter(e.plane for e in evs.rotation) == {p: 8 for p in range(4)}
    for plane in range(4):
        use = Counter(e.key[1] for e in evs.rotation if e.plane == plane)
        assert set(use) == {0, 1, 2} and max(use.values()) - min(use.values()) <= 1
    # Fewer EVs than paths: a random subset of distinct paths, different per seed.
    subsets = {frozenset(e.key for e in make(planes=1, paths=16, per_plane=4, seed=s).rotation)
               for s in range(1, 6)}
    assert all(len(keys) == 4 for keys in subsets) and len(subsets) > 1


def test_pick_walks_the_rotation_and_skips_a_skip_ev_once():
    evs = make(per_plane=2)
    order = [evs.pick(ready) for _ in range(4)]
    assert order == evs.rotation
    evs.rotation[1].state = SKIP
    again = [evs.pick(ready) for _ in range(4)]
    assert evs.rotation[1] not in again
    assert evs.rotation[1].state == GOOD  # passed over once, then back in use


def test_pick_prefers_the_less_loaded_neighbour():
    evs = make(per_plane=2)
    first, second = evs.rotation[0], evs.rotation[1]
    first.inflight = 5
    assert evs.pick(ready) is second


def test_pick_respects_planes_that_may_not_send_now():
    evs = make(per_plane=2)
    picked = [evs.pick(lambda p: p == 1) for _ in range(4)]
    assert {e.plane for e in picked} == {1}
    assert evs.pick(lambda p: False) is None


def test_retire_takes_every_ev_of_the_path_and_replaces_it_in_the_same_plane():
    evs = make(planes=2, paths=2, per_plane=4)
    victim = evs.rotation[0]
    retired = evs.retire(victim, now=1.0, probe_wait=0.05)
    assert {e.key for e in retired} == {victim.key} and len(retired) == 2
    assert all(e.state == ASSUMED_BAD and not e.active for e in retired)
    plane = [e for e in evs.rotation if e.plane == victim.plane]
    assert len(plane) == 4  # the plane keeps its share
    assert all(e.key != victim.key and e.state == GOOD for e in plane)
    assert victim.key in evs.bad and evs.bad[victim.key].probe_at == pytest.approx(1.05)
    assert evs.retire(victim, 1.1, 0.05) == []  # already retired


def test_replacement_takes_the_least_used_good_path_once_the_backups_are_used_up():
    evs = make(planes=1, paths=4, per_plane=4)
    evs.backups[0].clear()
    victim = evs.rotation[0]
    evs.retire(victim, 0.0, 0.05)  # its path bad; the three others hold one EV each
    new = evs.rotation[0]
    assert new.key != victim.key and new.state == GOOD
    assert sorted(Counter(e.key[1] for e in evs.rotation).values()) == [1, 1, 2]
    # The next one goes to a path that holds one EV, not to the one that holds two.
    second = next(e for e in evs.rotation if e.key != new.key)
    evs.retire(second, 0.1, 0.05)
    assert sorted(Counter(e.key[1] for e in evs.rotation).values()) == [2, 2]


def test_a_plane_with_every_path_bad_shrinks_until_a_probe_answers():
    evs = make(planes=2, paths=1, per_plane=2)
    evs.retire(evs.rotation[0], 0.0, 0.05)
    assert all(e.plane == 1 for e in evs.rotation) and len(evs.rotation) == 2
    back = evs.reinstate((0, 0))
    assert len(back) == 2 and all(e.state == GOOD for e in back)
    assert sum(e.plane == 0 for e in evs.rotation) == 2


def test_a_reinstated_path_takes_back_its_share_of_the_plane():
    evs = make(planes=1, paths=2, per_plane=2)
    first = evs.rotation[0]
    evs.retire(first, 0.0, 0.05)  # replaced by an EV on the other path
    other = 1 - first.key[1]
    assert [e.key[1] for e in evs.rotation] == [other, other]
    busy, stand_in = evs.rotation
    busy.inflight = 2
    stand_in.inflight = 1
    stand_in.outstanding.append(object())  # a packet still in flight on it
    assert evs.reinstate(first.key) == [first]
    # The plane spreads over both paths again: the less loaded EV of the crowded path
    # made way, and drains what it has in flight.
    assert first.active and first.state == GOOD and first in evs.rotation
    assert sorted(e.key[1] for e in evs.rotation) == [0, 1] and busy.active
    assert stand_in in evs.backups[0] and not stand_in.active and stand_in in evs.draining
    # The next retirement takes the backup rather than making a new EV.
    evs.retire(first, 0.1, 0.05)
    assert stand_in.active and stand_in in evs.rotation


def longest_run(evs: EvSet, plane: int) -> int:
    """The most consecutive EVs of one path in the plane's turn of the rotation."""
    keys = [e.key[1] for e in evs.rotation if e.plane == plane]
    longest = run = 1
    for a, b in zip(keys, keys[1:]):
        run = run + 1 if a == b else 1
        longest = max(longest, run)
    return longest


@pytest.mark.parametrize("seed", range(5))
def test_paths_back_in_use_are_spread_around_the_rotation_not_bunched(seed):
    # Cluster D's one plane: 4 paths, 128 EVs. Two paths fail and come back; each
    # returning EV took the slot of an EV of the busiest path, one after another, so
    # the path got runs of 30 of the plane's packets in a row before the spread.
    evs = EvSet(2, 4, 128, random.Random(seed))
    assert longest_run(evs, 0) == 1
    for path in (0, 1):
        evs.retire(next(e for e in evs.rotation if e.key == (0, path)), 1.0, 0.05)
        assert longest_run(evs, 0) == 1
    for path in (0, 1):
        evs.reinstate((0, path), 5.0)
        assert longest_run(evs, 0) == 1
    keys = [e.key[1] for e in evs.rotation if e.plane == 0]
    # Every window of 4 consecutive packets of the plane visits every path once.
    assert all(sorted(keys[i:i + 4]) == [0, 1, 2, 3] for i in range(0, 128, 4))
    # The planes still alternate.
    assert [e.plane for e in evs.rotation] == [0, 1] * 128


def test_reinstated_evs_beyond_the_plane_share_become_backups():
    evs = make(planes=1, paths=2, per_plane=4)
    on_0 = [e for e in evs.rotation if e.key == (0, 0)]
    evs.retire(on_0[0], 0.0, 0.05)  # both EVs of path 0 retired, path 1 holds all 4
    extra = evs._new_ev(0, 0)  # a third EV of path 0, retired with it
    extra.state = ASSUMED_BAD
    evs.bad[(0, 0)].evs.append(extra)
    back = evs.reinstate((0, 0))
    assert len(back) == 3 and all(e.state == GOOD for e in back)
    assert Counter(e.key[1] for e in evs.rotation) == {0: 2, 1: 2}  # even again
    assert sum(e in evs.backups[0] for e in back) == 1  # the third is a spare


def test_a_backup_on_a_path_that_fails_is_retired_with_it_and_never_used():
    evs = make(planes=1, paths=2, per_plane=2)
    on_path_0 = next(e for e in evs.rotation if e.key == (0, 0))
    (drawn,) = [e for e in evs.backups[0] if e.key == (0, 0)]  # drawn at set-up
    used = evs._new_ev(0, 0)  # a spare that has carried packets (a migrated EV)
    used.last_sent = 0.0
    evs.backups[0].append(used)
    retired = evs.retire(on_path_0, 0.0, 0.05)
    assert {drawn.state, used.state} == {ASSUMED_BAD}
    assert drawn not in evs.backups[0] and used not in evs.backups[0]
    assert all(e.key == (0, 1) for e in evs.rotation)
    # What was in use is reported; a backup never sent on shares the path's fate
    # without a report, and comes back with it the same way.
    assert retired == [on_path_0, used]
    assert evs.reinstate((0, 0), 1.0) == [on_path_0, used]
    assert drawn.state == GOOD and drawn in evs.backups[0]


def test_due_probes_back_off_while_unanswered_and_wait_for_the_plane():
    evs = make()
    evs.retire(evs.rotation[0], 0.0, 0.05)
    assert evs.due_probes(0.04, 0.8) == []
    (bad,) = evs.due_probes(0.05, 0.8, bound=0.01)
    assert bad.probes == 1 and bad.pending == (1, 0.05)
    assert evs.due_probes(0.055, 0.8, bound=0.01) == []  # its reply may still come
    # Unanswered past the bound: a failure; the wait doubles from the probe's send.
    assert evs.due_probes(0.07, 0.8, bound=0.01) == [] and evs.unanswered == [bad]
    assert bad.pending is None and bad.probe_at == pytest.approx(0.15)
    evs.set_plane(0, False)
    assert evs.due_probes(1.0, 0.8) == []  # nothing to probe on a plane that is down
    evs.set_plane(0, True)
    assert evs.due_probes(1.0, 0.8) == [bad]
    assert evs.due_probes(2.0, 0.2, bound=0.01) == [bad] and bad.wait == pytest.approx(0.2)


def probe_and_answer(evs, key, now, ok=True, after=0.001, bound=0.05, needed=3):
    """Send the path's due probe at `now` and answer it `after` later."""
    (bad,) = evs.due_probes(now, 0.8, bound)
    return evs.probe_answered(key, bad.pending[0], now + after, ok, bound, needed, 0.01, 0.8)


def test_a_path_returns_after_successes_in_a_row_spaced_apart():
    evs = make(planes=1, paths=2, per_plane=2)
    victim = evs.rotation[0]
    evs.retire(victim, 0.0, 0.05)
    assert probe_and_answer(evs, victim.key, 0.05) is False  # one success of three
    bad = evs.bad[victim.key]
    assert bad.successes == 1 and bad.probe_at == pytest.approx(0.061)  # the spacing
    assert evs.due_probes(0.055, 0.8, 0.05) == []
    assert probe_and_answer(evs, victim.key, 0.062) is False
    assert probe_and_answer(evs, victim.key, 0.074) is True  # the third in a row
    assert evs.reinstate(victim.key, 0.075) and victim.state == GOOD


@pytest.mark.parametrize("ok, after", [(False, 0.001), (True, 0.06)])
def test_a_marked_or_late_reply_is_a_failure_and_starts_the_count_again(ok, after):
    evs = make(planes=1, paths=2, per_plane=2)
    victim = evs.rotation[0]
    evs.retire(victim, 0.0, 0.05)
    assert probe_and_answer(evs, victim.key, 0.05) is False
    assert probe_and_answer(evs, victim.key, 0.062, ok=ok, after=after) is False
    bad = evs.bad[victim.key]
    assert bad.successes == 0 and bad.wait == pytest.approx(0.1)
    assert bad.probe_at == pytest.approx(0.162)  # the doubled wait, from that probe's send


def test_a_duplicate_or_stray_reply_counts_for_nothing():
    evs = make(planes=1, paths=2, per_plane=2)
    victim = evs.rotation[0]
    evs.retire(victim, 0.0, 0.05)
    (bad,) = evs.due_probes(0.05, 0.8, 0.05)
    seq = bad.pending[0]
    assert evs.probe_answered(victim.key, seq + 1, 0.051, True, 0.05, 2, 0.01, 0.8) is None
    assert evs.probe_answered(victim.key, seq, 0.051, True, 0.05, 2, 0.01, 0.8) is False
    # The same reply again (it came on two reverse EVs): not a second success.
    assert evs.probe_answered(victim.key, seq, 0.052, True, 0.05, 2, 0.01, 0.8) is None
    assert bad.successes == 1


def test_the_backoff_outlives_a_reinstatement_and_decays_with_good_service():
    evs = make(planes=1, paths=2, per_plane=2)
    victim = evs.rotation[0]
    evs.retire(victim, 0.0, 0.05, 0.8)
    evs.bad[victim.key].wait = 0.2  # two unanswered probes so far
    evs.reinstate(victim.key, 1.0)
    # Retired again at once: twice the wait it had reached, not the 50 ms minimum.
    evs.retire(victim, 1.01, 0.05, 0.8)
    assert evs.bad[victim.key].probe_at == pytest.approx(1.41)
    evs.reinstate(victim.key, 2.0)  # reached 0.4
    # Good for 1.2 s: 0.8 (doubled, capped) halved after 0.8 s, and again after 0.4 s.
    evs.retire(victim, 3.2, 0.05, 0.8)
    assert evs.bad[victim.key].wait == pytest.approx(0.2)
    evs.reinstate(victim.key, 4.0)
    evs.retire(victim, 100.0, 0.05, 0.8)  # long ago: afresh
    assert evs.bad[victim.key].wait == pytest.approx(0.05)


def test_preferred_paths_only_and_fallback_while_they_are_bad():
    # A same-rack pair: path 0 is the direct one, 1 and 2 detours over spines.
    direct = EvSet(2, 3, 4, random.Random(1), preferred=(0,))
    assert {e.key[1] for e in direct.rotation} == {0}
    direct.retire(direct.rotation[0], 0.0, 0.05)  # the direct path of plane 0 fails
    assert {e.plane for e in direct.rotation} == {1}  # plane 0 shrinks: no detour
    assert direct.migrate(direct.rotation[0]) is None  # nowhere else to go
    fallback = EvSet(2, 3, 4, random.Random(1), preferred=(0,), fallback=(1, 2))
    fallback.retire(fallback.rotation[0], 0.0, 0.05)
    detours = [e for e in fallback.rotation if e.plane == 0]
    assert len(detours) == 4 and {e.key[1] for e in detours} <= {1, 2}
    # The direct path back: every detour EV makes way for it.
    fallback.reinstate((0, 0), 1.0)
    assert {e.key for e in fallback.rotation if e.plane == 0} == {(0, 0)}
    assert all(not e.active for e in detours)
    with pytest.raises(EvSetError, match="must be among the plane's 3"):
        EvSet(1, 3, 4, random.Random(1), preferred=(3,))


def test_plane_down_takes_its_evs_out_of_the_walk_and_back():
    evs = make()
    evs.set_plane(1, False)
    assert {evs.pick(ready).plane for _ in range(8)} == {0}
    evs.set_plane(1, True)
    assert {evs.pick(ready).plane for _ in range(8)} == {0, 1}


def test_a_planes_return_starts_its_bad_paths_probes_afresh():
    evs = make()
    on_1, on_0 = (next(e for e in evs.rotation if e.plane == p) for p in (1, 0))
    for ev in (on_1, on_0):
        evs.retire(ev, 0.0, 0.05, 3.2)
    for second in range(1, 5):  # four unanswered probes each: waits of 0.8 s
        for bad in evs.due_probes(float(second), 3.2):
            evs.probe_failed(bad, 3.2)
    assert {bad.wait for bad in evs.bad.values()} == {0.8}
    evs.set_plane(1, False, 10.0)
    evs.set_plane(1, True, 12.0, probe_wait=0.05)
    back, other = evs.bad[on_1.key], evs.bad[on_0.key]
    assert (back.wait, back.probe_at, back.pending) == (0.05, 12.05, None)
    assert back in evs.due_probes(12.05, 3.2)
    assert other.wait == 0.8  # another plane's path keeps the backoff it earned


def test_denied_ev_is_never_picked_and_is_replaced_then_allowed_back():
    evs = make(per_plane=2)
    victim = evs.rotation[0]
    evs.deny(victim.ev)
    assert victim.state == DENIED and not victim.active
    assert victim not in {evs.pick(ready) for _ in range(20)}
    assert sum(e.plane == victim.plane for e in evs.rotation) == 2
    # The path is denied, not the value alone: nothing of the plane is on it any more.
    assert all(e.key != victim.key for e in evs.rotation)
    # Allowed back: the EV, and the backup of the plane drawn on its path.
    (backup,) = [e for e in evs.by_ev.values() if e.key == victim.key and e is not victim]
    assert [e.ev for e in evs.allow(victim.ev)] == [victim.ev, backup.ev]
    # Back with its share of the plane, as after a reinstatement (one EV per path).
    assert victim.state == GOOD and victim.active
    assert Counter(e.key for e in evs.rotation if e.plane == victim.plane) == {
        (victim.plane, 0): 1, (victim.plane, 1): 1}
    with pytest.raises(EvSetError, match="is not denied"):
        evs.allow(victim.ev)


def test_deny_an_unknown_ev_of_a_missing_plane_is_an_error():
    evs = make(planes=2)
    with pytest.raises(EvSetError, match="plane 5"):
        evs.deny(make_ev(5, 0))
    # known plane: remembered as denied, with every EV of the path it names (77 % 2: 1),
    # its two active EVs and the plane's two backups on it
    denied = evs.deny(make_ev(1, 77))
    assert denied[0].ev == make_ev(1, 77) and {e.state for e in denied} == {DENIED}
    assert {e.key for e in denied} == {(1, 1)} and len(denied) == 5


def test_a_denied_path_gets_no_new_ev_and_a_denied_plane_empties():
    evs = make(planes=2, paths=2, per_plane=4)
    for path in (0, 1):
        evs.deny(make_ev(1, path))
    assert {e.plane for e in evs.rotation} == {0} and evs.sendable == [0]
    # Retiring and migrating on plane 0 never lands on plane 1's denied paths either.
    evs.retire(evs.rotation[0], 0.0, 0.05)
    assert all(e.key not in evs.denied for e in evs.rotation)
    # A path allowed again fills its plane up to its quota.
    evs.allow(make_ev(1, 0))
    assert Counter(e.key for e in evs.rotation if e.plane == 1) == {(1, 0): 4}


def test_denying_a_retired_path_stops_its_probes_and_allowing_makes_it_good():
    evs = make(planes=1, paths=2, per_plane=2)
    bad = evs.rotation[0]
    evs.retire(bad, 0.0, 0.05)
    assert bad.key in evs.bad
    evs.deny(bad.ev)
    assert bad.key not in evs.bad and evs.due_probes(1.0, 0.8) == []
    evs.allow(bad.ev)
    assert bad.state == GOOD and bad.key not in evs.bad


def test_replace_puts_the_new_ev_in_the_slot_of_the_old_one():
    evs = make(planes=2, paths=2, per_plane=2)
    old = evs.rotation[1]
    index = evs.rotation.index(old)
    new_value = make_ev(old.plane, 1000 + old.key[1] + 1)  # the plane's other path
    gone, new = evs.replace(old.ev, new_value)
    assert gone is old and evs.rotation[index] is new and new.active and new.state == GOOD
    assert old.ev not in evs.by_ev and new.key == (old.plane, (old.key[1] + 1) % 2)
    with pytest.raises(EvSetError, match="stays in the plane"):
        evs.replace(new.ev, make_ev(1 - new.plane, 5))
    with pytest.raises(EvSetError, match="not in the connection's set"):
        evs.replace(old.ev, make_ev(old.plane, 7))
    with pytest.raises(EvSetError, match="in the set already"):
        evs.replace(new.ev, evs.rotation[0].ev if evs.rotation[0].plane == new.plane
                    else evs.rotation[2].ev)


def test_an_explicit_array_is_the_set_and_draws_no_ev_of_its_own():
    evs = make(planes=2, paths=2, per_plane=4)
    evs.deny(make_ev(1, 1))
    array = [make_ev(0, 10), make_ev(1, 20), make_ev(0, 11), make_ev(1, 21)]
    made = evs.set_explicit(array)
    assert [e.ev for e in made] == array and evs.explicit and evs.quota == [2, 2]
    assert [e.ev for e in evs.rotation] == [make_ev(0, 10), make_ev(1, 20), make_ev(0, 11)]
    assert evs.by_ev[make_ev(1, 21)].state == DENIED  # on the denied path (21 % 2 = 1)
    assert evs.ev_count == 4
    # A retirement without a spare leaves the slot empty: nothing new is drawn.
    evs.retire(evs.by_ev[make_ev(0, 10)], 0.0, 0.05)
    assert set(evs.by_ev) == set(array) and [e.ev for e in evs.rotation] == [
        make_ev(1, 20), make_ev(0, 11)]
    evs.reinstate((0, 0), 1.0)
    assert evs.by_ev[make_ev(0, 10)].active
    with pytest.raises(EvSetError, match="twice"):
        evs.set_explicit([make_ev(0, 1), make_ev(0, 1)])
    with pytest.raises(EvSetError, match="plane 3"):
        evs.set_explicit([make_ev(3, 1)])


def test_bad_constructor_arguments():
    with pytest.raises(EvSetError):
        EvSet(0, 2, 2, random.Random(1))
