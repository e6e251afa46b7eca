"""The Python value format: how tessera turns a Python object into the bytes the object store
holds, and back.

A value is one msgpack value, a fixarray of four elements (first byte 0x94):

  1. HEADER  ext32 (0xc9, u32 BE length, type 80). Payload: u8 version (1), u32 BE count n of
             out-of-band buffers, n pairs (u64 BE offset, u64 BE length) with offsets relative to
             the start of the REGION's data, then zero padding that puts the REGION's data at an
             offset from the start of the value that is a multiple of 64.
  2. REFS    array32 (0xdd, u32 BE count) of ext32 values of type 84, one per reference found
             while pickling (the persistent id is the index); each payload is the reference
             type's own encoding (register_ref_type), so the core can read them without Python.
  3. PICKLE  bin32 (0xc6, u32 BE length): a protocol-5 cloudpickle stream.
  4. REGION  bin32 (0xc6, u32 BE length): the out-of-band buffers, each at an offset from the
             start of the value that is a multiple of 64, zero padding between them.

Pickle buffers of INLINE_BUFFER_LIMIT bytes or more (contiguous NumPy arrays, and contiguous CPU
torch tensors, which are pickled through NumPy) go out of band: serialize returns views of their
memory (no copy), and deserialize hands pickle memoryview slices of the input, so a NumPy array
read back aliases the store's memory.

Values are read-only views of the store: a NumPy array read from a read-only buffer is read-only
(writing to it raises "assignment destination is read-only"); a torch tensor rebuilt from one
shares that memory and must not be written to (torch cannot mark it read-only). Copy first
(`array.copy()`, `tensor.clone()`) to modify.

Threading: serialize and deserialize share no state except the ref type registry, which
register_ref_type writes at start-up. Cost: one pickling pass; persistent_id and reducer_override
are called per pickled object (small values of only None, bool, int, float, str and bytes in
small tuples, lists and dicts skip them: the C pickler, the same bytes, ~4.5 us a value instead
of ~7); no copy of out-of-band buffers either way; deserialize copies only the pickle stream and
the ref payloads (a value with neither refs nor buffers is framed from one of 64 precomputed
heads, and read by pickle.loads from the view once its frame is recognised).
"""

from __future__ import annotations

import io
import pickle
import struct
import sys
import warnings
from typing import Any, Callable, List, Tuple

import cloudpickle

INLINE_BUFFER_LIMIT = 100 * 1024  # a pickle buffer this large or larger goes out of band

FORMAT_VERSION = 1
HEADER_EXT_TYPE = 80
REF_EXT_TYPE = 84
ALIGNMENT = 64

_FIXARRAY_4 = 0x94
_EXT32 = 0xC9
_ARRAY32 = 0xDD
_BIN32 = 0xC6

_EXT32_HEAD = struct.Struct(">BIb")  # marker, payload length, type
_U32_HEAD = struct.Struct(">BI")  # marker, length or count
_HEADER_FIXED = struct.Struct(">BI")  # version, buffer count
_BUFFER_ENTRY = struct.Struct(">QQ")  # offset, length

# The header's first bytes, fixed: fixarray, ext32 marker (length varies), type, version.
_MIN_VALUE_SIZE = 1 + _EXT32_HEAD.size + _HEADER_FIXED.size + _U32_HEAD.size * 3

# cls -> (type key, to_payload); type key -> from_payload.
_ref_encoders: dict = {}
_ref_decoders: dict = {}


def register_ref_type(
    cls: type, to_payload: Callable[[Any], bytes], from_payload: Callable[[bytes], Any]
) -> None:
    """Pickles objects of exactly `cls` by persistent id: to_payload(obj) goes into REFS, and
    from_payload(payload) rebuilds the object on load. Registering a class again replaces it."""
    key = f"{cls.__module__}.{cls.__qualname__}"
    _ref_encoders[cls] = (key, to_payload)
    _ref_decoders[key] = from_payload


class SerializedObject:
    """A serialized value as pieces: the concatenation of `parts` is the value.

    parts: the prefix bytes (everything up to the REGION's data), then for each out-of-band
    buffer a padding piece (possibly empty) and a memoryview of the buffer's own memory.
    contained_refs: the registered-type objects found while pickling, index = persistent id.
    The views keep the original objects alive; write the parts out before mutating them.
    """

    __slots__ = ("parts", "contained_refs", "total_size")

    def __init__(self, parts: list, contained_refs: list, total_size: int) -> None:
        self.parts = parts
        self.contained_refs = contained_refs
        self.total_size = total_size

    def to_bytes(self) -> bytes:
        return b"".join(self.parts)

    def __repr__(self) -> str:
        return (
            f"SerializedObject(total_size={self.total_size}, parts={len(self.parts)}, "
            f"contained_refs={len(self.contained_refs)})"
        )


