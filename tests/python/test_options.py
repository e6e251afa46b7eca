"""Tests of tessera._private.options (Ray's option checks and texts, the core options dict)
and tessera.util.scheduling_strategies."""

import re

import pytest

from tessera._private.options import (
    INFINITE_RETRIES,
    actor_core_options,
    exception_type_name,
    method_call_options,
    rounded_resources,
    task_core_options,
    validate_actor_options,
    validate_task_options,
)
from tessera.util.scheduling_strategies import (
    DEFAULT_SCHEDULING_STRATEGY,
    SPREAD_SCHEDULING_STRATEGY,
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)


class FakeId:
    def __init__(self, hex_id):
        self._hex = hex_id

    def hex(self):
        return self._hex


class FakePlacementGroup:
    def __init__(self, hex_id="ab" * 14):
        self.id = FakeId(hex_id)


def task(**options):
    validate_task_options(options, in_options=False)
    return task_core_options(options)


def actor(has_async_methods=False, **options):
    validate_actor_options(options, in_options=False)
    return actor_core_options(options, has_async_methods=has_async_methods)


# --- validation texts -------------------------------------------------------------------------


def fails(error_type, text, whole=True):
    """pytest.raises for exactly `text` (or text starting with it when whole=False)."""
    return pytest.raises(error_type, match="^" + re.escape(text) + ("$" if whole else ""))


def check_task(**options):
    validate_task_options(options, in_options=False)


def check_actor(**options):
    validate_actor_options(options, in_options=False)


def test_unknown_task_option():
    text = "Invalid option keyword bogus for remote functions. Valid ones are ['accelerator_type'"
    with fails(ValueError, text, whole=False):
        check_task(bogus=1)


def test_unknown_actor_option_and_task_only_keys():
    text = "Invalid option keyword max_retries for actors. Valid ones are ["
    with fails(ValueError, text, whole=False):
        check_actor(max_retries=1)


def test_type_error_text():
    text = (
        "The type of keyword 'num_cpus' must be (<class 'float'>, <class 'int'>, "
        "<class 'NoneType'>), but received type <class 'str'>"
    )
    with fails(TypeError, text):
        check_task(num_cpus="1")


def test_cpu_and_gpu_in_resources():
    text = (
        "Use the 'num_cpus' and 'num_gpus' keyword instead of 'CPU' and 'GPU' "
        "in 'resources' keyword"
    )
    with fails(ValueError, text):
        check_task(resources={"GPU": 1})


def test_negative_resources():
    with fails(ValueError, "The quantity of resource num_gpus cannot be negative"):
        check_task(num_gpus=-1)
    with fails(ValueError, "The quantity of resource custom cannot be negative"):
        check_actor(resources={"custom": -0.5})


def test_resource_precision():
    text = "The precision of the fractional quantity of resource num_cpus cannot go beyond 0.0001"
    with fails(ValueError, text):
        check_task(num_cpus=0.00001)


def test_negative_counts():
    text = (
        "The keyword 'max_retries' only accepts None, 0, -1 or a positive integer, "
        "where -1 represents infinity."
    )
    with fails(ValueError, text):
        check_task(max_retries=-2)
    with fails(ValueError, "The keyword 'max_calls' only accepts None, 0 or a positive integer."):
        check_task(max_calls=-1)


def test_max_calls_not_in_dot_options():
    check_task(max_calls=1)
    with fails(ValueError, "Setting 'max_calls' is not supported in '.options()'."):
        validate_task_options({"max_calls": 1}, in_options=True)


def test_concurrency_groups_not_in_dot_options():
    check_actor(concurrency_groups={"io": 2})
    with fails(ValueError, "Setting 'concurrency_groups' is not supported in '.options()'."):
        validate_actor_options({"concurrency_groups": {"io": 2}}, in_options=True)


def test_num_returns_is_a_count_from_0_or_streaming():
    for count in (0, 1, 2, 10_000):
        check_task(num_returns=count)
    for bad in (-1, 10_001, True, 1.5):
        with pytest.raises((ValueError, TypeError), match="num_returns"):
            check_task(num_returns=bad)
    check_task(num_returns="streaming")
    assert task(num_returns="streaming")["streaming"] is True
    assert task(num_returns="streaming")["num_returns"] == 1
    with fails(ValueError, "num_returns='dynamic' (Ray's older generators) is not supported: "
                           "use num_returns='streaming', whose values arrive as they are made"):
        check_task(num_returns="dynamic")


def test_retry_exceptions_must_be_bool_or_exception_classes():
    check_task(retry_exceptions=[KeyError, OSError])
    with fails(ValueError, "retry_exceptions must be either a boolean or a list of exceptions"):
        check_task(retry_exceptions=[KeyError, "OSError"])


