"""Where tasks and actors run, from Python: SPREAD, node affinity (hard and soft), placement
groups (bundles placed all or nothing, work placed in a bundle runs on its node, removal), and
the cluster's resources and nodes as Ray's calls show them."""
import time

import pytest

import tessera
from tessera import exceptions
from tessera.util import (get_current_placement_group, placement_group, placement_group_table,
                          remove_placement_group)
from tessera.util.placement_group import PlacementGroupID
from tessera.util.scheduling_strategies import (NodeAffinitySchedulingStrategy,
                                                PlacementGroupSchedulingStrategy)


@tessera.remote
def node_of(seconds=0.0):
    time.sleep(seconds)
    return tessera.get_runtime_context().get_node_id()


def test_nodes_and_cluster_resources(cluster):
    nodes = tessera.nodes()
    assert sorted(n["NodeID"] for n in nodes) == cluster.node_ids()
    assert all(n["Alive"] for n in nodes)
    assert all(n["Resources"]["CPU"] == 4.0 for n in nodes)
    total = tessera.cluster_resources()
    assert total["CPU"] == 8.0
    assert tessera.available_resources().get("CPU", 0) <= 8.0


def test_spread_puts_concurrent_tasks_on_different_nodes(cluster):
    spread = node_of.options(scheduling_strategy="SPREAD")
    where = tessera.get([spread.remote(2.0) for _ in range(2)])
    assert sorted(where) == cluster.node_ids()


def test_hard_node_affinity_runs_only_there(cluster):
    for node in cluster.node_ids():
        pinned = node_of.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, False))
        assert set(tessera.get([pinned.remote() for _ in range(4)])) == {node}


def test_hard_affinity_to_an_unknown_node_is_unschedulable_and_soft_runs_elsewhere(cluster):
    hard = node_of.options(scheduling_strategy=NodeAffinitySchedulingStrategy("no-such-node",
                                                                              soft=False))
    with pytest.raises(exceptions.TaskUnschedulableError) as info:
        tessera.get(hard.remote(), timeout=60)
    assert "no-such-node" in str(info.value)
    soft = node_of.options(scheduling_strategy=NodeAffinitySchedulingStrategy("no-such-node",
                                                                              soft=True))
    assert tessera.get(soft.remote(), timeout=60) in cluster.node_ids()


def test_a_strict_spread_group_puts_each_bundle_on_its_own_node_and_work_follows(cluster):
    group = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
    made = tessera.get(group.ready(), timeout=60)
    assert made.id == group.id
    assert group.wait(10)
    table = placement_group_table(group)
    assert table["state"] == "CREATED"
    bundle_nodes = [table["bundles_to_node_id"][i] for i in range(2)]
    assert sorted(bundle_nodes) == cluster.node_ids()
    for index, node in enumerate(bundle_nodes):
        inside = node_of.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            group, placement_group_bundle_index=index))
        assert tessera.get(inside.remote(), timeout=60) == node
    remove_placement_group(group)
    assert placement_group_table(group)["state"] in ("REMOVED",)


def test_a_group_no_node_can_hold_stays_pending_with_the_reason_until_removed(cluster):
    # As Ray's: it waits for the cluster to grow; ready() stays pending, wait() says False.
    group = placement_group([{"CPU": 64}])
    assert not group.wait(1)
    ready, _ = tessera.wait([group.ready()], timeout=1)
    assert ready == []
    table = placement_group_table(group)
    assert table["state"] == "PENDING"
    assert table["stats"]["scheduling_state"] == "INFEASIBLE"
    assert "CPU" in table["stats"]["explanation"]
    remove_placement_group(group)
    with pytest.raises(exceptions.TesseraError, match="removed"):
        tessera.get(group.ready(), timeout=30)
    assert placement_group_table(group)["state"] == "REMOVED"
    remove_placement_group(group)  # gone already: nothing to do, as Ray


