"""Tests of tessera._private.serialization: the value format's layout, zero-copy out-of-band
buffers (NumPy, torch), references by persistent id, and errors for malformed input."""

import struct
import threading

import numpy as np
import pytest
import torch

from tessera._private import serialization
from tessera._private.serialization import (
    INLINE_BUFFER_LIMIT,
    deserialize,
    is_python_value,
    register_ref_type,
    serialize,
)

MIB = 1 << 20


def round_trip(value):
    return deserialize(serialize(value).to_bytes())


def parse(data: bytes):
    """(buffer table, ref payloads, region data start) of a value, read independently of the
    module's reader."""
    assert data[0] == 0x94 and data[1] == 0xC9
    header_len, header_type = struct.unpack_from(">Ib", data, 2)
    assert header_type == 80
    header = data[7 : 7 + header_len]
    version, count = struct.unpack_from(">BI", header, 0)
    assert version == 1
    table = [struct.unpack_from(">QQ", header, 5 + 16 * i) for i in range(count)]
    pos = 7 + header_len
    assert data[pos] == 0xDD
    (ref_count,) = struct.unpack_from(">I", data, pos + 1)
    pos += 5
    payloads = []
    for _ in range(ref_count):
        marker, length, ext_type = struct.unpack_from(">BIb", data, pos)
        assert (marker, ext_type) == (0xC9, 84)
        payloads.append(data[pos + 6 : pos + 6 + length])
        pos += 6 + length
    assert data[pos] == 0xC6
    (pickle_len,) = struct.unpack_from(">I", data, pos + 1)
    pos += 5 + pickle_len
    assert data[pos] == 0xC6
    (region_len,) = struct.unpack_from(">I", data, pos + 1)
    region_start = pos + 5
    assert region_start + region_len == len(data)
    return table, payloads, region_start


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return (self.x, self.y) == (other.x, other.y)


@pytest.mark.parametrize(
    "value",
    [0, -(1 << 70), 3.5, "héllo", b"\x00bytes", None, True, {"a": [1, (2, 3)], 4: {5}}, [[[]]]],
)
def test_round_trips_plain_values(value):
    assert round_trip(value) == value


def test_round_trips_lambdas_closures_and_local_classes():
    base = 10
    add = lambda x: x + base  # noqa: E731

    def make_counter():
        count = [0]

        def step():
            count[0] += 1
            return count[0]

        return step

    class Local:
        def double(self, v):
            return 2 * v

    assert round_trip(add)(1) == 11
    counter = round_trip(make_counter())
    assert (counter(), counter()) == (1, 2)
    assert round_trip(Local)().double(4) == 8
    assert round_trip(Point(1, 2)) == Point(1, 2)