def test_runtime_env_refusals_and_types():
    with fails(ValueError, "runtime_env 'pip' is not supported: Tessera installs no packages "
                           "(install them on the nodes' images)"):
        check_task(runtime_env={"pip": ["x"]})
    with fails(ValueError, "runtime_env key 'excludes' is not supported (supported: env_vars, "
                           "working_dir, py_modules)"):
        check_actor(runtime_env={"excludes": ["x"]})
    with fails(TypeError, "runtime_env['py_modules'] must be a list", whole=False):
        check_task(runtime_env={"py_modules": "m"})
    with fails(TypeError, "runtime_env['env_vars'] must be a dict of str to str", whole=False):
        check_task(runtime_env={"env_vars": {"A": 1}})


def test_max_task_retries_needs_max_restarts():
    text = (
        "'max_task_retries' cannot be set if 'max_restarts' is 0 or if 'max_restarts' is not set."
    )
    with fails(ValueError, text):
        check_actor(max_task_retries=2)
    check_actor(max_task_retries=2, max_restarts=-1)


def test_lifetime_values():
    for lifetime in (None, "detached", "non_detached"):
        check_actor(lifetime=lifetime)
    text = "actor `lifetime` argument must be one of 'detached', 'non_detached' and 'None'."
    with fails(ValueError, text):
        check_actor(lifetime="forever")


def test_get_if_exists_needs_a_name():
    with fails(ValueError, "The actor name must be specified to use `get_if_exists`."):
        check_actor(get_if_exists=True)


def test_actor_name_is_a_non_empty_str():
    with fails(ValueError, "Actor name cannot be an empty string."):
        check_actor(name="")
    with fails(TypeError, "The type of keyword 'name' must be", whole=False):
        check_actor(name=3)


def test_label_selector_types_and_syntax():
    check_task(label_selector={"zone": "in(a,b)", "gpu": "!exists()", "x": "!v", "y": ""})
    with fails(TypeError, "Label selector keys and values must be str", whole=False):
        check_task(label_selector={"zone": 1})
    with fails(ValueError, "Invalid label selector value '(a,b)' for key 'zone'", whole=False):
        check_task(label_selector={"zone": "(a,b)"})


def test_fallback_strategy_entries():
    text = "Each 'fallback_strategy' entry must be a dict with the one key 'label_selector'"
    with fails(ValueError, text, whole=False):
        check_task(fallback_strategy=[{"bundles": []}])


def test_unknown_scheduling_strategy():
    with fails(TypeError, "The type of keyword 'scheduling_strategy' must be ", whole=False):
        check_task(scheduling_strategy=3)
    with fails(ValueError, "Invalid scheduling_strategy value 'PACK'", whole=False):
        check_task(scheduling_strategy="PACK")


# --- core options --------------------------------------------------------------------------


def test_task_defaults():
    assert task() == {
        "resources": {"CPU": 1},
        "label_selectors": [],
        "placement_group": "",
        "bundle_index": -1,
        "node_affinity": "",
        "node_affinity_soft": False,
        "spread": False,
        "name": "",
        "env": {},
        "max_retries": 3,
        "num_returns": 1,
        "streaming": False,
        "retry_exceptions": False,
        "retry_exception_types": None,
    }


def test_resource_amounts():
    core = task(num_cpus=1, num_gpus=2, resources={"custom": 0.5, "zero": 0}, memory=1000.4)
    assert core["resources"] == {"CPU": 1, "GPU": 2, "custom": 0.5, "memory": 1000}
    assert task(num_cpus=0)["resources"] == {}
    core = task(num_cpus=0.25, resources={"b": 1.0, "a": 2.50004})
    assert core["resources"] == {"CPU": 0.25, "a": 2.5, "b": 1}
    # rounded to the core's 4 decimal places
    assert task(num_cpus=1.00004)["resources"] == {"CPU": 1}


def test_rounded_resources_are_the_amounts_the_core_takes_as_a_resource_set():
    # A placement group's bundle or a training worker's resources: amounts, not text.
    assert rounded_resources({"GPU": 1, "CPU": 0.50004, "memory": 1000.4, "zero": 0,
                              "tiny": 0.00001}) == {"CPU": 0.5, "GPU": 1, "memory": 1000}
    assert rounded_resources({}) == {}


def test_accelerator_type_is_a_label_of_the_first_selector_and_no_resource():
    core = task(
        accelerator_type="H100",
        label_selector={"zone": "us-1"},
        fallback_strategy=[{"label_selector": {"zone": "us-2"}}, {"label_selector": {}}],
    )
    assert core["label_selectors"] == [
        {"zone": "us-1", "tessera.io/accelerator-type": "H100"},
        {"zone": "us-2"},
        {},
    ]
    assert core["resources"] == {"CPU": 1}
    only_type = task(accelerator_type="A100")
    assert only_type["label_selectors"] == [{"tessera.io/accelerator-type": "A100"}]


