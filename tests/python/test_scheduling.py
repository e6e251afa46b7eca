"""Where tasks and actors run, from Python: SPREAD, node affinity (hard and soft), placement
groups (bundles placed all or nothing, work placed in a bundle runs on its node, removal), and
the cluster's resources and nodes as Ray's calls show them."""
import time

import pytest

import tessera
from tessera import exceptions
from tessera.util import placement_group, placement_group_table, remove_placement_group
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


def test_a_group_that_can_never_fit_fails_its_ready_ref(cluster):
    group = placement_group([{"CPU": 64}])
    with pytest.raises(exceptions.TesseraError) as info:
        tessera.get(group.ready(), timeout=60)
    assert group.id.hex() in str(info.value)
    assert not group.wait(0)


def test_a_group_confined_to_a_label_no_node_has_fails_with_the_reason(cluster):
    group = placement_group([{"CPU": 1}], same_label="rack")
    with pytest.raises(exceptions.TesseraError, match="no alive node has label rack"):
        tessera.get(group.ready(), timeout=60)
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
        tessera.get(running, timeout=60)
    with pytest.raises(exceptions.ActorPlacementGroupRemoved):
        tessera.get(member.ping.remote(), timeout=60)
