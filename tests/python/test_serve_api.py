"""tessera.serve's Python API without a cluster: deployment options (defaults, Ray's checks and
texts, unset tracking, layering config > code > default, whole-dict overrides, change classes),
bound graphs and build_application's specs and code versions, route prefixes, the config-file
schema, import-path loading, @serve.batch and @serve.multiplexed.

Nothing here needs tessera's extension: without a built one (a source tree), the package is
registered without running tessera/__init__.py, and tessera.serve loads on its own; run with
`PYTHONPATH=python python3 -m pytest --noconftest tests/python/test_serve_api.py` (conftest.py
imports the built package).
"""
import asyncio
import importlib.util
import json
import logging
import pickle
import sys
import textwrap

import pytest

try:
    import tessera  # noqa: F401 - the built package (ctest puts build/python on PYTHONPATH)
except ImportError:
    _spec = importlib.util.find_spec("tessera")
    sys.modules["tessera"] = importlib.util.module_from_spec(_spec)

from tessera import serve  # noqa: E402
from tessera.exceptions import TaskCancelledError  # noqa: E402
from tessera.serve import _options, build, context, schema  # noqa: E402
from tessera.serve.deployment import classify_change  # noqa: E402
from tessera.serve.config import (AutoscalingConfig, AutoscalingPolicy, DeploymentMode,  # noqa: E402
                                  HTTPOptions, LoggingConfig, ProxyLocation,
                                  RequestRouterConfig, gRPCOptions)
from tessera.serve.exceptions import (BackPressureError, DeploymentUnavailableError,  # noqa: E402
                                      RayServeException, RequestCancelledError)


@serve.deployment
class Model:
    def __init__(self, weight=1):
        self.weight = weight

    def __call__(self, x):
        return x * self.weight


@serve.deployment
class Router:
    def __init__(self, *models, **named):
        self.models = models


@serve.deployment
def hello(request):
    return "hello"


def resolved(deployment):
    return _options.resolve(deployment._options)


# ---------------------------------------------------------------------------------------------
# Options: defaults, checks, unset tracking.


def test_defaults_of_every_option():
    options = resolved(Model)
    assert options == {
        "num_replicas": 1, "max_ongoing_requests": 5, "max_queued_requests": -1,
        "user_config": None, "autoscaling_config": None,
        "graceful_shutdown_wait_loop_s": 2.0, "graceful_shutdown_timeout_s": 20.0,
        "health_check_period_s": 10.0, "health_check_timeout_s": 30.0,
        "logging_config": {"encoding": "TEXT", "log_level": "INFO", "logs_dir": None,
                           "enable_access_log": True, "additional_log_standard_attrs": []},
        "request_router_config": {
            "request_router_class":
                "tessera.serve._private.request_router:PowerOfTwoChoicesRequestRouter",
            "request_router_kwargs": {}, "request_routing_stats_period_s": 10.0,
            "request_routing_stats_timeout_s": 30.0},
        "max_constructor_retry_count": 20, "ray_actor_options": {"num_cpus": 1},
        "placement_group_bundles": None, "placement_group_strategy": None,
        "max_replicas_per_node": None, "version": None,
    }
    assert Model.name == "Model" and hello.name == "hello"
    assert Model.user_configured_option_names == set()
    assert Model.max_ongoing_requests == 5 and Model.num_replicas == 1


def test_a_placement_group_strategy_defaults_to_pack():
    d = Model.options(placement_group_bundles=[{"CPU": 1}])
    assert resolved(d)["placement_group_strategy"] == "PACK"


BAD_OPTIONS = [
    ({"num_replicas": 0}, ValueError, "num_replicas is expected to larger than 0"),
    ({"num_replicas": -2}, ValueError, "num_replicas is expected to larger than 0"),
    ({"num_replicas": "many"}, ValueError, '`num_replicas` must be an int or "auto"'),
    ({"num_replicas": 2, "autoscaling_config": {"max_replicas": 3}}, ValueError,
     "Manually setting num_replicas is not allowed when autoscaling_config is provided."),
    ({"max_ongoing_requests": None}, ValueError,
     "`max_ongoing_requests` must be non-null, got None."),
    ({"max_ongoing_requests": 0}, ValueError,
     "max_ongoing_requests: ensure this value is greater than 0"),
    ({"max_ongoing_requests": "5"}, TypeError, "max_ongoing_requests: value is not a valid"),
    ({"max_queued_requests": 0}, ValueError,
     "max_queued_requests must be -1 (no limit) or a positive integer."),
    ({"max_queued_requests": 1.5}, TypeError, "max_queued_requests must be an integer."),
    ({"user_config": {"a": object()}}, ValueError, "user_config is not JSON-serializable"),
    ({"ray_actor_options": {"num_returns": 2}}, ValueError,
     "Specifying 'num_returns' in ray_actor_options is not allowed."),
    ({"ray_actor_options": [1]}, TypeError, "for ray_actor_options. Expected a dictionary."),
    ({"placement_group_strategy": "PACK"}, ValueError,
     "If `placement_group_strategy` is provided, `placement_group_bundles` must also be "
     "provided."),
    ({"placement_group_bundles": [{"CPU": 1}], "placement_group_strategy": "TIGHT"},
     ValueError, "Invalid placement group strategy TIGHT"),
    ({"placement_group_bundles": []}, ValueError,
     "must be a list of dictionaries and cannot be empty"),
    ({"placement_group_bundles": [{"CPU": 0.5}]}, ValueError,
     "`num_cpus` for the actor is 1, but the bundle only has 0.5 `CPU` specified."),
    ({"placement_group_bundles": [{"CPU": 1}], "ray_actor_options": {"resources": {"x": 2}}},
     ValueError, "`x` requirement for the actor is 2, but the bundle only has 0 `x`"),
    ({"max_replicas_per_node": 0}, ValueError, "Invalid max_replicas_per_node 0."),
    ({"max_replicas_per_node": 101}, ValueError, "in the range of [1, 100]"),
    ({"max_replicas_per_node": "2"}, TypeError, "for max_replicas_per_node"),
    ({"max_replicas_per_node": 2, "placement_group_bundles": [{"CPU": 1}]}, ValueError,
     "Setting max_replicas_per_node is not allowed when placement_group_bundles is provided."),
    ({"graceful_shutdown_wait_loop_s": -1}, ValueError,
     "graceful_shutdown_wait_loop_s: ensure this value is greater than or equal to 0"),
    ({"graceful_shutdown_timeout_s": -1}, ValueError,
     "graceful_shutdown_timeout_s: ensure this value is greater than or equal to 0"),
    ({"health_check_period_s": 0}, ValueError,
     "health_check_period_s: ensure this value is greater than 0"),
    ({"health_check_timeout_s": 0}, ValueError,
     "health_check_timeout_s: ensure this value is greater than 0"),
    ({"health_check_timeout_s": "1"}, TypeError, "health_check_timeout_s: value is not a valid"),
    ({"logging_config": "DEBUG"}, TypeError, "for logging_config. Expected a dictionary."),
    ({"logging_config": {"encoding": "XML"}}, ValueError, "Got 'XML' for encoding."),
    ({"logging_config": {"log_level": "LOUD"}}, ValueError, 'Got "LOUD" for log_level.'),
    ({"logging_config": {"additional_log_standard_attrs": ["nope"]}}, ValueError,
     "Unknown attribute 'nope'."),
    ({"autoscaling_config": {"min_replicas": 5, "max_replicas": 2}}, ValueError,
     "max_replicas (2) must be greater than or equal to min_replicas (5)!"),
    ({"autoscaling_config": "auto"}, TypeError, "for autoscaling_config. Expected a dictionary."),
    ({"request_router_config": {"request_router_kwargs": {"a": object()}}}, ValueError,
     "request_router_kwargs is not JSON-serializable"),
    ({"max_constructor_retry_count": 0}, ValueError,
     "max_constructor_retry_count: ensure this value is greater than 0"),
    ({"route_prefix": "/a"}, ValueError,
     "`route_prefix` can no longer be specified at the deployment level. Pass it to "
     "`serve.run` or in the application config instead."),
    ({"name": 3}, TypeError, "name must be a string."),
]