def test_fallbacks_without_a_primary_selector_start_with_an_empty_one():
    core = task(fallback_strategy=[{"label_selector": {"zone": "b"}}])
    assert core["label_selectors"] == [{}, {"zone": "b"}]


def test_placement_group_strategy():
    strategy = PlacementGroupSchedulingStrategy(FakePlacementGroup("0f" * 14), 2)
    core = task(scheduling_strategy=strategy)
    assert (core["placement_group"], core["bundle_index"]) == ("0f" * 14, 2)
    assert not core["spread"] and core["node_affinity"] == ""


def test_node_affinity_and_spread():
    core = task(scheduling_strategy=NodeAffinitySchedulingStrategy("cd" * 14, soft=True))
    assert (core["node_affinity"], core["node_affinity_soft"]) == ("cd" * 14, True)
    assert task(scheduling_strategy=SPREAD_SCHEDULING_STRATEGY)["spread"] is True
    assert task(scheduling_strategy=DEFAULT_SCHEDULING_STRATEGY)["spread"] is False


def test_retries():
    assert task(max_retries=-1)["max_retries"] == INFINITE_RETRIES
    assert task(max_retries=0)["max_retries"] == 0
    core = task(retry_exceptions=[KeyError])
    assert (core["retry_exceptions"], core["retry_exception_types"]) == (True, [KeyError])
    assert task(retry_exceptions=True)["retry_exception_types"] is None


def test_name_and_env():
    core = task(
        name="load", runtime_env={"env_vars": {"A": "1"}}, enable_task_events=False, _metadata={}
    )
    assert (core["name"], core["env"]) == ("load", {"A": "1"})


def test_actor_defaults_demand_nothing():
    assert actor() == {
        "resources": {},
        "label_selectors": [],
        "placement_group": "",
        "bundle_index": -1,
        "node_affinity": "",
        "node_affinity_soft": False,
        "spread": False,
        "name": "",
        "env": {},
        "max_restarts": 0,
        "max_task_retries": 0,
        "max_concurrency": 1,
        "detached": False,
        "get_if_exists": False,
        "namespace": "",
        "concurrency_groups": {},
    }


def test_actor_asking_for_anything_defaults_to_one_cpu():
    assert actor(num_gpus=1)["resources"] == {"CPU": 1, "GPU": 1}
    assert actor(resources={"custom": 1})["resources"] == {"CPU": 1, "custom": 1}
    assert actor(accelerator_type="H100")["resources"] == {"CPU": 1}
    assert actor(num_cpus=0, num_gpus=1)["resources"] == {"GPU": 1}
    assert actor(num_cpus=2)["resources"] == {"CPU": 2}


def test_actor_options():
    core = actor(
        max_restarts=-1,
        max_task_retries=-1,
        lifetime="detached",
        name="counter",
        namespace="ns",
        get_if_exists=True,
        max_pending_calls=10,
        allow_out_of_order_execution=False,
    )
    assert core["max_restarts"] == core["max_task_retries"] == INFINITE_RETRIES
    assert (core["detached"], core["get_if_exists"]) == (True, True)
    assert (core["name"], core["namespace"]) == ("counter", "ns")
    assert actor(lifetime="non_detached")["detached"] is False


def test_actor_max_concurrency():
    assert actor(has_async_methods=True)["max_concurrency"] == 1000  # Ray's default
    assert actor(has_async_methods=True, max_concurrency=4)["max_concurrency"] == 4


# --- scheduling strategies ------------------------------------------------------------------


def test_placement_group_strategy_checks():
    with fails(ValueError, "If placement group is not set, the value of bundle index must be -1."):
        PlacementGroupSchedulingStrategy(None, 0)
    with pytest.raises(ValueError, match=r"bundle index -2 is invalid"):
        PlacementGroupSchedulingStrategy(FakePlacementGroup(), -2)
    assert task(scheduling_strategy=PlacementGroupSchedulingStrategy(None))["placement_group"] == ""


def test_node_affinity_needs_a_str_node_id():
    with pytest.raises(TypeError, match=r"node_id must be a hex str"):
        NodeAffinitySchedulingStrategy(b"\x01", soft=False)


def test_strategies_compare_by_fields_and_repr():
    pg = FakePlacementGroup()
    assert PlacementGroupSchedulingStrategy(pg, 1) == PlacementGroupSchedulingStrategy(pg, 1)
    assert PlacementGroupSchedulingStrategy(pg, 1) != PlacementGroupSchedulingStrategy(pg, 0)
    assert NodeAffinitySchedulingStrategy("ab", True) == NodeAffinitySchedulingStrategy("ab", True)
    assert repr(NodeAffinitySchedulingStrategy("ab", False)) == (
        "NodeAffinitySchedulingStrategy(node_id='ab', soft=False, "
        "_spill_on_unavailable=False, _fail_on_unavailable=False)"
    )


