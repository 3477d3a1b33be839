"""The server-side assignors as pure functions: every subscribed partition assigned exactly once,
balance, stickiness (uniform), co-partitioning (range)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tierlog.groups.assignors import ASSIGNORS, MemberSpec, RangeAssignor, UniformAssignor
from tierlog.model import Uuid

TOPICS = [Uuid(bytes([i]) * 16) for i in range(1, 5)]

partition_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1)
member_ids = st.lists(st.text("abcdefgh", min_size=1, max_size=3), unique=True, max_size=8)


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool = False) -> tuple[dict[str, MemberSpec], dict]:
    counts = draw(partition_counts)
    ids = draw(member_ids)
    shared = frozenset(draw(st.sets(st.sampled_from(TOPICS), min_size=1)))
    members = {}
    for member in ids:
        subscribed = shared if homogeneous else frozenset(draw(st.sets(st.sampled_from(TOPICS))))
        # A current assignment that may be stale, overlapping or out of range.
        assigned = draw(
            st.dictionaries(st.sampled_from(TOPICS), st.frozensets(st.integers(0, 14), max_size=6))
        )
        members[member] = MemberSpec(subscribed, assigned)
    return members, counts


def _flat(assignment: dict) -> list[tuple[Uuid, int]]:
    return [(t, p) for t, parts in assignment.items() for p in parts]


def _check_complete(members: dict, counts: dict, result: dict) -> None:
    assert set(result) == set(members)
    owned = [tp for assignment in result.values() for tp in _flat(assignment)]
    assert len(owned) == len(set(owned)), "a partition assigned twice"
    wanted = {
        (t, p)
        for t, n in counts.items()
        if any(t in spec.subscribed_topic_ids for spec in members.values())
        for p in range(n)
    }
    assert set(owned) == wanted
    for member, assignment in result.items():
        assert set(assignment) <= members[member].subscribed_topic_ids
        assert all(parts for parts in assignment.values()), "empty topic entries are left out"


@settings(max_examples=100, deadline=None)
@given(groups())
def test_every_subscribed_partition_is_assigned_exactly_once(group: tuple) -> None:
    members, counts = group
    for assignor in ASSIGNORS.values():
        _check_complete(members, counts, assignor.assign(members, counts))


@settings(max_examples=100, deadline=None)
@given(groups())
def test_uniform_leaves_no_move_that_would_even_two_members(group: tuple) -> None:
    members, counts = group
    result = UniformAssignor().assign(members, counts)
    load = {m: len(_flat(a)) for m, a in result.items()}
    for member, assignment in result.items():
        for topic in assignment:
            for other, spec in members.items():
                if topic in spec.subscribed_topic_ids:
                    assert load[member] - load[other] <= 1


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_with_one_subscription_differs_by_at_most_one(group: tuple) -> None:
    members, counts = group
    loads = [len(_flat(a)) for a in UniformAssignor().assign(members, counts).values()]
    if loads:
        assert max(loads) - min(loads) <= 1


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True), st.data())
def test_uniform_is_sticky_when_a_member_joins_or_leaves(group: tuple, data: st.DataObject) -> None:
    members, counts = group
    assignor = UniformAssignor()
    first = assignor.assign(members, counts)
    settled = {m: MemberSpec(s.subscribed_topic_ids, first[m]) for m, s in members.items()}
    if data.draw(st.booleans()) or not settled:
        subscribed = next(iter(settled.values())).subscribed_topic_ids if settled else frozenset()
        changed = {**settled, "zz-new": MemberSpec(subscribed or frozenset(TOPICS))}
    else:
        leaving = data.draw(st.sampled_from(sorted(settled)))
        changed = {m: s for m, s in settled.items() if m != leaving}
    second = assignor.assign(changed, counts)
    total = sum(len(_flat(a)) for a in second.values())
    floor = total // len(changed) if changed else 0
    for member, spec in changed.items():
        before = set(_flat(dict(spec.assigned)))
        after = set(_flat(second[member]))
        # A member keeps all it had, or at least as many as an even share allows.
        assert len(before & after) >= min(len(before), floor)


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True))
def test_range_co_partitions_topics_of_the_same_size(group: tuple) -> None:
    members, counts = group
    result = RangeAssignor().assign(members, counts)
    for member, assignment in result.items():
        by_size: dict[int, set[frozenset[int]]] = {}
        for topic in members[member].subscribed_topic_ids:
            if counts.get(topic):
                by_size.setdefault(counts[topic], set()).add(assignment.get(topic, frozenset()))
        assert all(len(ranges) == 1 for ranges in by_size.values())
        for parts in assignment.values():
            assert sorted(parts) == list(range(min(parts), max(parts) + 1)), "a range is contiguous"


def test_range_gives_the_first_members_by_id_the_extra_partitions() -> None:
    topic = TOPICS[0]
    members = {m: MemberSpec(frozenset({topic})) for m in ("c", "a", "b")}
    result = RangeAssignor().assign(members, {topic: 7})
    assert result == {
        "a": {topic: frozenset({0, 1, 2})},
        "b": {topic: frozenset({3, 4})},
        "c": {topic: frozenset({5, 6})},
    }


def test_uniform_keeps_partitions_of_members_that_stay() -> None:
    topic = TOPICS[0]
    members = {
        "a": MemberSpec(frozenset({topic}), {topic: frozenset({0, 1, 2})}),
        "b": MemberSpec(frozenset({topic}), {topic: frozenset({3, 4, 5})}),
        "c": MemberSpec(frozenset({topic})),
    }
    result = UniformAssignor().assign(members, {topic: 6})
    assert len(result["c"][topic]) == 2
    assert len(result["a"][topic] & {0, 1, 2}) == 2
    assert len(result["b"][topic] & {3, 4, 5}) == 2
