"""What a handle found by name (`tessera.get_actor`) is built with: the creator writes its class's
name, methods, `@tessera.method` options and concurrency groups into the head's record of a named
actor (ActorInfo.handle_metadata, at most 64 KiB), so that any driver's handle calls a generator
method as a generator, a `num_returns=2` method with two refs, and a method in its concurrency
group, as the creator's own handle does.

JSON, never pickle: another driver (another user, perhaps) reads it, and reading it runs no code.
Exception classes of `retry_exceptions` travel as their "module.QualName" names, which is how a
call names them to the worker anyway. What does not read back as written (another version, a
damaged record) is ignored: the handle then takes any attribute for a method, as before.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, Optional

from tessera._private.options import exception_type_name

_VERSION = 1
_RETURN_WORDS = ("streaming", "dynamic")


def _encode_options(options: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(options)
    retry = out.get("retry_exceptions")
    if isinstance(retry, (list, tuple)):
        out["retry_exceptions"] = [exception_type_name(t) for t in retry]
    return out


def encode(class_name: str, methods: Iterable[str], method_options: Dict[str, Dict[str, Any]],
           groups: Iterable[str]) -> bytes:
    return json.dumps({
        "version": _VERSION,
        "class_name": class_name,
        "methods": sorted(methods),
        "method_options": {name: _encode_options(options)
                           for name, options in sorted(method_options.items())},
        "groups": sorted(groups),
    }, sort_keys=True).encode()


def _valid_options(options: Any) -> bool:
    if not isinstance(options, dict):
        return False
    for key, value in options.items():
        if key == "num_returns":
            ok = (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or \
                value in _RETURN_WORDS
        elif key == "concurrency_group":
            ok = isinstance(value, str)
        elif key == "max_task_retries":
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= -1
        elif key == "retry_exceptions":
            ok = isinstance(value, bool) or (
                isinstance(value, list) and all(isinstance(v, str) for v in value))
        else:
            ok = False
        if not ok:
            return False
    return True


def decode(data: bytes) -> Optional[Dict[str, Any]]:
    """{"class_name", "methods" (a set), "method_options", "groups" (a list)}, or None when
    `data` is empty or not what encode writes."""
    if not data:
        return None
    try:
        record = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict) or record.get("version") != _VERSION:
        return None
    class_name = record.get("class_name")
    methods = record.get("methods")
    method_options = record.get("method_options")
    groups = record.get("groups")
    if not isinstance(class_name, str) or not isinstance(methods, list) or \
            not all(isinstance(m, str) for m in methods) or \
            not isinstance(method_options, dict) or not isinstance(groups, list) or \
            not all(isinstance(g, str) for g in groups) or \
            not all(isinstance(m, str) and _valid_options(o) for m, o in method_options.items()):
        return None
    return {"class_name": class_name, "methods": set(methods),
            "method_options": {m: dict(o) for m, o in method_options.items()},
            "groups": list(groups)}
