"""Torch tensors over a Buffer's registered window (zero-copy receive and combine buffers).

ncclEpGroupGetBuffers gives device pointers into the group's window (ep.h, ncclEpBuffers_t). They
become torch tensors without a copy through __cuda_array_interface__ (torch.as_tensor): a byte
tensor over the memory, viewed as the dtype and shape ep.h documents. The tensors keep the Buffer
object referenced, but the memory is the group's: it is freed by Buffer.destroy(), after which the
tensors must not be used.
"""

from dataclasses import dataclass
from typing import Any


class _DeviceMemory:
    """Exposes (pointer, bytes) as a CUDA array of bytes; torch.as_tensor keeps it (and owner) alive."""

    def __init__(self, ptr, nbytes, owner):
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": (int(nbytes),), "typestr": "|u1", "data": (int(ptr), False),
                                         "strides": None, "version": 2}


def window_tensor(torch, ptr, shape, dtype, device, owner):
    """A tensor of `shape` and `dtype` over the device memory at ptr (no copy)."""
    n = 1
    for s in shape:
        n *= int(s)
    nbytes = n * torch.empty((), dtype=dtype).element_size() if n else 0
    raw = torch.as_tensor(_DeviceMemory(ptr, nbytes, owner), device=device)
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
