"""How a call's arguments travel: one value holding the positional and keyword arguments, in
which every top-level ObjectRef is replaced by a slot, followed by those refs as arguments of
their own. The runtime resolves the refs to their values before the task runs (Ray's rule:
top-level refs are passed as values, refs nested in containers stay refs), and a call whose
arguments are large is itself put into the object store and passed by reference, so the task
message stays small and the worker reads it zero-copy.

Threading: pure functions. Cost: one serialization of the arguments (none for a call without
any).
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from tessera import _core
from tessera._private import serialization


class _Slot:
    """Stands for the ref passed as argument `index` + 1."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __reduce__(self):
        return (_Slot, (self.index,))


# A call without arguments, serialized once: the common no-argument call skips a pickling on
# both sides (encode returns it, decode recognises it).
_NO_ARGUMENTS = serialization.serialize(((), {})).to_bytes()


def encode(args: Sequence[Any], kwargs: Dict[str, Any], put) -> List[Any]:
    """The core's argument list: [the call's value (bytes, or an ObjectRef when large), ref...].
    `put(serialized)` stores a large call value and returns its ref."""
    if not args and not kwargs:
        return [_NO_ARGUMENTS]
    refs: List[Any] = []

    def slot(value: Any) -> Any:
        if isinstance(value, _core.ObjectRef):
            refs.append(value)
            return _Slot(len(refs) - 1)
        return value

    call = (tuple(slot(a) for a in args), {k: slot(v) for k, v in kwargs.items()})
    serialized = serialization.serialize(call)
    if serialized.total_size >= serialization.INLINE_BUFFER_LIMIT:
        first: Any = put(serialized)
    else:
        first = serialized.to_bytes()
    return [first] + refs


def decode(buffers: Sequence[Any]) -> Tuple[tuple, Dict[str, Any]]:
    """The (args, kwargs) a task is called with, from the Buffers the core fetched."""
    if not buffers:
        return (), {}
    if len(buffers) == 1 and len(buffers[0]) == len(_NO_ARGUMENTS) and \
            bytes(buffers[0]) == _NO_ARGUMENTS:
        return (), {}
    args, kwargs = serialization.deserialize(buffers[0])
    values = [serialization.deserialize(buffer) for buffer in buffers[1:]]

    def fill(value: Any) -> Any:
        return values[value.index] if isinstance(value, _Slot) else value

    return tuple(fill(a) for a in args), {k: fill(v) for k, v in kwargs.items()}