# --- calls checked when made (tessera._private.signature) --------------------------------------


def test_call_checks_decide_as_signature_bind_does():
    # The precomputed check never lets through a call that bind refuses, and refuses with bind's
    # own message.
    import inspect
    import itertools

    from tessera._private.signature import CallCheck

    sources = ["def f(a, b=0, *, c=0): pass", "def f(a, /, b, *args, c, d=1, **kw): pass",
               "def f(*args, **kw): pass", "def f(a, /, b=2): pass", "def f(a, /, **kw): pass",
               "def f(*, x): pass", "def f(): pass", "def f(a, b, *args): pass",
               "def f(a, b=1, **kw): pass"]
    names = ["a", "b", "c", "d", "x", "kw", "args"]
    for source in sources:
        scope = {}
        exec(source, scope)
        signature = inspect.signature(scope["f"])
        check = CallCheck(signature)
        for count in range(5):
            for keys in itertools.chain.from_iterable(
                    itertools.combinations(names, r) for r in range(4)):
                args, kwargs = tuple(range(count)), dict.fromkeys(keys, 1)
                try:
                    signature.bind(*args, **kwargs)
                    expected = None
                except TypeError as e:
                    expected = str(e)
                if expected is None:
                    check(args, kwargs)
                else:
                    with pytest.raises(TypeError, match="^" + re.escape(expected) + "$"):
                        check(args, kwargs)


def test_runtime_env_merge_is_rays():
    from tessera._private.runtime_env import merge

    job = {"working_dir": "/a", "py_modules": ["/m"], "env_vars": {"A": "job", "B": "job"}}
    own = {"working_dir": "/b", "env_vars": {"B": "own"}}
    assert merge(job, own) == {"working_dir": "/b", "py_modules": ["/m"],
                               "env_vars": {"A": "job", "B": "own"}}
    assert merge(None, own) == own
    assert merge(job, None) == job


# --- What a handle found by name is built with (tessera._private.handle_metadata) ---

class _Flaky(Exception):
    pass


def test_handle_metadata_reads_back_what_the_creator_wrote():
    from tessera._private import handle_metadata
    written = handle_metadata.encode(
        "Counter", {"add", "stream"},
        {"stream": {"num_returns": "streaming"},
         "add": {"num_returns": 2, "concurrency_group": "io", "max_task_retries": 3,
                 "retry_exceptions": [_Flaky, ValueError]}},
        ["io"])
    read = handle_metadata.decode(written)
    assert read == {
        "class_name": "Counter", "methods": {"add", "stream"}, "groups": ["io"],
        "method_options": {
            "stream": {"num_returns": "streaming"},
            "add": {"num_returns": 2, "concurrency_group": "io", "max_task_retries": 3,
                    "retry_exceptions": [f"{__name__}._Flaky", "builtins.ValueError"]}}}
    # The names are what a call sends the worker for the classes themselves.
    call = method_call_options(read["method_options"]["add"])
    assert call["retry_exceptions"] is True
    assert [exception_type_name(t) for t in call["retry_exception_types"]] == \
        [f"{__name__}._Flaky", "builtins.ValueError"]


@pytest.mark.parametrize("data", [
    b"", b"not json", b"\xff\xfe", b"[]", b'{"version": 2}',
    b'{"version": 1, "class_name": "C", "methods": "add", "method_options": {}, "groups": []}',
    b'{"version": 1, "class_name": "C", "methods": ["a"], "groups": [],'
    b' "method_options": {"a": {"num_returns": "many"}}}',
    b'{"version": 1, "class_name": "C", "methods": ["a"], "groups": [],'
    b' "method_options": {"a": {"retry_exceptions": [1]}}}',
    b'{"version": 1, "class_name": "C", "methods": ["a"], "groups": [],'
    b' "method_options": {"a": {"eval": "boom"}}}',
    b'{"version": 1, "class_name": 3, "methods": [], "groups": [], "method_options": {}}',
])
def test_handle_metadata_that_is_not_what_encode_writes_is_ignored(data):
    from tessera._private import handle_metadata
    assert handle_metadata.decode(data) is None


def test_handle_metadata_never_raises_on_random_bytes():
    import random
    from tessera._private import handle_metadata
    rng = random.Random(7)
    good = handle_metadata.encode("C", {"a"}, {"a": {"num_returns": 2}}, [])
    for _ in range(2000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        result = handle_metadata.decode(bytes(data))
        assert result is None or isinstance(result["methods"], set)