@pytest.mark.parametrize("kwargs,error,text", BAD_OPTIONS)
def test_bad_options_are_refused_by_the_decorator(kwargs, error, text):
    with pytest.raises(error) as info:
        serve.deployment(**kwargs)(Model.func_or_class)
    assert text in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kwargs,error,text", BAD_OPTIONS)
def test_bad_options_are_refused_by_options_and_change_nothing(kwargs, error, text):
    base = Model.options(max_ongoing_requests=7)
    with pytest.raises(error) as info:
        base.options(**kwargs)
    assert text in str(info.value)
    assert base._options == {"max_ongoing_requests": 7}


def test_unknown_keyword_arguments():
    with pytest.raises(TypeError, match="deployment\\(\\) got an unexpected keyword argument "
                                        "'replicas'"):
        serve.deployment(replicas=2)
    with pytest.raises(TypeError, match="options\\(\\) got an unexpected keyword argument "
                                        "'replicas'"):
        Model.options(replicas=2)


def test_decorator_needs_a_class_or_function_and_deployments_are_not_called():
    with pytest.raises(TypeError, match="@serve.deployment must be called on a class or "
                                        "function."):
        serve.deployment(num_replicas=2)(42)
    with pytest.raises(RuntimeError, match="Deployments cannot be constructed directly"):
        Model()
    with pytest.raises(RuntimeError, match="should not be called directly"):
        serve.Deployment(Model.func_or_class, "x", {})


def test_runtime_checks_of_ray_actor_option_values():
    if _options._runtime_option_checks() is None:
        pytest.skip("needs the built tessera package (its actor option checks)")
    with pytest.raises(ValueError, match="cannot be negative"):
        Model.options(ray_actor_options={"num_cpus": -1})


def test_version_is_deprecated():
    with pytest.warns(DeprecationWarning, match="`version` in `@serve.deployment` has been "
                                                "deprecated"):
        d = serve.deployment(version="v1")(Model.func_or_class)
    assert d.version == "v1"


def test_name_with_hash_warns():
    with pytest.warns(UserWarning, match="should not contain the '#' character"):
        serve.deployment(name="a#b")(Model.func_or_class)


def test_unset_tracking_through_decorator_and_options():
    d = serve.deployment(max_ongoing_requests=9)(Model.func_or_class)
    assert d.user_configured_option_names == {"max_ongoing_requests"}
    d2 = d.options(user_config={"a": 1}, name="Renamed")
    assert d2.user_configured_option_names == {"max_ongoing_requests", "user_config"}
    assert d2.name == "Renamed" and d.name == "Model"
    assert d.user_configured_option_names == {"max_ongoing_requests"}


def test_num_replicas_auto_uses_the_default_autoscaling_config():
    d = serve.deployment(num_replicas="auto")(Model.func_or_class)
    auto = resolved(d)["autoscaling_config"]
    assert (auto["min_replicas"], auto["max_replicas"], auto["target_ongoing_requests"]) == (
        1, 100, 2.0)
    assert resolved(d)["num_replicas"] is None and d.max_ongoing_requests == 5


def test_num_replicas_auto_overlays_the_given_autoscaling_keys():
    d = Model.options(num_replicas="auto", autoscaling_config={"max_replicas": 7,
                                                               "upscale_delay_s": 3})
    auto = resolved(d)["autoscaling_config"]
    assert (auto["min_replicas"], auto["max_replicas"], auto["target_ongoing_requests"],
            auto["upscale_delay_s"]) == (1, 7, 2.0, 3.0)
    given = AutoscalingConfig(min_replicas=2, max_replicas=4)
    d = Model.options(num_replicas="auto", autoscaling_config=given)
    auto = resolved(d)["autoscaling_config"]
    assert (auto["min_replicas"], auto["max_replicas"]) == (2, 4)


def test_options_replace_whole_dicts():
    base = serve.deployment(
        ray_actor_options={"num_cpus": 2, "num_gpus": 1}, user_config={"a": 1, "b": 2},
        autoscaling_config={"min_replicas": 2, "max_replicas": 5})(Model.func_or_class)
    changed = base.options(ray_actor_options={"num_cpus": 3}, user_config={"a": 9},
                           autoscaling_config={"max_replicas": 4})
    options = resolved(changed)
    assert options["ray_actor_options"] == {"num_cpus": 3}
    assert options["user_config"] == {"a": 9}
    assert (options["autoscaling_config"]["min_replicas"],
            options["autoscaling_config"]["max_replicas"]) == (1, 4)
    assert resolved(base)["ray_actor_options"] == {"num_cpus": 2, "num_gpus": 1}


def test_num_replicas_none_means_the_default():
    assert Model.options(num_replicas=None).num_replicas == 1
    auto = Model.options(num_replicas="auto")
    assert auto.options(autoscaling_config=None).num_replicas == 1


def test_a_later_layer_switches_between_fixed_and_autoscaled():
    autoscaled = serve.deployment(autoscaling_config={"max_replicas": 5})(Model.func_or_class)
    fixed = autoscaled.options(num_replicas=3)
    assert resolved(fixed)["autoscaling_config"] is None and fixed.num_replicas == 3
    again = fixed.options(autoscaling_config={"max_replicas": 2})
    assert again.num_replicas is None
    assert resolved(again)["autoscaling_config"]["max_replicas"] == 2


