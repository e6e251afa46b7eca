"""Ray Serve's CLI (`serve ...`) as `tessera serve ...` (the C++ CLI runs
`python3 -m tessera.serve.scripts ...` with the same arguments):

  run TARGET [k=v ...] [--route-prefix P] [--name N] [--app-dir D] [--blocking|--non-blocking]
      [--address A]
          TARGET is an import path (`module:app` or `module.app`: an Application, or a builder
          given the k=v arguments) or a config file (.yaml/.yml/.json); deploys it and waits
          until it runs; blocking (the default) then serves until Ctrl-C (or SIGTERM) and shuts
          Serve down
  deploy CONFIG_OR_IMPORT_PATH [--address A]
          sends a config file's applications as the whole goal (others are deleted) and returns
          (`status` follows them)
  status [-n NAME] [--json] [--address A]
          Serve's status as YAML (Ray's shape: proxies by node id with their status, then
          proxy_addresses: each proxy's host:port by node id, then the applications); --json:
          the same as JSON; -n: one application's
  shutdown [-y] [--address A]
          deletes every application and stops the proxies (asks first unless -y)
  build IMPORT_PATH... [-o FILE] [--app-dir D]
          writes a config file for these applications (app1, app2, ...; route / for one, /appN
          for several) with each deployment's options set in code
  config [-n NAME] [--address A]
          the running applications' names, route prefixes and deployments, as YAML (the
          controller keeps no config file: this is what runs)

--address is the head's HOST:PORT; without it, $TESSERA_ADDRESS or $RAY_ADDRESS, else the
cluster of the state folder ($TESSERA_STATE_DIR): a running cluster is required.

Exit codes: 0 done, 1 an error (one line on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any, Dict, List, Optional

_CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def _connect(address: Optional[str]) -> None:
    import tessera

    address = address or os.environ.get("TESSERA_ADDRESS") or os.environ.get("RAY_ADDRESS")
    tessera.init(address=address or "auto", ignore_reinit_error=True)


def _dump(value: Any) -> str:
    """YAML when PyYAML is there (as Ray prints), else JSON."""
    try:
        import yaml
    except ImportError:
        return json.dumps(value, indent=2)
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False)


def _plain(value: Any) -> Any:
    """Status dataclasses and enums as plain dicts and words."""
    import dataclasses
    import enum

    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, str):
        return str.__str__(value)
    return value


def _arguments(pairs: List[str]) -> Dict[str, str]:
    args = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise ValueError(f"Invalid application argument '{pair}', must be of the form "
                             "'key=val'.")
        args[key] = value
    return args


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _serve_until_stopped() -> None:
    """Blocks until Ctrl-C or SIGTERM, then shuts Serve down."""
    from tessera.serve import api

    signal.signal(signal.SIGTERM, _interrupt)
    api._serve_forever()


def cmd_run(args: argparse.Namespace) -> int:
    from tessera import serve
    from tessera.serve import api, build, schema

    sys.path.insert(0, os.path.abspath(args.app_dir))
    is_config = args.target.endswith(_CONFIG_SUFFIXES)
    if is_config and args.arguments:
        raise ValueError("Application arguments cannot be specified for a config file.")
    builder_args = _arguments(args.arguments)
    _connect(args.address)
    if is_config:
        names = api._deploy_config(schema.load_config_file(args.target), wait=True)
    else:
        app = build.load_application(args.target, builder_args)
        route_prefix = None if args.route_prefix == "None" else args.route_prefix
        serve.run(app, name=args.name, route_prefix=route_prefix)
        names = [args.name]
    for name in names:
        print(f"Deployed app '{name}' successfully.", flush=True)
    if args.blocking:
        _serve_until_stopped()
    return 0


def _config_from_target(target: str) -> Any:
    from tessera.serve import schema

    if target.endswith(_CONFIG_SUFFIXES):
        return schema.load_config_file(target)
    return schema.parse_config({"import_path": target})


def cmd_deploy(args: argparse.Namespace) -> int:
    from tessera.serve import api

    sys.path.insert(0, os.path.abspath(args.app_dir))
    config = _config_from_target(args.target)
    _connect(args.address)
    api._deploy_config(config)
    print("Sent deploy request successfully.\n * Use `tessera serve status` to check "
          "applications' statuses.\n * Use `tessera serve config` to see the running "
          "applications.")
    return 0


def _status_view(status: Any) -> Dict[str, Any]:
    """serve.status() as `status` prints it: Ray's shape, with each proxy's address beside."""
    plain = _plain(status)
    view: Dict[str, Any] = {"proxies": plain["proxies"],
                            "proxy_addresses": {node: proxy.address
                                                for node, proxy in status.proxies.items()}}
    view.update((key, value) for key, value in plain.items() if key != "proxies")
    return view


def cmd_status(args: argparse.Namespace) -> int:
    from tessera import serve

    _connect(args.address)
    status = _status_view(serve.status())
    if args.name is not None:
        app = status["applications"].get(args.name)
        if app is None:
            raise ValueError(f"Application '{args.name}' does not exist.")
        status = app
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print(_dump(status), end="")
    return 0


def cmd_shutdown(args: argparse.Namespace) -> int:
    from tessera import serve

    if not args.yes:
        answer = input("This will shut down Serve on the cluster. Are you sure? [y/N]: ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Aborted.")
            return 1
    _connect(args.address)
    serve.shutdown()
    print("Sent shutdown request; applications will be deleted asynchronously.")
    return 0


def _built_config(import_paths: List[str]) -> Dict[str, Any]:
    """`serve build`: one application per import path, each deployment with the options its
    code set."""
    from tessera.serve import build
    from tessera.serve._model import json_ready

    applications = []
    for index, import_path in enumerate(import_paths):
        name = f"app{index + 1}"
        route_prefix = "/" if len(import_paths) == 1 else f"/{name}"
        target = build.load_application(import_path)
        built = build.build_application(target, name, route_prefix)
        deployments = [{"name": d.name, **json_ready(d.spec["user_options"])}
                       for d in built.deployments]
        applications.append({"name": name, "route_prefix": route_prefix,
                             "import_path": import_path, "runtime_env": {},
                             "deployments": deployments})
    return {"proxy_location": "EveryNode",
            "http_options": {"host": "0.0.0.0", "port": 8000},
            "grpc_options": {"port": 9000, "grpc_servicer_functions": []},
            "logging_config": {"encoding": "TEXT", "log_level": "INFO", "logs_dir": None,
                               "enable_access_log": True},
            "applications": applications}


def cmd_build(args: argparse.Namespace) -> int:
    sys.path.insert(0, os.path.abspath(args.app_dir))
    text = _dump(_built_config(args.import_paths))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as file:
            file.write(text)
    else:
        print(text, end="")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from tessera.serve import api

    _connect(args.address)
    applications = []
    for app in api._raw_status().get("applications") or []:
        if args.name is not None and app.get("name") != args.name:
            continue
        applications.append({"name": app.get("name"), "route_prefix": app.get("route_prefix"),
                             "deployments": [{"name": d.get("name")}
                                             for d in app.get("deployments") or []]})
    if args.name is not None and not applications:
        raise ValueError(f"Application '{args.name}' does not exist.")
    print(_dump({"applications": applications}), end="")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tessera serve",
                                     description="Deploy and manage Serve applications.")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, function: Any, help_text: str, address: bool = True,
                app_dir: bool = False) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(function=function)
        if address:
            sub.add_argument("--address", "-a", default=None,
                             help="the head's HOST:PORT (default: $TESSERA_ADDRESS, "
                                  "$RAY_ADDRESS, else the state folder's cluster)")
        if app_dir:
            sub.add_argument("--app-dir", "-d", default=".",
                             help="put this folder first on the import path (default .)")
        return sub

    run = command("run", cmd_run, "Deploy an application and wait until it runs.",
                  app_dir=True)
    run.add_argument("target", help="an import path (module:app) or a config file")
    run.add_argument("arguments", nargs="*", help="key=value arguments of a builder")
    run.add_argument("--route-prefix", default="/", help='the route prefix ("/"; None: none)')
    run.add_argument("--name", default="default", help="the application's name (default)")
    run.add_argument("--blocking", dest="blocking", action="store_true", default=True,
                     help="serve until Ctrl-C, then shut down (the default)")
    run.add_argument("--non-blocking", dest="blocking", action="store_false",
                     help="return once the application runs")
    deploy = command("deploy", cmd_deploy, "Deploy a config file's applications and return.",
                     app_dir=True)
    deploy.add_argument("target", help="a config file (or one import path)")
    status = command("status", cmd_status, "Print Serve's status.")
    status.add_argument("--name", "-n", default=None, help="only this application's")
    status.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    shutdown = command("shutdown", cmd_shutdown, "Shut Serve down on the cluster.")
    shutdown.add_argument("--yes", "-y", action="store_true", help="do not ask first")
    build = command("build", cmd_build, "Write a config file for import paths.", address=False,
                    app_dir=True)
    build.add_argument("import_paths", nargs="+", help="import paths (module:app)")
    build.add_argument("--output-path", "-o", dest="output", default=None,
                       help="the file to write (default: standard output)")
    config = command("config", cmd_config, "Print the running applications.")
    config.add_argument("--name", "-n", default=None, help="only this application")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.function(args)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - one line for the person at the terminal
        print(f"tessera serve: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
