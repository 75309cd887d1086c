"""numpy arrays and scalars, torch tensors: to ``safe-msgpack`` frames and back.

Neither numpy nor torch is needed to import this module: a value is recognised
through ``sys.modules`` (an object can only be an array if numpy is imported), and
reading a frame imports numpy or torch by that fixed name only when the value
holds one.

An array becomes ``ExtType(ARRAY, [dtype, shape, n])``: its dtype as numpy spells
it (``"<f4"``, byte order kept), its shape, and the number of the out-of-band
buffer that holds its bytes in C order (:mod:`._msgpack_frames`); a tensor
``ExtType(TENSOR, [dtype, shape, n, requires_grad])`` likewise; a numpy scalar
``ExtType(SCALAR, [dtype, bytes])``. Only bool and numeric dtypes are written or
read: bytes never become object pointers. Reading copies each buffer once, into
a bytearray that backs the new writable array (C order, whatever the order of the
array written), as pickle does.
"""

from __future__ import annotations

import importlib
import math
import re
import sys
from collections.abc import Callable
from typing import Any

from msgpack import ExtType

from ._msgpack_frames import take

__all__ = [
    "ARRAY",
    "SCALAR",
    "TENSOR",
    "Taken",
    "encode_array",
    "encode_scalar",
    "encode_tensor",
    "numpy_kind",
    "read_array",
    "read_scalar",
    "read_tensor",
    "torch_tensor",
]