def test_config_file_over_code_over_default():
    code = Model.options(max_ongoing_requests=7, user_config={"x": 1},
                         ray_actor_options={"num_cpus": 2, "num_gpus": 1})
    built = build.build_application(code.bind(), "app", deployment_overrides=[
        {"name": "Model", "user_config": {"x": 2}, "num_replicas": 4,
         "ray_actor_options": {"num_cpus": 0.5}}])
    spec = built.deployment("Model").spec
    options = spec["options"]
    assert options["user_config"] == {"x": 2}  # config file
    assert options["num_replicas"] == 4  # config file
    assert options["max_ongoing_requests"] == 7  # code
    assert options["health_check_period_s"] == 10.0  # default
    assert options["ray_actor_options"] == {"num_cpus": 0.5}  # the whole dict replaced
    assert spec["user_configured_option_names"] == [
        "max_ongoing_requests", "num_replicas", "ray_actor_options", "user_config"]


def test_config_override_of_a_missing_deployment_is_an_error():
    with pytest.raises(ValueError, match="Deployment 'Ghost' in the config of application "
                                         "'app' does not exist in its code"):
        build.build_application(Model.bind(), "app", deployment_overrides=[{"name": "Ghost"}])


def test_config_runtime_env_is_the_default_of_each_deployment():
    code = Model.options(ray_actor_options={"runtime_env": {"env_vars": {"A": "code"}}})
    built = build.build_application(code.bind(), "app", runtime_env={
        "env_vars": {"A": "app", "B": "app"}, "working_dir": "s3://bucket/x.zip"})
    runtime_env = built.deployment("Model").spec["options"]["ray_actor_options"]["runtime_env"]
    assert runtime_env == {"env_vars": {"A": "code", "B": "app"},
                           "working_dir": "s3://bucket/x.zip"}


# ---------------------------------------------------------------------------------------------
# Change classes.


@pytest.mark.parametrize("option,old,new,expected", [
    ("num_replicas", 1, 3, "LightWeight"),
    ("max_queued_requests", -1, 10, "LightWeight"),
    ("graceful_shutdown_timeout_s", 20, 5, "NeedsReconfigure"),
    ("health_check_period_s", 10, 3, "NeedsReconfigure"),
    ("health_check_timeout_s", 30, 3, "NeedsReconfigure"),
    ("max_constructor_retry_count", 20, 3, "NeedsReconfigure"),
    ("max_ongoing_requests", 5, 6, "NeedsActorReconfigure"),
    ("user_config", {"a": 1}, {"a": 2}, "NeedsActorReconfigure"),
    ("autoscaling_config", AutoscalingConfig(max_replicas=2), AutoscalingConfig(max_replicas=3),
     "NeedsActorReconfigure"),
    ("graceful_shutdown_wait_loop_s", 2, 1, "NeedsActorReconfigure"),
    ("logging_config", LoggingConfig(), LoggingConfig(log_level="DEBUG"),
     "NeedsActorReconfigure"),
    ("request_router_config", RequestRouterConfig(),
     RequestRouterConfig(request_routing_stats_period_s=1), "NeedsActorReconfigure"),
    ("ray_actor_options", {"num_cpus": 1}, {"num_cpus": 2}, "HeavyWeight"),
    ("placement_group_bundles", [{"CPU": 1}], [{"CPU": 2}], "HeavyWeight"),
    ("placement_group_strategy", "PACK", "SPREAD", "HeavyWeight"),
    ("max_replicas_per_node", 1, 2, "HeavyWeight"),
    ("version", "1", "2", "HeavyWeight"),
    ("code_version", "abc", "def", "HeavyWeight"),
])
def test_change_class_of_each_option(option, old, new, expected):
    assert classify_change({option: old}, {option: new}) == expected
    assert classify_change({option: old}, {option: old}) is None


def test_adding_or_removing_an_override_is_a_change_and_the_heaviest_wins():
    classify = classify_change
    assert classify({}, {"user_config": None}) == "NeedsActorReconfigure"
    assert classify({"num_replicas": 2}, {}) == "LightWeight"
    assert classify({}, {}) is None
    assert classify({"num_replicas": 1, "health_check_period_s": 1},
                    {"num_replicas": 2, "health_check_period_s": 2}) == "NeedsReconfigure"
    assert classify({"num_replicas": 1, "ray_actor_options": {}},
                    {"num_replicas": 2, "ray_actor_options": {"num_cpus": 2},
                     "user_config": 1}) == "HeavyWeight"
    with pytest.raises(ValueError, match="Unknown deployment option 'speed'"):
        classify({"speed": 1}, {})


# ---------------------------------------------------------------------------------------------
# Bound graphs and build_application.


def test_function_deployments_take_no_init_args():
    with pytest.raises(ValueError, match="init_args not supported for function deployments."):
        hello.bind(1)
    with pytest.raises(ValueError, match="init_kwargs not supported for function deployments."):
        hello.bind(x=1)
    assert isinstance(hello.bind(), serve.Application)


def test_build_gives_json_specs_with_the_ingress_and_handle_placeholders():
    leaf = Model.bind(2)

    class Holder:  # an Application deep inside another object is found too
        def __init__(self, app):
            self.app = app

    ingress = Router.bind(leaf, named={"deep": [Model.options(name="Other").bind(3)]},
                          holder=Holder(leaf))
    built = build.build_application(ingress, "app", "/r")
    assert json.loads(json.dumps(built.specs())) == built.specs()
    assert built.ingress_deployment_name == "Router"
    assert [d.name for d in built.deployments] == ["Model", "Other", "Router"]
    router = built.deployment("Router")
    assert router.spec["ingress"] is True and router.spec["route_prefix"] == "/r"
    assert router.spec["handle_dependencies"] == ["Model", "Other"]
    assert built.deployment("Model").spec["ingress"] is False
    assert built.deployment("Model").spec["route_prefix"] is None
    args, kwargs = pickle.loads(router.serialized_init_args)
    assert args == (build.HandlePlaceholder("app", "Model"),)
    assert kwargs["named"] == {"deep": [build.HandlePlaceholder("app", "Other")]}
    assert kwargs["holder"].app == build.HandlePlaceholder("app", "Model")


def test_one_application_bound_twice_is_one_deployment():
    leaf = Model.bind()
    built = build.build_application(Router.bind(leaf, leaf), "app")
    assert [d.name for d in built.deployments] == ["Model", "Router"]


