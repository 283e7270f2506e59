"""Argument checks done in Python before any C call (shapes, dtypes, devices, alignment).

They only use the tensor attributes .shape, .dtype, .device, .is_cuda, .is_contiguous() and
.data_ptr(), so the CPU tests can drive them with small fake tensor-like objects (no torch needed).
libepx checks the same things again (ep.h); the Python messages name the Python arguments.
"""

from . import _abi

# torch dtype name (str(dtype) without "torch.") -> ncclDataType_t
BF16 = "bfloat16"
FP8 = "float8_e4m3fn"
F32 = "float32"
I32 = "int32"
I64 = "int64"


def dtype_name(t):
    return name_of_dtype(t.dtype)


def name_of_dtype(dtype):
    """"bfloat16" for torch.bfloat16 (str(dtype) without "torch.")."""
    s = str(dtype)
    return s[6:] if s.startswith("torch.") else s


def _shape(t):
    return tuple(int(s) for s in t.shape)


def _fmt(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def check_tensor(name, t, shape, dtypes, align=4, device=None):
    """Check a CUDA tensor's shape (None entries: any), dtype (one of dtypes), layout and alignment."""
    if t is None:
        raise ValueError("%s is required" % name)
    if not hasattr(t, "data_ptr") or not hasattr(t, "shape"):
        raise TypeError("%s must be a torch.Tensor, got %s" % (name, type(t).__name__))
    got = _shape(t)
    if len(got) != len(shape) or any(w is not None and w != g for w, g in zip(shape, got)):
        want = _fmt(["*" if w is None else w for w in shape])
        raise ValueError("%s must have shape %s, got %s" % (name, want, _fmt(got)))
    dn = dtype_name(t)
    if dn not in dtypes:
        raise TypeError("%s must have dtype %s, got %s" % (name, " or ".join("torch." + d for d in dtypes), dn))
    _check_placement(name, t, align, device, "the buffer")
    return got


def _check_placement(name, t, align, device, owner):
    """A CUDA tensor on `device` (None: any) where `owner` lives, contiguous, `align`-byte aligned;
    returns its data_ptr."""
    if not getattr(t, "is_cuda", False):
        raise ValueError("%s must be a CUDA tensor, got device %s" % (name, getattr(t, "device", "?")))
    if device is not None and str(t.device) != str(device):
        raise ValueError("%s is on %s but %s is on %s" % (name, t.device, owner, device))
    if not t.is_contiguous():
        raise ValueError("%s must be contiguous (rows back to back); call .contiguous()" % name)
    p = int(t.data_ptr())
    if p % align:
        raise ValueError("%s must be %d-byte aligned (data_ptr 0x%x)" % (name, align, p))
    return p


def check_dispatch_args(x, x_scales, topk_idx, topk_weights, *, hidden, topk, max_tokens, fp8_enabled,
                        device=None):
    """Validate dispatch inputs. x may also be a tuple (x_fp8, scales).

    Returns (x, x_scales, num_tokens, xType, topkIdxType).
    """
    if isinstance(x, (tuple, list)):
        if x_scales is not None:
            raise ValueError("pass FP8 scales either in x=(x_fp8, scales) or as x_scales, not both")
        if len(x) != 2:
            raise ValueError("x as a tuple must be (x_fp8, scales)")
        x, x_scales = x
    if x is None:
        raise ValueError("x is required")
    if len(_shape(x)) != 2:
        raise ValueError("x must be 2-D [num_tokens, hidden], got shape %s" % _fmt(_shape(x)))
    t = _shape(x)[0]
    if t > max_tokens:
        raise ValueError("x has %d tokens but the buffer was created with max_tokens_per_rank=%d" % (t, max_tokens))
    dn = dtype_name(x)
    if dn == FP8:
        if not fp8_enabled:
            raise ValueError("FP8 x needs a buffer created with fp8=True")
        if x_scales is None:
            raise ValueError("FP8 x needs x_scales (float32 [num_tokens, hidden/128])")
        check_tensor("x", x, (t, hidden), (FP8,), 16, device)
        check_tensor("x_scales", x_scales, (t, hidden // 128), (F32,), 4, device)
        x_type = _abi.ncclFloat8e4m3
    elif dn == BF16:
        if x_scales is not None:
            raise ValueError("x_scales is for FP8 (torch.float8_e4m3fn) x only; x is bfloat16")
        check_tensor("x", x, (t, hidden), (BF16,), 16, device)
        x_type = _abi.ncclBfloat16
    else:
        raise TypeError("x must have dtype torch.bfloat16 or torch.float8_e4m3fn, got %s" % dn)
    check_tensor("topk_idx", topk_idx, (t, topk), (I32, I64), 4, device)
    idx_type = _abi.ncclInt64 if dtype_name(topk_idx) == I64 else _abi.ncclInt32
    if idx_type == _abi.ncclInt64 and int(topk_idx.data_ptr()) % 8:
        raise ValueError("topk_idx (int64) must be 8-byte aligned")
    if topk_weights is not None:
        check_tensor("topk_weights", topk_weights, (t, topk), (F32,), 4, device)
    return x, x_scales, t, x_type, idx_type


def check_combine_args(x, rows, num_tokens, bias, topk_weights, *, hidden, topk, expanded, device=None):
    """Validate combine inputs. rows: rows of the handle's dispatch output; num_tokens: the layout's T.

    Returns the biases as a tuple (bias0, bias1), each None or a tensor.
    """
    if x is None:
        raise ValueError("x is required")
    s = _shape(x)
    if len(s) != 2 or s[1] != hidden or s[0] < rows:
        raise ValueError("x must have shape [rows >= %d, %d] (the dispatch output layout), got %s"
                         % (rows, hidden, _fmt(s)))
    check_tensor("x", x, (None, hidden), (BF16,), 16, device)
    if bias is None:
        biases = (None, None)
    elif isinstance(bias, (tuple, list)):
        if len(bias) > 2:
            raise ValueError("bias takes at most two tensors (bias0, bias1)")
        biases = tuple(bias) + (None,) * (2 - len(bias))
    else:
        biases = (bias, None)
    for i, b in enumerate(biases):
        if b is not None:
            check_tensor("bias[%d]" % i, b, (num_tokens, hidden), (BF16,), 16, device)
    if topk_weights is not None:
        shape = (None,) if expanded else (None, topk)
        got = check_tensor("topk_weights", topk_weights, shape, (F32,), 4, device)
        if got[0] < rows:
            raise ValueError("topk_weights has %d rows but the dispatch output has %d" % (got[0], rows))
    return biases


# --- expert load balancing (lb.h) -----------------------------------------------------------------
_ELEM_BYTES = {"uint8": 1, "int8": 1, FP8: 1, "float8_e5m2": 1, BF16: 2, "float16": 2, F32: 4, I32: 4, I64: 8}


def _numel(t):
    n = 1
    for s in _shape(t):
        n *= s
    return n


def check_lb_mapping(mapping, num_ranks, num_slots, device=None):
    """The redundancy mapping: int32, num_ranks * num_slots entries ([num_ranks, num_slots] or flat)."""
    if mapping is None:
        raise ValueError("mapping is required")
    shape = _shape(mapping) if hasattr(mapping, "shape") else None
    want = (num_ranks * num_slots,) if shape is None or len(shape) != 2 else (num_ranks, num_slots)
    check_tensor("mapping", mapping, want, (I32,), align=4, device=device)


def check_lb_rows(name, tensors, row_sizes, local_experts, fp32_elems, device=None):
    """A list of tensors, one per planned tensor, each holding local_experts rows of that tensor's row
    size — bytes of any dtype (weights), or FP32 elements when fp32_elems (gradients) — contiguous
    and 16-byte aligned. Returns their pointers."""
    if tensors is None or isinstance(tensors, (str, bytes)) or not hasattr(tensors, "__len__"):
        raise TypeError("%s must be a list of tensors, one per planned tensor" % name)
    if len(tensors) != len(row_sizes):
        raise ValueError("%s has %d tensors but the plan has %d" % (name, len(tensors), len(row_sizes)))
    ptrs = []
    for i, (t, row) in enumerate(zip(tensors, row_sizes)):
        n = "%s[%d]" % (name, i)
        if t is None or not hasattr(t, "data_ptr"):
            raise TypeError("%s must be a torch.Tensor" % n)
        dn = dtype_name(t)
        if fp32_elems and dn != F32:
            raise TypeError("%s must have dtype torch.float32, got %s" % (n, dn))
        if not fp32_elems and dn not in _ELEM_BYTES:
            raise TypeError("%s has an unsupported dtype %s" % (n, dn))
        got = _numel(t) if fp32_elems else _numel(t) * _ELEM_BYTES[dn]
        want = local_experts * row
        if got != want:
            unit = "FP32 elements" if fp32_elems else "bytes"
            raise ValueError("%s must hold %d %s (%d local experts x %d), got %d" % (n, want, unit, local_experts, row,
                                                                                    got))
        ptrs.append(_check_placement(n, t, 16, device, "the load balancer"))
    return ptrs


# --- Engram (engram.h) ------------------------------------------------------------------------------
def dtype_bytes(dtype):
    """Bytes per element of a torch dtype (or of anything whose str() is "torch.<name>")."""
    name = name_of_dtype(dtype)
    if name in _ELEM_BYTES:
        return _ELEM_BYTES[name]
    size = getattr(dtype, "itemsize", None)  # torch >= 2.1
    if isinstance(size, int) and size > 0:
        return size
    raise TypeError("unsupported dtype %s" % dtype)


def check_engram_indices(indices, num_layers, max_tokens, entries, device=None):
    """The fetch's indices: int32 [num_layers, tokens, entries], tokens <= max_tokens, contiguous, on
    `device`. Returns tokens."""
    got = check_tensor("indices", indices, (num_layers, None, entries), (I32,), align=4, device=device)
    if got[1] > max_tokens:
        raise ValueError("indices has %d tokens but the EngramBuffer was created with max_tokens=%d"
                         % (got[1], max_tokens))
    return got[1]


def check_engram_table(table, rows_per_rank, row_bytes, dtype=None, device=None):
    """One layer's shard: [rows_per_rank, row] of `dtype` (None: any dtype whose row is row_bytes bytes),
    contiguous, 16-byte aligned, a CUDA tensor on `device` or a pinned CPU tensor. Returns its data_ptr."""
    if table is None:
        raise ValueError("table is required")
    if not hasattr(table, "data_ptr") or not hasattr(table, "shape"):
        raise TypeError("table must be a torch.Tensor, got %s" % type(table).__name__)
    dn = dtype_name(table)
    if dtype is not None and dn != dtype:
        raise TypeError("table must have dtype torch.%s (the EngramBuffer's), got %s" % (dtype, dn))
    if dn not in _ELEM_BYTES:
        raise TypeError("table has an unsupported dtype %s" % dn)
    size = _ELEM_BYTES[dn]
    if row_bytes % size:
        raise ValueError("table's rows (%d bytes) are not a whole number of %s" % (row_bytes, dn))
    want = (rows_per_rank, row_bytes // size)
    got = _shape(table)
    if got != want:
        raise ValueError("table must have shape %s (num_rows / num_ranks rows of %d bytes), got %s"
                         % (_fmt(want), row_bytes, _fmt(got)))
    if getattr(table, "is_cuda", False):
        return _check_placement("table", table, 16, device, "the EngramBuffer")
    pinned = getattr(table, "is_pinned", None)
    if not callable(pinned) or not pinned():
        raise ValueError("table must be a CUDA tensor or a pinned CPU tensor (tensor.pin_memory()), got a pageable "
                         "tensor on %s" % getattr(table, "device", "?"))
    if not table.is_contiguous():
        raise ValueError("table must be contiguous (rows back to back); call .contiguous()")
    p = int(table.data_ptr())
    if p % 16:
        raise ValueError("table must be 16-byte aligned (data_ptr 0x%x)" % p)
    return p