def _tensor_from_numpy(array: Any) -> Any:
    """Rebuilds a CPU torch tensor sharing `array`'s memory (read-only memory included)."""
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


class _Pickler(cloudpickle.CloudPickler):
    def __init__(self, file: io.BytesIO, buffer_callback: Callable[[pickle.PickleBuffer], bool]):
        super().__init__(file, protocol=5, buffer_callback=buffer_callback)
        self.refs: list = []
        self._ref_index: dict = {}  # id(ref) -> index; refs holds them, so ids stay unique
        torch = sys.modules.get("torch")
        self._tensor_type = torch.Tensor if torch is not None else None

    def persistent_id(self, obj: Any) -> Any:
        encoder = _ref_encoders.get(type(obj))
        if encoder is None:
            return None
        index = self._ref_index.get(id(obj))
        if index is None:
            index = len(self.refs)
            self.refs.append(obj)
            self._ref_index[id(obj)] = index
        return (index, encoder[0])

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is self._tensor_type and _is_plain_cpu_tensor(obj):
            try:
                return (_tensor_from_numpy, (obj.numpy(),))
            except (TypeError, RuntimeError):  # no NumPy dtype (bfloat16) or conj/neg views
                pass
        return super().reducer_override(obj)


def _is_plain_cpu_tensor(tensor: Any) -> bool:
    return (
        tensor.device.type == "cpu"
        and not tensor.requires_grad
        and tensor.layout is sys.modules["torch"].strided
        and not tensor.is_quantized
        and tensor.is_contiguous()
    )