def test_default_names_are_made_unique_as_ray_does(caplog):
    with caplog.at_level(logging.WARNING, logger="tessera.serve"):
        built = build.build_application(Router.bind(Model.bind(1), Model.bind(2)), "app")
    assert [d.name for d in built.deployments] == ["Model", "Model_1", "Router"]
    assert ("There are multiple deployments with the same name 'Model'. Renaming one to "
            "'Model_1'.") in caplog.text


def test_a_given_name_used_by_two_different_deployments_is_an_error():
    a = Model.options(name="Shared").bind(1)
    b = Model.options(name="Shared").bind(2)
    with pytest.raises(RayServeException, match="Found multiple different deployments named "
                                                "'Shared' in application 'app'"):
        build.build_application(Router.bind(a, b), "app")


def test_a_given_name_bound_twice_with_one_definition_is_one_deployment():
    a = Model.options(name="Shared").bind(1)
    b = Model.options(name="Shared").bind(1)
    built = build.build_application(Router.bind(a, b), "app")
    assert [d.name for d in built.deployments] == ["Shared", "Router"]


def test_a_cycle_is_an_error():
    first = Model.bind()
    second = Router.bind(first)
    first._bound_deployment._init_args = (second,)
    with pytest.raises(ValueError, match="cannot bind each other in a cycle"):
        build.build_application(second, "app")


def code_version(deployment, *args):
    return build.build_application(deployment.bind(*args), "app").deployments[-1].spec[
        "code_version"]


def test_code_version_follows_code_args_and_replica_options_only():
    base = code_version(Model, 1)
    assert code_version(Model, 1) == base
    assert code_version(Model, 2) != base
    assert code_version(Model.options(user_config={"a": 1}), 1) == base
    assert code_version(Model.options(num_replicas=3, max_ongoing_requests=9), 1) == base
    assert code_version(Model.options(ray_actor_options={"num_cpus": 2}), 1) != base
    assert code_version(Router, 1) != code_version(Model, 1)


def test_a_user_version_pins_the_code_version():
    with pytest.warns(DeprecationWarning):
        pinned = Model.options(version="v1")
    assert code_version(pinned, 1) == code_version(pinned, 2)


def test_one_fastapi_ingress_per_application():
    first = serve.deployment(serve.ingress(lambda scope, receive, send: None)(
        type("A", (), {})))
    second = serve.deployment(serve.ingress(lambda scope, receive, send: None)(
        type("B", (), {})))
    with pytest.raises(RayServeException, match='Found multiple FastAPI deployments in '
                                                'application "app"'):
        build.build_application(first.bind(second.bind()), "app")


def test_application_name_and_target_checks():
    with pytest.raises(RayServeException, match="Application name must a non-empty string."):
        build.build_application(Model.bind(), "")
    with pytest.raises(TypeError, match="`serve.run` expects an `Application` returned by "
                                        "`Deployment.bind\\(\\)`."):
        build.build_application(Model, "app")


def test_ingress_needs_a_class_without_call():
    with pytest.raises(ValueError, match="@serve.ingress must be used with a class."):
        serve.ingress(lambda scope, receive, send: None)(lambda: None)
    with pytest.raises(ValueError, match="Classes passed to @serve.ingress may not have "
                                         "__call__ method."):
        serve.ingress(lambda scope, receive, send: None)(Model.func_or_class)


# ---------------------------------------------------------------------------------------------
# Route prefixes.


@pytest.mark.parametrize("prefix", [None, "/", "/a", "/a/b"])
def test_valid_route_prefixes(prefix):
    build.validate_route_prefix(prefix)
    assert build.build_application(Model.bind(), "app", prefix).route_prefix == prefix


@pytest.mark.parametrize("prefix,text", [
    ("a", "Invalid route_prefix 'a', must start with a forward slash ('/')."),
    ("/a/", "Invalid route_prefix '/a/', may not end with a trailing '/'."),
    ("/{x}", "Invalid route_prefix '/{x}', may not contain wildcards."),
])
def test_invalid_route_prefixes(prefix, text):
    with pytest.raises(ValueError) as info:
        build.build_application(Model.bind(), "app", prefix)
    assert str(info.value) == text


# ---------------------------------------------------------------------------------------------
# The config file.


def test_config_defaults():
    config = schema.parse_config({"applications": [{"import_path": "pkg.mod:app"}]})
    assert config.proxy_location == ProxyLocation.EveryNode
    assert (config.http_options.host, config.http_options.port) == ("0.0.0.0", 8000)
    assert config.http_options.root_path == "" and config.http_options.request_timeout_s is None
    assert config.grpc_options.port == 9000 and config.grpc_options.grpc_servicer_functions == []
    assert config.target_capacity is None and config.logging_config is None
    app = config.applications[0]
    assert (app.name, app.route_prefix, app.runtime_env, app.args, app.deployments) == (
        "default", "/", {}, {}, [])
    assert app.external_scaler_enabled is False


def app_config(**fields):
    return {"import_path": "pkg.mod:app", **fields}


