"""Torch tensors over a Buffer's registered window (zero-copy receive and combine buffers).

ncclEpGroupGetBuffers gives device pointers into the group's window (ep.h, ncclEpBuffers_t). They
become torch tensors without a copy through DLPack (torch.from_dlpack of a "dltensor" capsule built
here with ctypes; unlike __cuda_array_interface__ it does not need numpy): a byte tensor over the
memory, viewed as the dtype and shape ep.h documents. The memory is the group's: it is freed by
Buffer.destroy(), after which the tensors must not be used.
"""

import ctypes as C
from dataclasses import dataclass
from typing import Any

# --- DLPack (dlpack.h, the unversioned ABI every torch accepts) --------------------------------------
kDLCUDA = 2
kDLUInt = 1


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", DLDevice), ("ndim", C.c_int32), ("dtype", DLDataType),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class DLManagedTensor(C.Structure):
    pass


DLDeleter = C.CFUNCTYPE(None, C.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", C.c_void_p), ("deleter", DLDeleter)]

# DLManagedTensors handed to torch, by address, kept alive (with their shape arrays and owners)
# until torch calls the deleter (when the last tensor over the memory is freed).
_alive = {}


@DLDeleter
def _deleter(p):
    _alive.pop(C.addressof(p.contents), None)


_capsule_new = C.pythonapi.PyCapsule_New
_capsule_new.restype = C.py_object
_capsule_new.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p]


def dlpack_bytes(ptr, nbytes, device_index, owner=None):
    """A "dltensor" capsule of a 1-D uint8 CUDA tensor of nbytes at ptr (the memory is not owned)."""
    shape = (C.c_int64 * 1)(int(nbytes))
    m = DLManagedTensor()
    m.dl_tensor.data = int(ptr)
    m.dl_tensor.device = DLDevice(kDLCUDA, int(device_index))
    m.dl_tensor.ndim = 1
    m.dl_tensor.dtype = DLDataType(kDLUInt, 8, 1)
    m.dl_tensor.shape = shape
    m.dl_tensor.byte_offset = 0
    m.deleter = _deleter
    _alive[C.addressof(m)] = (m, shape, owner)
    return _capsule_new(C.addressof(m), b"dltensor", None)


def window_tensor(torch, ptr, shape, dtype, device, owner):
    """A tensor of `shape` and `dtype` over the device memory at ptr (no copy)."""
    n = 1
    for s in shape:
        n *= int(s)
    nbytes = n * torch.empty((), dtype=dtype).element_size()
    index = device.index if device.index is not None else torch.cuda.current_device()
    raw = torch.from_dlpack(dlpack_bytes(ptr, nbytes, index, owner))
    return raw.view(dtype).view(tuple(shape))


@dataclass
class GroupBuffers:
    """Buffer.get_buffers(): the group's receive buffers (rows = num_ranks * max_tokens_per_rank).

    recv_x: bfloat16 [rows, hidden]; recv_x_fp8: float8_e4m3fn [rows, hidden] over the same memory
    (fp8 buffers only, else None); recv_x_scales: float32 [rows, hidden/128] (fp8 buffers) or None;
    recv_topk_idx: int32 [rows, topk]; recv_topk_weights: float32 [rows, topk]; recv_src_info: int32
    [rows, 2]; combine_x: bfloat16 [rows, hidden], the in-place combine input (dedup layout).
    A zero-copy dispatch's rows stay valid until the group's next dispatch returns; combine_x's
    until its next combine returns.
    """

    recv_x: Any
    recv_x_fp8: Any
    recv_x_scales: Any
    recv_topk_idx: Any
    recv_topk_weights: Any
    recv_src_info: Any
    combine_x: Any
    rows: int
    ptrs: Any  # the ncclEpBuffers_t as returned


def group_buffers(torch, b, hidden, topk, fp8, device, owner):
    """GroupBuffers over an ncclEpBuffers_t `b`."""
    r = int(b.rows)
    t = torch

    def over(ptr, shape, dtype):
        return None if not ptr else window_tensor(t, ptr, shape, dtype, device, owner)

    return GroupBuffers(
        recv_x=over(b.recvX, (r, hidden), t.bfloat16),
        recv_x_fp8=over(b.recvX, (r, hidden), t.float8_e4m3fn) if fp8 else None,
        recv_x_scales=over(b.recvScales, (r, hidden // 128), t.float32) if fp8 else None,
        recv_topk_idx=over(b.recvTopkIdx, (r, topk), t.int32),
        recv_topk_weights=over(b.recvTopkWeights, (r, topk), t.float32),
        recv_src_info=over(b.recvSrcInfo, (r, 2), t.int32),
        combine_x=over(b.combineX, (r, hidden), t.bfloat16),
        rows=r, ptrs=b)
