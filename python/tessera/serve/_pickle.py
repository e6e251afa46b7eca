"""Pickling of Serve's code and arguments: cloudpickle, plus the reducers Ray registers for
objects that do not pickle as they are. A Starlette `State` (every FastAPI app has one) recurses
forever when unpickled (its __getattr__ reads a field not yet restored), so it travels as its
dict.

Threading: pure functions. Cost: cloudpickle's.
"""

from __future__ import annotations

import io
import sys
from typing import Any

import cloudpickle


class ServePickler(cloudpickle.CloudPickler):
    """cloudpickle with Serve's reducers (see the module doc)."""

    def reducer_override(self, obj: Any) -> Any:
        datastructures = sys.modules.get("starlette.datastructures")
        if datastructures is not None and type(obj) is datastructures.State:
            return (datastructures.State, (dict(obj._state),))
        return super().reducer_override(obj)


def dumps(obj: Any) -> bytes:
    buffer = io.BytesIO()
    ServePickler(buffer).dump(obj)
    return buffer.getvalue()


loads = cloudpickle.loads