ARRAY, SCALAR, TENSOR = 20, 21, 22
KINDS = "biufc"  # bool, signed, unsigned, float, complex: plain bytes, no pointers
_DTYPE = re.compile(r"[<>|][biufc][0-9]{1,2}")
_TORCH_DTYPES = frozenset(
    {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16"}
    | {"float32", "float64", "complex64", "complex128"}
)
_FIX = "convert it in build_payload"

Pack = Callable[[Any], bytes]
Taken = set[int]
"""The buffer numbers a read has used: each buffer makes one array, at most."""


def numpy_kind(value: object) -> str | None:
    """``"array"``, ``"scalar"`` or ``None``: whether *value* is a numpy array or scalar."""
    np = sys.modules.get("numpy")
    if np is None:
        return None
    if isinstance(value, np.ndarray):
        return "array"
    return "scalar" if isinstance(value, np.generic) else None


def torch_tensor(value: object) -> bool:
    """Whether *value* is a torch tensor (``False`` whenever torch is not imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


# ------------------------------------------------------------------ writing
def encode_array(arr: Any, buffers: list[memoryview], pack: Pack) -> ExtType:
    """The frame of numpy array *arr*; its bytes are appended to *buffers* (no copy
    when it is C-contiguous). ``TypeError`` for a subclass or another dtype."""
    np = sys.modules["numpy"]
    if type(arr) is not np.ndarray:
        raise TypeError(
            f"the safe-msgpack serializer cannot store a {_name(arr)} (an ndarray subclass; "
            "it would come back a plain ndarray). Fix: pass np.asarray(x)"
        )
    _check_kind(arr.dtype, "a numpy array")
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    buffers.append(memoryview(flat))
    return ExtType(ARRAY, pack([arr.dtype.str, list(arr.shape), len(buffers) - 1]))


def encode_scalar(value: Any, pack: Pack) -> ExtType | None:
    """The frame of numpy scalar *value*; ``None`` if its dtype is not bool or numeric
    (``np.str_`` and ``np.bytes_`` are then stored as the str or bytes they are)."""
    if value.dtype.kind not in KINDS:
        return None
    return ExtType(SCALAR, pack([value.dtype.str, value.tobytes()]))


def encode_tensor(tensor: Any, buffers: list[memoryview], pack: Pack) -> ExtType:
    """The frame of torch tensor *tensor* (dense, on the CPU); its bytes are appended
    to *buffers*. ``TypeError`` naming the fix for any other tensor."""
    torch = sys.modules["torch"]
    kind = str(tensor.dtype).removeprefix("torch.")
    problem = None
    if type(tensor) is not torch.Tensor:
        problem = "it is a subclass (e.g. a Parameter). Fix: pass x.detach()"
    elif tensor.device.type != "cpu":
        problem = f"it is on {tensor.device}. Fix: pass x.cpu()"
    elif tensor.layout != torch.strided:
        problem = f"its layout is {tensor.layout}. Fix: pass x.to_dense()"
    elif kind not in _TORCH_DTYPES:
        problem = f"its dtype is {kind}; it stores {', '.join(sorted(_TORCH_DTYPES))}. Fix: {_FIX}"
    if problem is not None:
        raise TypeError(f"the safe-msgpack serializer cannot store this torch tensor: {problem}")
    plain = tensor.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
    try:
        raw = plain.view(torch.uint8).numpy()
    except RuntimeError as exc:  # "Numpy is not available"
        raise TypeError(
            f"storing a torch tensor needs numpy ({exc}). Fix: pip install numpy"
        ) from exc
    buffers.append(memoryview(raw))
    meta = [kind, list(tensor.shape), len(buffers) - 1, bool(tensor.requires_grad)]
    return ExtType(TENSOR, pack(meta))


# ------------------------------------------------------------------ reading
def read_array(meta: list[Any], buffers: list[memoryview], taken: Taken) -> Any:
    """A new writable array from an ``ARRAY`` frame's *meta* and its buffer."""
    np = _need("numpy", "a numpy array")
    dtype_str, shape, index = _items(meta, 3, "array")
    dtype = _dtype(np, dtype_str)
    count, buf = _buffer(shape, dtype.itemsize, index, buffers, taken)
    # A bytearray, as pickle makes: writable, and allocated without numpy's huge-page
    # advice, whose first touch costs several times a plain copy on some kernels.
    return np.frombuffer(bytearray(buf), dtype=dtype, count=count).reshape(shape)


def read_scalar(meta: list[Any]) -> Any:
    """The numpy scalar of a ``SCALAR`` frame's *meta*."""
    np = _need("numpy", "a numpy scalar")
    dtype_str, raw = _items(meta, 2, "scalar")
    dtype = _dtype(np, dtype_str)
    if not isinstance(raw, bytes) or len(raw) != dtype.itemsize:
        raise ValueError(f"a numpy {dtype} scalar with {len(raw)} bytes")
    return np.frombuffer(raw, dtype=dtype, count=1)[0]


def read_tensor(meta: list[Any], buffers: list[memoryview], taken: Taken) -> Any:
    """A new writable CPU tensor from a ``TENSOR`` frame's *meta* and its buffer."""
    torch = _need("torch", "a torch tensor")
    kind, shape, index, requires_grad = _items(meta, 4, "tensor")
    if kind not in _TORCH_DTYPES:
        raise ValueError(f"a torch tensor of dtype {kind!r}, which this format never writes")
    dtype = getattr(torch, kind)
    size = torch.empty((), dtype=dtype).element_size()
    count, buf = _buffer(shape, size, index, buffers, taken)
    if count == 0:
        tensor = torch.empty(shape, dtype=dtype)
    else:
        tensor = torch.frombuffer(bytearray(buf), dtype=dtype).reshape(shape)
    if requires_grad is True:
        tensor.requires_grad_(True)
    return tensor


def _check_kind(dtype: Any, what: str) -> None:
    if dtype.kind not in KINDS:
        raise TypeError(
            f"the safe-msgpack serializer cannot store {what} of dtype {dtype}; it stores "
            f"bool and numeric dtypes. Fix: {_FIX} (e.g. x.tolist(), or x.astype(...))"
        )


def _dtype(np: Any, spelled: object) -> Any:
    if not isinstance(spelled, str) or _DTYPE.fullmatch(spelled) is None:
        raise ValueError(f"the dtype {spelled!r} is not one this format writes")
    dtype = np.dtype(spelled)
    if dtype.kind not in KINDS or dtype.hasobject:
        raise ValueError(f"the dtype {spelled!r} is not bool or numeric")
    return dtype


def _buffer(
    shape: object, itemsize: int, index: object, buffers: list[memoryview], taken: Taken
) -> tuple[int, memoryview]:
    """The element count of *shape* and buffer number *index*, checked to match."""
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"the shape {shape!r} is not a list of sizes")
    buf = take(buffers, taken, index)
    count = math.prod(shape)
    if count * itemsize != len(buf):
        raise ValueError(f"shape {shape} takes {count * itemsize} bytes, the buffer {len(buf)}")
    return count, buf


def _items(meta: object, n: int, what: str) -> list[Any]:
    if not isinstance(meta, list) or len(meta) != n:
        raise ValueError(f"a malformed {what} frame")
    return meta


def _need(module: str, what: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(
            f"the value holds {what} and {module} is not installed here. Fix: pip install "
            f"{module} where the value is read"
        ) from exc


def _name(value: object) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"