def test_large_numpy_array_goes_out_of_band_without_a_copy():
    array = np.arange(MIB // 8, dtype=np.float64)
    serialized = serialize({"array": array})
    views = [p for p in serialized.parts if isinstance(p, memoryview)]
    assert len(views) == 1
    assert np.shares_memory(np.frombuffer(views[0], dtype=np.uint8), array)
    data = serialized.to_bytes()
    assert serialized.total_size == len(data)
    table, _, region_start = parse(data)
    assert table == [(0, array.nbytes)]
    assert region_start % 64 == 0
    assert data[region_start : region_start + array.nbytes] == array.tobytes()


def test_every_out_of_band_buffer_is_64_byte_aligned():
    arrays = [np.full(INLINE_BUFFER_LIMIT + extra, extra, dtype=np.uint8) for extra in (1, 3, 64)]
    data = serialize(arrays).to_bytes()
    table, _, region_start = parse(data)
    assert [length for _, length in table] == [a.nbytes for a in arrays]
    assert all((region_start + offset) % 64 == 0 for offset, _ in table)
    for got, want in zip(round_trip(arrays), arrays):
        np.testing.assert_array_equal(got, want)


def test_buffers_below_the_limit_stay_in_band():
    small = np.arange(INLINE_BUFFER_LIMIT // 8 - 1, dtype=np.float64)
    serialized = serialize(small)
    assert len(serialized.parts) == 1
    assert parse(serialized.to_bytes())[0] == []
    np.testing.assert_array_equal(round_trip(small), small)


def test_read_back_array_aliases_a_read_only_input_and_is_read_only():
    array = np.arange(MIB // 4, dtype=np.int32)
    data = memoryview(serialize(array).to_bytes())  # bytes: read-only
    result = deserialize(data)
    np.testing.assert_array_equal(result, array)
    assert not result.flags.writeable
    assert np.shares_memory(result, np.frombuffer(data, dtype=np.uint8))
    with pytest.raises(ValueError, match="read-only"):
        result[0] = 1


def test_writable_input_gives_a_writable_alias():
    data = bytearray(serialize(np.zeros(MIB, dtype=np.uint8)).to_bytes())
    result = deserialize(data)
    assert result.flags.writeable
    assert np.shares_memory(result, np.frombuffer(data, dtype=np.uint8))


def test_torch_cpu_tensor_goes_out_of_band_and_round_trips():
    tensor = torch.arange(MIB // 4, dtype=torch.float32)
    serialized = serialize(tensor)
    views = [p for p in serialized.parts if isinstance(p, memoryview)]
    assert len(views) == 1
    assert np.shares_memory(np.frombuffer(views[0], dtype=np.uint8), tensor.numpy())
    data = serialized.to_bytes()
    result = deserialize(data)
    assert isinstance(result, torch.Tensor)
    assert torch.equal(result, tensor)
    assert np.shares_memory(result.numpy(), np.frombuffer(data, dtype=np.uint8))


def test_tensors_that_need_grad_or_are_not_contiguous_pickle_normally():
    grad = torch.ones(4, requires_grad=True)
    assert round_trip(grad).requires_grad
    strided = torch.arange(16.0).reshape(4, 4).t()
    assert torch.equal(round_trip(strided), strided)


class DummyRef:
    def __init__(self, key: bytes):
        self.key = key


def test_registered_refs_travel_in_refs_and_round_trip():
    register_ref_type(DummyRef, lambda ref: b"ref:" + ref.key, lambda data: DummyRef(data[4:]))
    try:
        first, second = DummyRef(b"a"), DummyRef(b"b")
        serialized = serialize({"nested": [first, [second, first]]})
        assert serialized.contained_refs == [first, second]
        _, payloads, _ = parse(serialized.to_bytes())
        assert payloads == [b"ref:a", b"ref:b"]
        result = deserialize(serialized.to_bytes())
        a, (b, a_again) = result["nested"]
        assert (a.key, b.key) == (b"a", b"b")
        assert a is a_again
    finally:
        serialization._ref_encoders.pop(DummyRef)


def test_is_python_value():
    assert is_python_value(serialize(1).to_bytes())
    assert not is_python_value(b"\x94")
    assert not is_python_value(b"plain bytes that are long enough to check")


@pytest.mark.parametrize(
    "mangle",
    [
        lambda data: data[:20],  # truncated
        lambda data: b"\x93" + data[1:],  # wrong first byte
        lambda data: b"",
        lambda data: data[:7] + b"\x02" + data[8:],  # unknown version
    ],
    ids=["truncated", "first-byte", "empty", "version"],
)
def test_malformed_input_is_a_value_error(mangle):
    data = serialize([1, 2, 3]).to_bytes()
    with pytest.raises(ValueError, match="^not a tessera Python value: "):
        deserialize(mangle(data))


def test_buffer_offsets_past_the_region_are_a_value_error():
    data = bytearray(serialize(np.zeros(INLINE_BUFFER_LIMIT, dtype=np.uint8)).to_bytes())
    struct.pack_into(">Q", data, 7 + 5, 64)  # first buffer's offset: its end passes the region
    with pytest.raises(ValueError, match="outside"):
        deserialize(data)


def test_unpicklable_value_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="cannot serialize lock: .*_thread.lock"):
        serialize(threading.Lock())


def test_the_plain_value_fast_path_writes_the_bytes_cloudpickle_would():
    import cloudpickle
    from tessera._private import serialization as s
    for value in [None, True, 7, 2.5, "text", b"raw", (1, "a"), [1, [2, [3]]],
                  {"k": [1, 2], "n": None}]:
        assert s._is_plain(value), value
        stream, buffers, refs = s._pickle(value)
        assert bytes(stream) == cloudpickle.dumps(value, protocol=5)
        assert (buffers, refs) == ([], [])
        assert s.deserialize(s.serialize(value).to_bytes()) == value

    class Number(int):
        pass

    # Anything else takes cloudpickle's path: subclasses, deep or large containers, other keys.
    for value in [Number(3), [[[[1]]]], list(range(17)), {1: "int key"}, {"s": {1, 2}}]:
        assert not s._is_plain(value), value
        assert s.deserialize(s.serialize(value).to_bytes()) == value


def test_a_call_without_arguments_is_serialized_once_and_read_back_empty():
    from tessera._private import arguments

    def put(_):
        raise AssertionError("a call without arguments is never stored")

    first = arguments.encode((), {}, put)
    again = arguments.encode((), {}, put)
    assert first[0] is again[0] and len(first) == 1  # the same bytes, not pickled again
    assert arguments.decode([memoryview(first[0])]) == ((), {})
    # Calls with arguments still round trip, and are not taken for the empty one.
    call = arguments.encode((1, "two"), {"three": 3.0}, put)
    assert arguments.decode([memoryview(call[0])]) == ((1, "two"), {"three": 3.0})
    assert arguments.decode([memoryview(arguments.encode(((),), {}, put)[0])]) == (((),), {})


@pytest.mark.parametrize("length", list(range(0, 140)))
def test_a_plain_value_is_framed_as_the_full_path_frames_it(length):
    import pickle as std_pickle

    value = "x" * length
    fast = serialization.serialize(value)
    full = serialization._frame(std_pickle.dumps(value, protocol=5), [], [])
    assert fast.to_bytes() == full.to_bytes() and fast.total_size == full.total_size
    assert serialization.deserialize(fast.to_bytes()) == value
    # The reader's shortcut recognises the frame (anything else goes through the full reader,
    # which names what is wrong: here a REGION longer than the bytes left).
    data = fast.to_bytes()
    assert serialization._plain_pickle(memoryview(data)) is not None
    cut = data[:-4] + struct.pack(">I", 10)
    with pytest.raises(ValueError, match="region"):
        serialization.deserialize(cut)