def test_a_group_confined_to_a_label_no_node_has_waits_with_the_reason(cluster):
    group = placement_group([{"CPU": 1}], same_label="rack")
    assert not group.wait(1)
    table = placement_group_table(group)
    assert table["state"] == "PENDING"
    assert "no alive node has label rack" in table["stats"]["explanation"]
    remove_placement_group(group)
    with pytest.raises(ValueError, match="same_label must be a label key"):
        placement_group([{"CPU": 1}], same_label="")


def test_placement_group_arguments_are_checked(cluster):
    with pytest.raises(ValueError, match="cannot be empty"):
        placement_group([])
    with pytest.raises(ValueError, match="only 0"):
        placement_group([{"CPU": 0}])
    with pytest.raises(ValueError, match="Invalid placement group strategy"):
        placement_group([{"CPU": 1}], strategy="ROUND_ROBIN")
    with pytest.raises(ValueError, match="lifetime"):
        placement_group([{"CPU": 1}], lifetime="forever")


@tessera.remote
def mark_then_sleep(marker, seconds):
    open(marker, "w").close()
    time.sleep(seconds)


def test_removing_a_group_ends_its_tasks_and_actors_as_removed_not_retried(cluster, tmp_path):
    from conftest import wait_for
    group = placement_group([{"CPU": 1}, {"CPU": 1}])
    tessera.get(group.ready(), timeout=60)

    @tessera.remote
    class Member:
        def ping(self):
            return "pong"

    member = Member.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        group, placement_group_bundle_index=0)).remote()
    assert tessera.get(member.ping.remote(), timeout=60) == "pong"
    marker = tmp_path / "started"
    running = mark_then_sleep.options(
        max_retries=3, scheduling_strategy=PlacementGroupSchedulingStrategy(
            group, placement_group_bundle_index=1)).remote(str(marker), 60)
    wait_for(marker.exists, 60, "the task to start in its bundle")
    remove_placement_group(group)
    with pytest.raises(exceptions.TaskPlacementGroupRemoved):
        tessera.get(running, timeout=10)
    # The actor is dead, and says why: an actor error, as Ray's.
    with pytest.raises(exceptions.ActorDiedError,
                       match="placement group corresponding to this Actor has been removed"):
        tessera.get(member.ping.remote(), timeout=10)
    remove_placement_group(group)  # gone already: nothing to do


def test_a_group_removed_as_soon_as_it_is_made_is_gone(cluster):
    # placement_group() returns once the head has the group: a remove right after it withdraws
    # the group, never racing the wait for its placement (which would then hold its bundles).
    groups = []
    for _ in range(20):
        groups.append(placement_group([{"CPU": 1}, {"CPU": 1}]))
        remove_placement_group(groups[-1])
    for group in groups:  # each wait ends: placed then removed, or removed before placed
        try:
            tessera.get(group.ready(), timeout=60)
        except exceptions.RayError as e:
            assert "removed before it was created" in str(e)
    # None is left at the head (a removed group is not listed); one made after its removal
    # would be, holding its bundles.
    assert not set(placement_group_table()) & {g.id.hex() for g in groups}


def test_placement_group_table_shows_what_ray_users_read(cluster):
    group = placement_group([{"CPU": 1}, {"CPU": 2}], strategy="STRICT_SPREAD")
    tessera.get(group.ready(), timeout=60)
    table = placement_group_table(group)
    assert table["placement_group_id"] == group.id.hex()
    assert table["name"] == group.id.hex()
    assert table["bundles"] == {0: {"CPU": 1.0}, 1: {"CPU": 2.0}}
    assert sorted(table["bundles_to_node_id"].values()) == cluster.node_ids()
    assert table["strategy"] == "STRICT_SPREAD"
    assert table["state"] == "CREATED"
    assert table["stats"]["scheduling_state"] == "FINISHED"
    assert placement_group_table()[group.id.hex()] == table
    assert isinstance(group.id.binary(), bytes)
    assert PlacementGroupID(group.id.binary()) == group.id
    remove_placement_group(group)
    removed = placement_group_table(group)
    assert removed["state"] == "REMOVED" and removed["bundles"] == table["bundles"]


