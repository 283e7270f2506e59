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
    s = str(t.dtype)
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
    if not getattr(t, "is_cuda", False):
        raise ValueError("%s must be a CUDA tensor, got device %s" % (name, getattr(t, "device", "?")))
    if device is not None and str(t.device) != str(device):
        raise ValueError("%s is on %s but the buffer is on %s" % (name, t.device, device))
    if not t.is_contiguous():
        raise ValueError("%s must be contiguous (rows back to back); call .contiguous()" % name)
    p = int(t.data_ptr())
    if p % align:
        raise ValueError("%s must be %d-byte aligned (data_ptr 0x%x)" % (name, align, p))
    return got


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
