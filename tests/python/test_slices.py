"""Whole TPU slices from Python (tessera.util.tpu.slice_placement_group) on a simulated v6e 4x4
slice (4 hosts of 4 chips) beside a CPU node: the reservation takes every host of the slice, one
bundle per host in TPU worker order, and an actor per bundle sees its host's chips."""
from pathlib import Path

import pytest

import tessera
from tessera.util.scheduling_strategies import PlacementGroupSchedulingStrategy
from tessera.util.tpu import slice_placement_group

ONE_SLICE = Path(__file__).resolve().parents[1] / "train" / "one_slice.yaml"


@pytest.fixture(scope="module")
def slice_cluster(make_cluster):
    made = make_cluster(ONE_SLICE)
    tessera.init(_state_dir=str(made.state))
    yield made
    tessera.shutdown()


@tessera.remote(resources={"TPU": 4})
class Host:
    def where(self):
        import os
        context = tessera.get_runtime_context()
        return (context.get_node_id(), context.get_accelerator_ids().get("TPU"),
                os.environ.get("TPU_WORKER_ID"))


def test_a_slice_reservation_takes_every_host_in_worker_order(slice_cluster):
    reserved = slice_placement_group("4x4", "TPU-V6E")
    try:
        assert reserved.num_hosts == 4 and reserved.chips_per_host == 4
        assert reserved.num_bundles == 4
        assert [h["tpu_worker"] for h in reserved.hosts] == [0, 1, 2, 3]
        assert len({h["node_id"] for h in reserved.hosts}) == 4
        group = reserved.placement_group
        assert tessera.get(group.ready(), timeout=30).id == group.id
        actors = [Host.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            group, placement_group_bundle_index=i)).remote() for i in range(4)]
        seen = tessera.get([a.where.remote() for a in actors], timeout=120)
        for i, (node, chips, worker_id) in enumerate(seen):
            assert node == reserved.hosts[i]["node_id"]
            assert sorted(chips) == ["0", "1", "2", "3"]
            assert worker_id == str(i)
        # The slice is taken whole: a second one cannot be had.
        with pytest.raises(RuntimeError, match="Failed to reserve TPU slice"):
            slice_placement_group("4x4", "v6e", timeout_s=1)
    finally:
        reserved.shutdown()
    again = slice_placement_group("4x4", "v6e", timeout_s=30)
    again.shutdown()


def test_a_bad_topology_is_a_value_error(slice_cluster):
    with pytest.raises(ValueError, match="Invalid accelerator topology: '4x'"):
        slice_placement_group("4x", "v6e")
    with pytest.raises(ValueError, match="Invalid accelerator version"):
        slice_placement_group("4x4", "v99")


def test_a_selector_keeps_to_slices_whose_hosts_match_and_sub_slices_take_blocks(slice_cluster):
    with pytest.raises(RuntimeError, match="no v6e 4x4 slice with every host matching "
                                           "tessera.io/availability-zone=nowhere exists"):
        slice_placement_group("4x4", "v6e", timeout_s=1,
                              bundle_label_selector={"tessera.io/availability-zone": "nowhere"})
    # Naming the slice by its label reserves it; a block of it can then not be had.
    named = slice_placement_group("4x4", "v6e", timeout_s=30,
                                  bundle_label_selector={"tessera.io/tpu-slice-name": "v6e-0"})
    try:
        assert named.slices == ["v6e-0"]
        with pytest.raises(RuntimeError, match="2 v6e 2x4 blocks in 1 slice; all are busy "
                                               r"\(held by slice group "):
            slice_placement_group("2x4", "v6e", sub_slice=True, timeout_s=1)
    finally:
        named.shutdown()
    # Two 2x4 blocks of the 4x4: workers 0, 2 and 1, 3, each numbered 0 and 1 in its block.
    halves = [slice_placement_group("2x4", "v6e", sub_slice=True, timeout_s=30) for _ in range(2)]
    try:
        assert [h.slices for h in halves] == [["v6e-0/0"], ["v6e-0/1"]]
        assert [[host["node_id"] for host in h.hosts] for h in halves] == [
            ["v6e-0-w0", "v6e-0-w2"], ["v6e-0-w1", "v6e-0-w3"]]
        assert [[host["tpu_worker"] for host in h.hosts] for h in halves] == [[0, 1], [0, 1]]
    finally:
        for h in halves:
            h.shutdown()
    with pytest.raises(ValueError, match="one selector for every host"):
        slice_placement_group("4x4", "v6e", bundle_label_selector=[{"a": "1"}, {"a": "2"}])


def test_remove_placement_group_of_a_slice_frees_the_slice(slice_cluster):
    from tessera.util import remove_placement_group
    reserved = slice_placement_group("4x4", "v6e", timeout_s=30)
    remove_placement_group(reserved.placement_group)
    # The slice is free again at once, and the reservation's own shutdown has nothing left to do.
    again = slice_placement_group("4x4", "v6e", timeout_s=5)
    again.shutdown()
    reserved.shutdown()