def test_bundles_reach_the_core_as_amounts_and_a_bad_one_fails_ready_naming_it(cluster):
    group = placement_group([{"CPU": 0.50004}], strategy="STRICT_PACK",
                            fallback_strategy=[{"bundles": [{"CPU": 1}, {"CPU": 1}]}])
    tessera.get(group.ready(), timeout=60)
    assert placement_group_table(group)["bundles"] == {0: {"CPU": 0.5}}
    remove_placement_group(group)
    # A name the core refuses: the group fails, as one line naming the group and the bundle.
    bad = placement_group([{"CPU": 1}, {"no spaces": 1}])
    with pytest.raises(exceptions.TesseraError,
                       match=rf"placement group {bad.id.hex()}: bundles: bundle 1: resource "
                             r"name \"no spaces\" has an invalid character"):
        tessera.get(bad.ready(), timeout=30)


def test_a_bundle_index_the_group_lacks_is_refused_when_submitted(cluster):
    group = placement_group([{"CPU": 1}, {"CPU": 1}])

    @tessera.remote(num_cpus=1)
    class Member:
        pass

    message = ("placement group bundle index 2 is invalid. Valid placement group indexes: "
               "0 to 1.")
    outside = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=2)
    task = node_of.options(scheduling_strategy=outside)  # checked when submitted, as Ray
    with pytest.raises(ValueError, match=message):
        task.remote()
    with pytest.raises(ValueError, match=message):
        Member.options(scheduling_strategy=outside).remote()
    with pytest.raises(ValueError,
                       match="If placement group is not set, the value of bundle index must be -1."):
        PlacementGroupSchedulingStrategy(None, placement_group_bundle_index=0)
    remove_placement_group(group)


@tessera.remote(num_cpus=0.5)
def current_group():
    group = get_current_placement_group()
    return None if group is None else group.id.hex()


@tessera.remote(num_cpus=0.5)
def child_group(strategy=None):
    child = current_group if strategy is None else current_group.options(
        scheduling_strategy=strategy)
    return tessera.get(child.remote())


@tessera.remote(num_cpus=0.5)
class Parent:
    def current(self):
        return tessera.get(current_group.remote())


def test_current_placement_group_and_child_task_capture(cluster):
    assert get_current_placement_group() is None  # a driver
    group = placement_group([{"CPU": 2}])
    tessera.get(group.ready(), timeout=60)

    def inside(capture):
        return PlacementGroupSchedulingStrategy(group, placement_group_capture_child_tasks=capture)

    assert tessera.get(current_group.options(scheduling_strategy=inside(None)).remote(),
                       timeout=60) == group.id.hex()
    # Without capture the children run outside; with it, inside, unless they say "DEFAULT".
    assert tessera.get(child_group.options(scheduling_strategy=inside(False)).remote(),
                       timeout=60) is None
    assert tessera.get(child_group.options(scheduling_strategy=inside(True)).remote(),
                       timeout=60) == group.id.hex()
    assert tessera.get(child_group.options(scheduling_strategy=inside(True)).remote("DEFAULT"),
                       timeout=60) is None
    parent = Parent.options(scheduling_strategy=inside(True)).remote()
    assert tessera.get(parent.current.remote(), timeout=60) == group.id.hex()
    remove_placement_group(group)


def test_the_runtime_contexts_node_id_is_the_nodes_and_takes_hard_affinity(cluster):
    driver_node = tessera.get_runtime_context().get_node_id()
    assert driver_node in [n["NodeID"] for n in tessera.nodes()]
    pinned = node_of.options(scheduling_strategy=NodeAffinitySchedulingStrategy(driver_node,
                                                                               soft=False))
    assert tessera.get([pinned.remote() for _ in range(3)], timeout=60) == [driver_node] * 3
    task_node = tessera.get(node_of.remote(), timeout=60)
    there = node_of.options(scheduling_strategy=NodeAffinitySchedulingStrategy(task_node,
                                                                              soft=False))
    assert tessera.get(there.remote(), timeout=60) == task_node


@tessera.remote
def holds_the_node():
    return "whole node"