def _align(offset: int) -> int:
    return -(-offset // ALIGNMENT) * ALIGNMENT


# Values made only of these exact types (in small tuples, lists and dicts) pickle the same with
# the C pickler as with cloudpickle: no refs, no out-of-band buffers, no code by value. They take
# the fast path, which skips building a CloudPickler (most of a small value's cost).
_PLAIN_SCALARS = frozenset({type(None), bool, int, float, str, bytes})
_PLAIN_CONTAINERS = frozenset({tuple, list, dict})
_PLAIN_MAX_ITEMS = 16
_PLAIN_MAX_DEPTH = 3


def _is_plain(value: Any, depth: int = 0) -> bool:
    kind = type(value)
    if kind in _PLAIN_SCALARS:
        return True
    if kind not in _PLAIN_CONTAINERS or depth >= _PLAIN_MAX_DEPTH or len(value) > _PLAIN_MAX_ITEMS:
        return False
    if kind is dict:
        return all(type(k) is str and _is_plain(v, depth + 1) for k, v in value.items())
    return all(_is_plain(item, depth + 1) for item in value)


def _pickle(value: Any) -> Tuple[Any, List[memoryview], list]:
    """(pickle stream, out-of-band buffers, contained refs) of `value`."""
    if _is_plain(value):
        return pickle.dumps(value, protocol=5), [], []
    buffers: List[memoryview] = []

    def buffer_callback(buffer: pickle.PickleBuffer) -> bool:
        view = buffer.raw()
        if view.nbytes < INLINE_BUFFER_LIMIT:
            return True  # in band
        buffers.append(view)
        return False

    stream = io.BytesIO()
    pickler = _Pickler(stream, buffer_callback)
    try:
        pickler.dump(value)
    except Exception as e:
        raise TypeError(f"cannot serialize {type(value).__name__}: {e}") from e
    return stream.getbuffer(), buffers, pickler.refs


# A value with no out-of-band buffers and no refs: everything before its pickle's length is one
# of 64 byte strings (by the padding that puts the empty REGION's data on a 64-byte boundary).
# 27 bytes come before the pickle: fixarray, the header's ext32 head, version and buffer count,
# the empty REFS array head, and the two bin32 heads.
_PLAIN_FIXED = 1 + _EXT32_HEAD.size + _HEADER_FIXED.size + _U32_HEAD.size * 3
_PLAIN_HEADS = [
    bytes([_FIXARRAY_4]) + _EXT32_HEAD.pack(_EXT32, _HEADER_FIXED.size + padding, HEADER_EXT_TYPE)
    + _HEADER_FIXED.pack(FORMAT_VERSION, 0) + bytes(padding) + _U32_HEAD.pack(_ARRAY32, 0)
    for padding in range(ALIGNMENT)
]
_EMPTY_REGION = _U32_HEAD.pack(_BIN32, 0)


def serialize(value: Any) -> SerializedObject:
    """Pickles `value` into the value format. Raises TypeError naming the value's type when it
    cannot be pickled (the pickling error is chained)."""
    pickled, buffers, contained_refs = _pickle(value)
    if not buffers and not contained_refs:
        n = len(pickled)
        head = _PLAIN_HEADS[-(_PLAIN_FIXED + n) % ALIGNMENT]
        prefix = b"".join((head, _U32_HEAD.pack(_BIN32, n), pickled, _EMPTY_REGION))
        return SerializedObject([prefix], contained_refs, len(prefix))
    return _frame(pickled, buffers, contained_refs)


def _frame(pickled: Any, buffers: List[memoryview], contained_refs: list) -> SerializedObject:
    """The value format around a pickle stream, its out-of-band buffers and its refs."""
    # Buffer offsets inside the region, each a multiple of ALIGNMENT.
    layout: List[Tuple[int, int]] = []
    region_size = 0
    for view in buffers:
        offset = _align(region_size)
        layout.append((offset, view.nbytes))
        region_size = offset + view.nbytes

    refs = bytearray(_U32_HEAD.pack(_ARRAY32, len(contained_refs)))
    for ref in contained_refs:
        payload = _ref_encoders[type(ref)][1](ref)
        refs += _EXT32_HEAD.pack(_EXT32, len(payload), REF_EXT_TYPE)
        refs += payload

    header_unpadded = _HEADER_FIXED.size + _BUFFER_ENTRY.size * len(layout)
    region_start_unpadded = (
        1 + _EXT32_HEAD.size + header_unpadded + len(refs) + _U32_HEAD.size * 2 + len(pickled)
    )
    padding = _align(region_start_unpadded) - region_start_unpadded

    prefix = bytearray()
    prefix.append(_FIXARRAY_4)
    prefix += _EXT32_HEAD.pack(_EXT32, header_unpadded + padding, HEADER_EXT_TYPE)
    prefix += _HEADER_FIXED.pack(FORMAT_VERSION, len(layout))
    for offset, length in layout:
        prefix += _BUFFER_ENTRY.pack(offset, length)
    prefix += bytes(padding)
    prefix += refs
    prefix += _U32_HEAD.pack(_BIN32, len(pickled))
    prefix += pickled
    prefix += _U32_HEAD.pack(_BIN32, region_size)

    parts: list = [bytes(prefix)]
    end = 0
    for (offset, _), view in zip(layout, buffers):
        parts.append(bytes(offset - end))
        parts.append(view)
        end = offset + view.nbytes
    return SerializedObject(parts, contained_refs, len(prefix) + region_size)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, buffers: List[memoryview], ref_payloads: List[bytes]):
        super().__init__(file, buffers=buffers)
        self._ref_payloads = ref_payloads
        self._refs: dict = {}  # index -> rebuilt ref: one object per REFS entry

    def persistent_load(self, pid: Any) -> Any:
        index, key = pid
        ref = self._refs.get(index)
        if ref is None:
            decoder = _ref_decoders.get(key)
            if decoder is None:
                raise pickle.UnpicklingError(f"reference type {key} is not registered")
            ref = self._refs[index] = decoder(self._ref_payloads[index])
        return ref


def _malformed(reason: str) -> ValueError:
    return ValueError(f"not a tessera Python value: {reason}")


class _Reader:
    """Bounds-checked reads from a byte view."""

    def __init__(self, view: memoryview) -> None:
        self.view = view
        self.pos = 0

    def unpack(self, layout: struct.Struct, what: str) -> tuple:
        if self.pos + layout.size > len(self.view):
            raise _malformed(
                f"{what} at byte {self.pos} runs past the end ({len(self.view)} bytes)"
            )
        fields = layout.unpack_from(self.view, self.pos)
        self.pos += layout.size
        return fields

    def take(self, length: int, what: str) -> memoryview:
        if self.pos + length > len(self.view):
            raise _malformed(
                f"{what} of {length} bytes at byte {self.pos} runs past the end "
                f"({len(self.view)} bytes)"
            )
        piece = self.view[self.pos : self.pos + length]
        self.pos += length
        return piece

    def head(self, layout: struct.Struct, marker: int, what: str) -> tuple:
        """Unpacks a msgpack head whose first field is its marker byte; returns the rest."""
        start = self.pos
        found, *fields = self.unpack(layout, what)
        if found != marker:
            raise _malformed(
                f"{what} at byte {start} has marker 0x{found:02x}, not 0x{marker:02x}"
            )
        return tuple(fields)