BAD_CONFIGS = [
    ({}, ValueError, "applications: field required"),
    ({"applications": [{}]}, ValueError, "import_path: field required"),
    ({"applications": [app_config(import_path="mod")]}, ValueError,
     'Got invalid import path "mod". An import path must contain at least one dot or colon'),
    ({"applications": [app_config(import_path="a:b:c")]}, ValueError,
     "may have at most one colon."),
    ({"applications": [app_config(import_path="a.")]}, ValueError,
     "may not start or end with a dot."),
    ({"applications": [app_config(name="x"), app_config(name="x", route_prefix="/b")]},
     ValueError, 'Found multiple configs for application "x". Please remove all duplicates.'),
    ({"applications": [app_config(name="x", route_prefix="/a"),
                       app_config(name="y", route_prefix="/a")]},
     ValueError, 'Found duplicate applications for route prefix "/a". Please ensure each '
                 "application's route_prefix is unique."),
    ({"applications": [app_config(name="")]}, ValueError, "Application names must be nonempty."),
    ({"applications": [app_config(route_prefix="a")]}, ValueError,
     'Got "a" for route_prefix. Route prefix must start with "/".'),
    ({"applications": [app_config(route_prefix="/a/")]}, ValueError,
     'Route prefix cannot end with "/" unless the entire prefix is just "/".'),
    ({"applications": [app_config()], "target_capacity": 101}, ValueError,
     "target_capacity: ensure this value is less than or equal to 100"),
    ({"applications": [app_config(runtime_env={"working_dir": "./here"})]}, ValueError,
     "runtime_envs in the Serve config support only remote URIs in working_dir and py_modules."),
    ({"applications": [app_config(deployments=[{"name": "M", "num_replicas": 0}])]},
     ValueError, "num_replicas is expected to larger than 0"),
    ({"applications": [app_config(deployments=[{"name": "M", "num_replica": 2}])]},
     TypeError, "DeploymentSchema got an unexpected keyword argument 'num_replica'"),
    ({"applications": [app_config(deployments=[{"name": "M", "version": "1"}])]},
     TypeError, "DeploymentSchema got an unexpected keyword argument 'version'"),
    ({"applications": [app_config(deployments=[{"num_replicas": 2}])]}, ValueError,
     "name: field required"),
    ({"applications": [app_config(deployments=[{"name": "M", "user_config": [1]}])]},
     TypeError, "user_config: value is not a valid dict"),
    ({"applications": [app_config(deployments=[
        {"name": "M", "ray_actor_options": {"runtime_env": {"py_modules": ["/local"]}}}])]},
     ValueError, "support only remote URIs"),
    ({"applications": [app_config(deployments=[{"name": "M"}, {"name": "M"}])]}, ValueError,
     "Found multiple configs for deployment M in one application."),
    ({"applications": [app_config(external_scaler_enabled=True, deployments=[
        {"name": "M", "num_replicas": "auto"}])]}, ValueError,
     'external_scaler_enabled is set to True, but the following deployment(s) have autoscaling '
     'configured: "M".'),
    ({"applications": [app_config(colour="red")]}, TypeError,
     "ServeApplicationSchema got an unexpected keyword argument 'colour'"),
    ({"applications": [app_config()], "http_options": {"ssl_certfile": "c.pem"}}, ValueError,
     "Both ssl_keyfile and ssl_certfile must be provided together to enable HTTPS."),
    ({"applications": [app_config()], "proxy_location": "Everywhere"}, ValueError,
     "proxy_location: value is not one of ['Disabled', 'HeadOnly', 'EveryNode']"),
]


@pytest.mark.parametrize("config,error,text", BAD_CONFIGS)
def test_bad_configs(config, error, text):
    with pytest.raises(error) as info:
        schema.parse_config(config)
    assert text in str(info.value)


def test_config_ignores_unknown_top_level_and_http_fields_and_takes_remote_uris():
    config = schema.parse_config({
        "future_field": 1, "http_options": {"port": 9999, "future_option": True},
        "applications": [app_config(runtime_env={"working_dir": "s3://bucket/code.zip"})]})
    assert config.http_options.port == 9999


def test_config_deployment_entries_keep_only_what_they_set():
    config = schema.parse_config({"applications": [app_config(deployments=[
        {"name": "M", "num_replicas": "auto", "autoscaling_config": {"max_replicas": 6},
         "user_config": {"k": 1}}])]})
    entry = config.applications[0].deployments[0]
    assert set(entry.options()) == {"num_replicas", "autoscaling_config", "user_config"}
    assert entry.layer()["autoscaling_config"].max_replicas == 6
    assert entry.layer()["autoscaling_config"].min_replicas == 1
    assert entry.is_autoscaling_configured()
    assert config.applications[0].deployment_names == ["M"]


def test_single_application_config_form():
    config = schema.parse_config(app_config(host="127.0.0.1", port=8123, name="solo"))
    assert (config.http_options.host, config.http_options.port) == ("127.0.0.1", 8123)
    assert config.applications[0].name == "solo"


def test_load_config_file(tmp_path):
    path = tmp_path / "serve.yaml"
    try:
        import yaml  # noqa: F401
        path.write_text(textwrap.dedent("""\
            proxy_location: HeadOnly
            http_options:
              port: 8500
            applications:
              - name: a
                route_prefix: /a
                import_path: pkg.mod:app
                deployments:
                  - name: Model
                    num_replicas: 2
            """))
    except ImportError:
        path.write_text(json.dumps({"proxy_location": "HeadOnly", "http_options": {"port": 8500},
                                    "applications": [app_config(name="a", route_prefix="/a",
                                                                deployments=[{
                                                                    "name": "Model",
                                                                    "num_replicas": 2}])]}))
    config = schema.load_config_file(str(path))
    assert config.proxy_location == ProxyLocation.HeadOnly and config.http_options.port == 8500
    assert config.applications[0].deployments[0].layer() == {"num_replicas": 2}


