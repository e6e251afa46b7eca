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