def _as_byte_view(data: Any) -> memoryview:
    view = memoryview(data)
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    return view


def _plain_pickle(view: memoryview) -> Any:
    """The pickle of a value with no buffers and no refs, as serialize frames it; None for any
    other (the full reader then checks it)."""
    if len(view) < _PLAIN_FIXED or view[0] != _FIXARRAY_4 or view[1] != _EXT32:
        return None
    header_size = int.from_bytes(view[2:6], "big")
    refs_at = 1 + _EXT32_HEAD.size + header_size
    pickle_at = refs_at + _U32_HEAD.size * 2
    if (view[6] != HEADER_EXT_TYPE or view[7] != FORMAT_VERSION or view[8:12] != b"\0\0\0\0"
            or pickle_at > len(view) or view[refs_at] != _ARRAY32
            or view[refs_at + 1:refs_at + 5] != b"\0\0\0\0" or view[refs_at + 5] != _BIN32):
        return None
    size = int.from_bytes(view[refs_at + 6:pickle_at], "big")
    end = pickle_at + size
    if end + _U32_HEAD.size > len(view) or view[end] != _BIN32:
        return None
    region_end = end + _U32_HEAD.size + int.from_bytes(view[end + 1:end + 5], "big")
    if region_end > len(view):
        return None  # the full reader says what is wrong
    return view[pickle_at:end]


def deserialize(data: Any) -> Any:
    """Rebuilds a value from `data` (anything with the buffer protocol). Out-of-band buffers are
    views of `data`, read-only when it is. Raises ValueError for malformed framing; bytes after
    the REGION are ignored."""
    view = _as_byte_view(data)
    plain = _plain_pickle(view)
    if plain is not None:
        return pickle.loads(plain)  # no buffers, no refs: the C unpickler straight from the view
    reader = _Reader(view)
    if len(reader.view) == 0 or reader.view[0] != _FIXARRAY_4:
        first = f"0x{reader.view[0]:02x}" if len(reader.view) else "nothing"
        raise _malformed(f"starts with {first}, not 0x94")
    reader.pos = 1

    header_size, ext_type = reader.head(_EXT32_HEAD, _EXT32, "header")
    if ext_type != HEADER_EXT_TYPE:
        raise _malformed(f"header has ext type {ext_type}, not {HEADER_EXT_TYPE}")
    header = _Reader(reader.take(header_size, "header"))
    version, count = header.unpack(_HEADER_FIXED, "header")
    if version != FORMAT_VERSION:
        raise _malformed(
            f"format version {version} is unknown (this reader knows {FORMAT_VERSION})"
        )
    layout = [header.unpack(_BUFFER_ENTRY, "buffer table") for _ in range(count)]

    (ref_count,) = reader.head(_U32_HEAD, _ARRAY32, "refs")
    ref_payloads = []
    for _ in range(ref_count):
        length, ext_type = reader.head(_EXT32_HEAD, _EXT32, "ref")
        if ext_type != REF_EXT_TYPE:
            raise _malformed(f"ref has ext type {ext_type}, not {REF_EXT_TYPE}")
        ref_payloads.append(reader.take(length, "ref").tobytes())

    (pickle_size,) = reader.head(_U32_HEAD, _BIN32, "pickle")
    pickled = reader.take(pickle_size, "pickle")

    (region_size,) = reader.head(_U32_HEAD, _BIN32, "region")
    region = reader.take(region_size, "region")
    for offset, length in layout:
        if offset + length > region_size:
            raise _malformed(
                f"buffer at offset {offset} of {length} bytes lies outside the "
                f"{region_size}-byte region"
            )
    buffers = [region[offset : offset + length] for offset, length in layout]

    if not buffers and not ref_payloads:
        return pickle.loads(pickled)  # nothing to resolve: the C unpickler straight from the view
    return _Unpickler(io.BytesIO(pickled.tobytes()), buffers, ref_payloads).load()


def is_python_value(data: Any) -> bool:
    """Cheap check that `data` starts like a value of this format (fixarray, header ext type,
    version)."""
    view = _as_byte_view(data)
    if len(view) < _MIN_VALUE_SIZE:
        return False
    return (
        view[0] == _FIXARRAY_4
        and view[1] == _EXT32
        and view[6] == HEADER_EXT_TYPE
        and view[7] == FORMAT_VERSION
    )