def test_a_config_applies_over_the_code_it_names(tmp_path, monkeypatch):
    module = tmp_path / "config_app_module.py"
    module.write_text(textwrap.dedent("""\
        from tessera import serve

        @serve.deployment(max_ongoing_requests=3)
        class Model:
            pass

        app = Model.bind()
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    config = schema.parse_config({"applications": [{
        "import_path": "config_app_module:app", "route_prefix": "/m",
        "deployments": [{"name": "Model", "num_replicas": 2}]}]})
    entry = config.applications[0]
    built = build.build_application(build.load_application(entry.import_path, entry.args),
                                    entry.name, entry.route_prefix,
                                    deployment_overrides=entry.deployments)
    options = built.deployment("Model").spec["options"]
    assert (options["num_replicas"], options["max_ongoing_requests"]) == (2, 3)
    with pytest.raises(ValueError, match="Deployment 'Missing' in the config"):
        build.build_application(build.load_application(entry.import_path), entry.name,
                                deployment_overrides=[{"name": "Missing"}])


# ---------------------------------------------------------------------------------------------
# Configs of the Python API.


def test_http_options_defaults_and_environment(monkeypatch):
    options = HTTPOptions()
    assert (options.host, options.port, options.root_path, options.request_timeout_s,
            options.keep_alive_timeout_s) == ("127.0.0.1", 8000, "", None, 90)
    assert options.location == DeploymentMode.HeadOnly
    monkeypatch.setenv("RAY_SERVE_DEFAULT_HTTP_HOST", "0.0.0.0")
    monkeypatch.setenv("RAY_SERVE_DEFAULT_HTTP_PORT", "8111")
    monkeypatch.setenv("RAY_SERVE_HTTP_KEEP_ALIVE_TIMEOUT_S", "5")
    options = HTTPOptions()
    assert (options.host, options.port, options.keep_alive_timeout_s) == ("0.0.0.0", 8111, 5)
    assert schema.HTTPOptionsSchema().host == "0.0.0.0"
    assert schema.HTTPOptionsSchema().keep_alive_timeout_s == 5
    monkeypatch.setenv("RAY_SERVE_DEFAULT_HTTP_PORT", "eighty")
    with pytest.raises(ValueError, match="RAY_SERVE_DEFAULT_HTTP_PORT must be an integer"):
        HTTPOptions()


def test_http_options_checks():
    assert HTTPOptions(host=None).location == DeploymentMode.NoServer
    with pytest.raises(ValueError, match="Both ssl_keyfile and ssl_certfile must be provided "
                                         "together to enable HTTPS."):
        HTTPOptions(ssl_keyfile="k.pem")
    assert HTTPOptions(ssl_keyfile="k.pem", ssl_certfile="c.pem").ssl_certfile == "c.pem"
    with pytest.raises(TypeError, match="port: value is not a valid integer"):
        HTTPOptions(port="80")
    with pytest.raises(TypeError, match="HTTPOptions got an unexpected keyword argument 'hots'"):
        HTTPOptions(hots="x")
    options = HTTPOptions()
    with pytest.raises(ValueError, match="Both ssl_keyfile"):
        options.ssl_certfile = "c.pem"
    assert options.ssl_certfile is None  # a refused assignment changes nothing


def test_grpc_options_and_proxy_location():
    assert (gRPCOptions().port, gRPCOptions().grpc_servicer_functions,
            gRPCOptions().request_timeout_s) == (9000, [], None)
    with pytest.raises(TypeError, match="grpc_servicer_functions: value is not a valid list"):
        gRPCOptions(grpc_servicer_functions="a.b")
    assert ProxyLocation._to_deployment_mode("Disabled") == DeploymentMode.NoServer
    assert ProxyLocation._to_deployment_mode(ProxyLocation.EveryNode) == DeploymentMode.EveryNode
    assert ProxyLocation._from_deployment_mode("NoServer") == ProxyLocation.Disabled
    assert ProxyLocation._from_deployment_mode(None) is None


def test_autoscaling_config():
    config = AutoscalingConfig()
    assert (config.min_replicas, config.initial_replicas, config.max_replicas,
            config.target_ongoing_requests, config.look_back_period_s, config.upscale_delay_s,
            config.downscale_delay_s, config.downscale_to_zero_delay_s,
            config.aggregation_function) == (1, None, 1, 2.0, 30.0, 30.0, 600.0, None, "mean")
    assert config.policy == AutoscalingPolicy()
    assert config.get_upscaling_factor() == 1.0
    assert AutoscalingConfig(upscaling_factor=2).get_upscaling_factor() == 2.0
    assert AutoscalingConfig(downscale_smoothing_factor=0.5).get_downscaling_factor() == 0.5
    assert AutoscalingConfig(aggregation_function="MAX").aggregation_function == "max"
    assert AutoscalingConfig(min_replicas=0).min_replicas == 0
    with pytest.raises(ValueError, match="min_replicas \\(2\\) must be less than or equal to "
                                         "initial_replicas \\(1\\)!"):
        AutoscalingConfig(min_replicas=2, max_replicas=3, initial_replicas=1)
    with pytest.raises(ValueError, match="max_replicas \\(3\\) must be greater than or equal "
                                         "to initial_replicas \\(4\\)!"):
        AutoscalingConfig(max_replicas=3, initial_replicas=4)
    with pytest.raises(ValueError, match="min_replicas: ensure this value is greater than or "
                                         "equal to 0"):
        AutoscalingConfig(min_replicas=-1)
    with pytest.raises(ValueError, match="aggregation_function: value is not one of"):
        AutoscalingConfig(aggregation_function="median")
    with pytest.warns(DeprecationWarning, match="`metrics_interval_s` field in "
                                                "AutoscalingConfig is deprecated"):
        AutoscalingConfig(metrics_interval_s=5)


def test_policy_and_router_given_as_callables_become_import_paths():
    def my_policy(ctx):
        return 1, {}

    policy = AutoscalingPolicy(policy_function=my_policy)
    assert policy.policy_function.endswith("my_policy") and not policy.is_default_policy_function()
    assert AutoscalingPolicy().is_default_policy_function()
    assert RequestRouterConfig().is_default_request_router()


def test_logging_config_defaults_and_environment(monkeypatch):
    config = LoggingConfig()
    assert (config.encoding, config.log_level, config.logs_dir, config.enable_access_log,
            config.additional_log_standard_attrs) == ("TEXT", "INFO", None, True, [])
    assert LoggingConfig(log_level=10).log_level == "DEBUG"
    monkeypatch.setenv("RAY_SERVE_LOG_ENCODING", "JSON")
    assert LoggingConfig().encoding == "JSON"


# ---------------------------------------------------------------------------------------------
# Import paths.


@pytest.fixture
def builder_module(tmp_path, monkeypatch):
    (tmp_path / "serve_builders.py").write_text(textwrap.dedent("""\
        from tessera import serve

        @serve.deployment
        class Echo:
            def __init__(self, word="hi"):
                self.word = word

        app = Echo.bind()

        class Nested:
            app = Echo.bind("nested")

        def build(args):
            return Echo.bind(args.get("word", "built"))

        def build_wrong(args):
            return "not an app"

        def build_two(a, b):
            return Echo.bind()

        not_an_app = 42
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "serve_builders"
    sys.modules.pop("serve_builders", None)


def test_import_paths_load_applications_and_builders(builder_module):
    for path in ("serve_builders:app", "serve_builders.app"):
        assert isinstance(build.load_application(path), serve.Application)
    nested = build.load_application("serve_builders:Nested.app")
    assert nested._bound_deployment.init_args == ("nested",)
    built = build.load_application("serve_builders:build", {"word": "yo"})
    assert built._bound_deployment.init_args == ("yo",)


@pytest.mark.parametrize("path,args,error,text", [
    ("serve_builders:app", {"a": 1}, ValueError,
     "Arguments can only be passed to an application builder function, not an already built "
     "application."),
    ("serve_builders:build_wrong", {}, TypeError,
     "Application builder functions must return an `Application`"),
    ("serve_builders:build_two", {}, TypeError,
     "Application builder functions should take exactly one parameter"),
    ("serve_builders:not_an_app", {}, TypeError,
     "Expected a built Serve application or an application builder function"),
    ("serve_builders", {}, ValueError, "must contain at least one dot or colon"),
])
def test_import_path_errors(builder_module, path, args, error, text):
    with pytest.raises(error, match=None) as info:
        build.load_application(path, args)
    assert text in str(info.value)


def test_import_path_of_a_missing_module():
    with pytest.raises(ModuleNotFoundError):
        build.load_application("no_such_serve_module:app")


# ---------------------------------------------------------------------------------------------
# Exceptions and contexts.


def test_exception_texts_and_pickling():
    assert str(BackPressureError(3, 2)) == (
        "Request dropped due to backpressure (num_queued_requests=3, max_queued_requests=2).")
    cancelled = RequestCancelledError("r1")
    assert str(cancelled) == "Request r1 was cancelled."
    assert str(RequestCancelledError()) == "Request was cancelled."
    assert isinstance(cancelled, TaskCancelledError) and isinstance(cancelled, RayServeException)
    unavailable = DeploymentUnavailableError(context.DeploymentID("D", "A"))
    assert str(unavailable) == ("Deployment(name='D', app='A') is unavailable because it failed "
                                "to deploy.")
    for error in (BackPressureError(3, 2), cancelled, unavailable):
        assert str(pickle.loads(pickle.dumps(error))) == str(error)


def test_replica_context_outside_a_replica(monkeypatch):
    monkeypatch.setattr(context, "_process_replica", None)
    with pytest.raises(RayServeException, match="`serve.get_replica_context\\(\\)` may only be "
                                                "called from within a Ray Serve deployment."):
        serve.get_replica_context()
    assert serve.get_multiplexed_model_id() == ""


def replica_context(name="D"):
    replica_id = context.ReplicaID("r1", context.DeploymentID(name, "app"))
    return context.ReplicaContext(replica_id, servable_object=None)


def test_replica_context_fields():
    async def inside():
        ctx = replica_context()
        context._set_internal_replica_context(ctx)
        got = serve.get_replica_context()
        return got.app_name, got.deployment, got.replica_tag

    assert asyncio.run(inside()) == ("app", "D", "r1")


# ---------------------------------------------------------------------------------------------
# @serve.batch.


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


async def _gather(*coroutines):
    return await asyncio.gather(*coroutines)


def run_all(*coroutines):
    """Runs the coroutines concurrently on one new loop; their results in order."""
    return run(_gather(*coroutines))


def recording_batcher(**settings):
    batches = []

    @serve.batch(**settings)
    async def double(items):
        batches.append(list(items))
        return [item * 2 for item in items]

    return double, batches


def test_batches_flush_at_max_batch_size():
    double, batches = recording_batcher(max_batch_size=3, batch_wait_timeout_s=1000)
    results = run_all(*(double(i) for i in range(6)))
    assert results == [0, 2, 4, 6, 8, 10]
    assert batches == [[0, 1, 2], [3, 4, 5]]


def test_batches_flush_after_the_wait_timeout():
    double, batches = recording_batcher(max_batch_size=10, batch_wait_timeout_s=0)
    assert run_all(double(1), double(2)) == [2, 4]
    assert batches == [[1, 2]]
    double, batches = recording_batcher(max_batch_size=10, batch_wait_timeout_s=0.01)
    assert run(double(5)) == 10  # a batch of one ends when the wait is over
    assert batches == [[5]]


def test_batch_size_fn_measures_batches():
    batches = []

    @serve.batch(max_batch_size=5, batch_wait_timeout_s=0.01, batch_size_fn=lambda items: sum(
        len(item) for item in items))
    async def upper(items):
        batches.append(list(items))
        return [item.upper() for item in items]

    assert run_all(upper("aa"), upper("bbb"), upper("c")) == ["AA", "BBB", "C"]
    assert batches == [["aa", "bbb"], ["c"]]
    with pytest.raises(RuntimeError, match="Size of item is greater than max_batch_size"):
        run(upper("toolong"))


async def _peak_concurrency(max_concurrent_batches):
    running, peak, release = [0], [0], asyncio.Event()

    @serve.batch(max_batch_size=1, batch_wait_timeout_s=0,
                 max_concurrent_batches=max_concurrent_batches)
    async def work(items):
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await release.wait()
        running[0] -= 1
        return items

    calls = [asyncio.ensure_future(work(i)) for i in range(3)]
    for _ in range(50):  # let the batches that may start do so
        await asyncio.sleep(0)
    started = running[0]
    release.set()
    assert await asyncio.gather(*calls) == [0, 1, 2]
    return started, peak[0]


def test_max_concurrent_batches():
    assert run(_peak_concurrency(1)) == (1, 1)
    assert run(_peak_concurrency(2)) == (2, 2)


def test_generator_batches_end_each_callers_stream_on_its_own():
    @serve.batch(max_batch_size=2, batch_wait_timeout_s=1000)
    async def count(limits):
        for step in range(3):
            yield [step if step < limit else StopIteration for limit in limits]

    async def collect(limit):
        return [value async for value in count(limit)]

    assert run_all(collect(1), collect(3)) == [[0], [0, 1, 2]]


def test_errors_reach_every_caller_of_the_batch():
    @serve.batch(max_batch_size=2, batch_wait_timeout_s=1000)
    async def fail(items):
        raise KeyError("bad batch")

    async def both():
        return await asyncio.gather(fail(1), fail(2), return_exceptions=True)

    errors = run(both())
    assert all(isinstance(e, KeyError) for e in errors) and len(errors) == 2

    @serve.batch(max_batch_size=2, batch_wait_timeout_s=1000)
    async def short(items):
        return items[:1]

    async def both_short():
        return await asyncio.gather(short(1), short(2), return_exceptions=True)

    for error in run(both_short()):
        assert isinstance(error, RayServeException)
        assert str(error) == ("Batched function doesn't preserve batch size. The input list "
                              "has length 2 but the returned list has length 1.")


def test_a_cancelled_caller_does_not_break_its_batch():
    async def scenario():
        batches, release = [], asyncio.Event()

        @serve.batch(max_batch_size=2, batch_wait_timeout_s=0)
        async def slow(items):
            batches.append(list(items))
            await release.wait()
            return items

        first = asyncio.ensure_future(slow("running-a"))
        second = asyncio.ensure_future(slow("running-b"))
        for _ in range(20):
            await asyncio.sleep(0)
        queued = asyncio.ensure_future(slow("queued-cancelled"))
        kept = asyncio.ensure_future(slow("queued-kept"))
        for _ in range(20):
            await asyncio.sleep(0)
        queued.cancel()  # while its batch waits for the running one
        second.cancel()  # while its batch runs
        release.set()
        results = await asyncio.gather(first, second, queued, kept, return_exceptions=True)
        return batches, results

    batches, results = run(scenario())
    assert batches == [["running-a", "running-b"], ["queued-kept"]]
    assert results[0] == "running-a" and results[3] == "queued-kept"
    assert isinstance(results[1], asyncio.CancelledError)
    assert isinstance(results[2], asyncio.CancelledError)


def test_batch_setters_change_settings_live():
    double, batches = recording_batcher(max_batch_size=10, batch_wait_timeout_s=1000)
    double.set_max_batch_size(2)
    double.set_batch_wait_timeout_s(0)
    assert double._get_max_batch_size() == 2 and double._get_batch_wait_timeout_s() == 0
    assert run_all(*(double(i) for i in range(4))) == [0, 2, 4, 6]
    assert batches == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="max_batch_size must be an integer >= 1, got 0"):
        double.set_max_batch_size(0)
    with pytest.raises(ValueError, match="batch_wait_timeout_s must be a float >= 0, got -1"):
        double.set_batch_wait_timeout_s(-1)
    assert double._get_max_batch_size() == 2


def test_batched_methods_batch_per_instance():
    class Doubler:
        def __init__(self, factor):
            self.factor = factor
            self.batches = []

        @serve.batch(max_batch_size=4, batch_wait_timeout_s=0)
        async def handle(self, items):
            self.batches.append(list(items))
            return [item * self.factor for item in items]

    a, b = Doubler(2), Doubler(10)
    assert run_all(a.handle(1), b.handle(1), a.handle(2)) == [2, 10, 4]
    assert (a.batches, b.batches) == ([[1, 2]], [[1]])


def test_requests_of_different_models_are_batched_apart():
    seen = []

    @serve.batch(max_batch_size=4, batch_wait_timeout_s=0)
    async def infer(items):
        seen.append((serve.get_multiplexed_model_id(), sorted(items)))
        return items

    async def call(model_id, item):
        context._set_request_context(context.RequestContext(multiplexed_model_id=model_id))
        return await infer(item)

    assert run_all(call("m1", 1), call("m2", 2), call("m1", 3)) == [1, 2, 3]
    assert sorted(seen) == [("m1", [1, 3]), ("m2", [2])]


@pytest.mark.parametrize("kwargs,error,text", [
    ({"max_batch_size": 0}, ValueError, "max_batch_size must be an integer >= 1, got 0"),
    ({"max_batch_size": "2"}, TypeError, "max_batch_size must be integer >= 1, got 2"),
    ({"batch_wait_timeout_s": -1}, ValueError, "batch_wait_timeout_s must be a float >= 0"),
    ({"batch_wait_timeout_s": "1"}, TypeError, "batch_wait_timeout_s must be a float >= 0"),
    ({"max_concurrent_batches": 0}, TypeError,
     "max_concurrent_batches must be an integer >= 1, got 0"),
    ({"batch_size_fn": 3}, TypeError, "batch_size_fn must be a callable or None"),
])
def test_batch_settings_are_checked(kwargs, error, text):
    with pytest.raises(error) as info:
        serve.batch(**kwargs)
    assert text in str(info.value)


def test_batch_needs_async_functions():
    with pytest.raises(TypeError, match="Functions decorated with @serve.batch must be "
                                        "'async def'"):
        @serve.batch
        def sync(items):
            return items
    with pytest.raises(TypeError, match="can only be used to decorate functions or methods"):
        serve.batch(42)


# ---------------------------------------------------------------------------------------------
# @serve.multiplexed.


class _SyncModel:
    def __init__(self, model_id, log):
        self.model_id = model_id
        self.log = log

    def __del__(self):
        self.log.append(("del", self.model_id))


class _AsyncModel:
    def __init__(self, model_id, log):
        self.model_id = model_id
        self.log = log
        self.__del__ = self.release  # an async __del__ (on the instance: GC never calls it)

    async def release(self):
        self.log.append(("adel", self.model_id))


def test_multiplexed_lru_evicts_and_calls_del():
    class Deployment:
        def __init__(self):
            self.log = []

        @serve.multiplexed(max_num_models_per_replica=2)
        async def get_model(self, model_id):
            self.log.append(("load", model_id))
            kind = _AsyncModel if model_id.startswith("async") else _SyncModel
            return kind(model_id, self.log)

    async def scenario():
        context._set_internal_replica_context(replica_context())
        owner = Deployment()
        models = [await owner.get_model(i) for i in ("a", "async-b", "a", "c", "d")]
        return owner, models

    owner, models = run(scenario())
    assert [m.model_id for m in models] == ["a", "async-b", "a", "c", "d"]
    # The second "a" is a cache hit, which makes "async-b" the least recently used; each
    # eviction calls (or awaits) the model's __del__ before the next load.
    assert owner.log[:6] == [("load", "a"), ("load", "async-b"), ("adel", "async-b"),
                             ("load", "c"), ("del", "a"), ("load", "d")]


def test_multiplexed_unlimited_and_concurrent_loads_load_once():
    loads = []

    @serve.multiplexed(max_num_models_per_replica=-1)
    async def load(model_id):
        loads.append(model_id)
        await asyncio.sleep(0)
        return model_id.upper()

    async def scenario():
        context._set_internal_replica_context(replica_context())
        first = await asyncio.gather(load("x"), load("x"), load("y"))
        more = [await load(str(i)) for i in range(5)]
        return first, more

    first, more = run(scenario())
    assert first == ["X", "X", "Y"] and more == ["0", "1", "2", "3", "4"]
    assert sorted(loads) == sorted(["x", "y", "0", "1", "2", "3", "4"])


def test_multiplexed_checks():
    with pytest.raises(TypeError, match="@serve.multiplexed can only be used to decorate async "
                                        "functions or methods."):
        @serve.multiplexed
        def sync(model_id):
            return model_id
    with pytest.raises(TypeError, match="with at least one 'model_id: str' argument."):
        @serve.multiplexed
        async def no_args():
            return None
    with pytest.raises(TypeError, match="with at least one 'model_id: str' argument."):
        @serve.multiplexed
        async def too_many(self, model_id, extra):
            return None
    with pytest.raises(ValueError, match="max_num_models_per_replica must be positive."):
        serve.multiplexed(max_num_models_per_replica=0)
    with pytest.raises(TypeError, match="max_num_models_per_replica must be an integer."):
        serve.multiplexed(max_num_models_per_replica="3")


def test_multiplexed_needs_a_replica_and_a_model_id(monkeypatch):
    monkeypatch.setattr(context, "_process_replica", None)

    @serve.multiplexed
    async def load(model_id):
        return model_id

    with pytest.raises(RuntimeError, match="`@serve.multiplex` can only be used within a "
                                           "deployment"):
        run(load("a"))

    async def bad_ids():
        context._set_internal_replica_context(replica_context())
        errors = []
        for model_id in ("", 5):
            try:
                await load(model_id)
            except (TypeError, ValueError) as e:
                errors.append(str(e))
        return errors

    assert run(bad_ids()) == ["The model ID cannot be empty.", "The model ID must be a string."]


def test_get_multiplexed_model_id_reads_the_request_context():
    async def inside():
        context._set_request_context(context.RequestContext(multiplexed_model_id="m7"))
        return serve.get_multiplexed_model_id()

    assert run(inside()) == "m7"
