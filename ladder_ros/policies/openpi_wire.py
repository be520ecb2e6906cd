"""openpi's wire format: msgpack, with numpy arrays and scalars as tagged maps. Nothing is ever unpickled.

An openpi policy server (``openpi.serving.websocket_policy_server``) and its client
(``openpi_client.msgpack_numpy``) exchange msgpack messages in which an array is the map
``{b"__ndarray__": True, b"data": <raw bytes>, b"dtype": <numpy dtype string>, b"shape": [...]}``
and a numpy scalar ``{b"__npgeneric__": True, b"data": <value>, b"dtype": <dtype string>}``; the
tag keys are msgpack binaries. Object, void (structured) and complex dtypes are refused in both
directions, as openpi refuses them when packing. This module reads and writes that format on numpy 2
without openpi-client (which pins numpy<2); ``tests/test_openpi_client.py`` proves it byte for byte
against openpi-client's own module running in its own environment.

Decoding is strict because the bytes come from the network: a tag map must have exactly its fields,
a dtype must be a plain numeric or boolean one (no objects, no byte order surprises beyond what the
dtype string says), the data must be exactly ``prod(shape) * itemsize`` bytes, and msgpack extension
types are refused. Arrays are returned as writable copies that do not alias the message buffer.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np

from ladder_ros.core.errors import InvalidInputError

NDARRAY = b"__ndarray__"
NPGENERIC = b"__npgeneric__"
_REFUSED_KINDS = frozenset("VOc")  # void/structured, object, complex: openpi's pack_array refuses them too
_ALLOWED_KINDS = frozenset("biuf")  # bool, signed and unsigned integers, floats (incl. float16)
MAX_DIMS = 32  # numpy's own limit is 64; nothing a policy exchanges has more than a handful


class WireFormatError(InvalidInputError):
    """A message that is not valid openpi msgpack-numpy (or a value that cannot be sent as such)."""


def _encode(obj: Any) -> Any:
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in _REFUSED_KINDS:
        raise WireFormatError(f"unsupported dtype for the openpi wire format: {obj.dtype}")
    if isinstance(obj, np.ndarray):
        return {NDARRAY: True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return {NPGENERIC: True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise WireFormatError(f"cannot send a {type(obj).__name__} in an openpi message")


def packb(obj: Any) -> bytes:
    """``obj`` (dicts, lists, str, numbers, bytes, numpy arrays and scalars) as one openpi message."""
    try:
        return msgpack.packb(obj, default=_encode, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, WireFormatError):
            raise
        raise WireFormatError(f"cannot encode the message: {exc}") from None


def _dtype(value: Any) -> np.dtype:
    if isinstance(value, bytes):
        value = value.decode("ascii", errors="replace")
    if not isinstance(value, str) or len(value) > 8:
        raise WireFormatError(f"array dtype must be a short numpy dtype string, got {value!r}")
    try:
        dtype = np.dtype(value)
    except (TypeError, ValueError):
        raise WireFormatError(f"unknown array dtype {value!r}") from None
    if dtype.kind not in _ALLOWED_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise WireFormatError(f"refused array dtype {value!r} (only booleans, integers and floats are read)")
    return dtype


def _decode_array(obj: dict) -> np.ndarray:
    if set(obj) != {NDARRAY, b"data", b"dtype", b"shape"}:
        raise WireFormatError(f"malformed array: fields {sorted(map(repr, obj))}")
    dtype = _dtype(obj[b"dtype"])
    shape = obj[b"shape"]
    if not isinstance(shape, (list, tuple)) or len(shape) > MAX_DIMS or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise WireFormatError(f"malformed array shape {shape!r}")
    data = obj[b"data"]
    if not isinstance(data, bytes):
        raise WireFormatError(f"array data must be bytes, got {type(data).__name__}")
    expected = math.prod(shape) * dtype.itemsize
    if len(data) != expected:
        raise WireFormatError(f"array of shape {tuple(shape)} and dtype {dtype.str} needs {expected} bytes, "
                              f"got {len(data)}")
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def _decode_scalar(obj: dict) -> np.generic:
    if set(obj) != {NPGENERIC, b"data", b"dtype"}:
        raise WireFormatError(f"malformed scalar: fields {sorted(map(repr, obj))}")
    dtype = _dtype(obj[b"dtype"])
    value = obj[b"data"]
    if (isinstance(value, bool) and dtype.kind != "b") or not isinstance(value, (bool, int, float)):
        raise WireFormatError(f"scalar of dtype {dtype.str} cannot hold {value!r}")
    try:
        return dtype.type(value)
    except (OverflowError, ValueError):
        raise WireFormatError(f"scalar of dtype {dtype.str} cannot hold {value!r}") from None


def _object_hook(obj: dict) -> Any:
    if NDARRAY in obj:
        return _decode_array(obj)
    if NPGENERIC in obj:
        return _decode_scalar(obj)
    return obj


def _refuse_ext(code: int, data: bytes) -> Any:
    raise WireFormatError(f"msgpack extension type {code} is not part of the openpi wire format")


def unpackb(data: bytes, *, max_bytes: int | None = None) -> Any:
    """One openpi message back into Python and numpy values; :class:`WireFormatError` when malformed."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireFormatError(f"an openpi message is binary, got {type(data).__name__}")
    if max_bytes is not None and len(data) > max_bytes:
        raise WireFormatError(f"message of {len(data)} bytes exceeds the limit of {max_bytes}")
    try:
        return msgpack.unpackb(data, object_hook=_object_hook, ext_hook=_refuse_ext, raw=False)
    except WireFormatError:
        raise
    except (ValueError, TypeError, msgpack.exceptions.UnpackException) as exc:
        raise WireFormatError(f"not a valid msgpack message: {exc}") from None