def test_an_idle_worker_hands_its_resources_to_a_task_of_another_shape(cluster):
    # A 4-CPU task's worker stays leased while idle (for its next task, up to the driver's idle
    # timeout of 10 s); a 3-CPU task pinned to the same node waits for those CPUs, and gets them
    # as soon as its lease has waited a moment, not after the idle timeout.
    node = cluster.node_ids()[0]
    pinned = NodeAffinitySchedulingStrategy(node, soft=False)
    assert tessera.get(holds_the_node.options(num_cpus=4, scheduling_strategy=pinned).remote(),
                       timeout=60) == "whole node"
    started = time.monotonic()
    ref = holds_the_node.options(num_cpus=3, scheduling_strategy=pinned).remote()
    assert tessera.get(ref, timeout=60) == "whole node"
    assert time.monotonic() - started < 8, "the idle 4-CPU worker kept the node until it timed out"


def test_an_idle_worker_of_another_driver_hands_its_resources_over(cluster):
    # This driver's idle 4-CPU worker holds the node; another driver's 3-CPU task pinned there
    # waits, its node tells this driver (WorkerEvent.lease_wanted), and the idle worker goes
    # back long before this driver's 10 s idle timeout.
    node = cluster.node_ids()[0]
    pinned = NodeAffinitySchedulingStrategy(node, soft=False)
    assert tessera.get(holds_the_node.options(num_cpus=4, scheduling_strategy=pinned).remote(),
                       timeout=60) == "whole node"
    script = f"""
import time
import tessera
from tessera.util.scheduling_strategies import NodeAffinitySchedulingStrategy
tessera.init()

@tessera.remote(num_cpus=3)
def three():
    return "three"

started = time.monotonic()
pinned = NodeAffinitySchedulingStrategy({node!r}, soft=False)
print(tessera.get(three.options(scheduling_strategy=pinned).remote(), timeout=60))
print(f"{{time.monotonic() - started:.2f}}")
"""
    result = cluster.python(script, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.split()
    assert lines[0] == "three"
    assert float(lines[1]) < 8, "the other driver's idle worker kept the node until it timed out"


@tessera.remote
def keeps_a_value():
    # A value this task's worker owns, handed to the caller as a ref inside the result.
    return [tessera.put("kept by its owner")]


def test_an_idle_worker_whose_objects_are_borrowed_gives_its_cpus_to_another_shape(cluster):
    # The 4-CPU task's worker owns the value it put, which this driver borrows. A 3-CPU task
    # pinned to the same node gets the CPUs as soon as its lease has waited a moment (the
    # worker's lease goes back to the node), and the value is still read afterwards from the
    # worker's process, which lives on holding nothing.
    node = cluster.node_ids()[0]
    pinned = NodeAffinitySchedulingStrategy(node, soft=False)
    [kept] = tessera.get(keeps_a_value.options(num_cpus=4, scheduling_strategy=pinned).remote(),
                         timeout=60)
    started = time.monotonic()
    ref = holds_the_node.options(num_cpus=3, scheduling_strategy=pinned).remote()
    assert tessera.get(ref, timeout=60) == "whole node"
    assert time.monotonic() - started < 8, "the lending worker kept the node's CPUs"
    assert tessera.get(kept, timeout=30) == "kept by its owner"


def test_an_idle_worker_whose_objects_are_borrowed_gives_its_cpus_to_another_driver(cluster):
    node = cluster.node_ids()[0]
    pinned = NodeAffinitySchedulingStrategy(node, soft=False)
    [kept] = tessera.get(keeps_a_value.options(num_cpus=4, scheduling_strategy=pinned).remote(),
                         timeout=60)
    script = f"""
import tessera
from tessera.util.scheduling_strategies import NodeAffinitySchedulingStrategy
tessera.init()

@tessera.remote(num_cpus=3)
def three():
    return "three"

pinned = NodeAffinitySchedulingStrategy({node!r}, soft=False)
print(tessera.get(three.options(scheduling_strategy=pinned).remote(), timeout=60))
"""
    result = cluster.python(script, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[0] == "three"
    assert tessera.get(kept, timeout=30) == "kept by its owner"
