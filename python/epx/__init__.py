"""epx for PyTorch: expert-parallel dispatch/combine (libepx) on torch.distributed's NCCL communicator.

A thin ctypes layer over the C API (host/include/epx/ep.h): the C library does all the work; torch
tensors are passed as data_ptr(), the stream as torch.cuda.current_stream().cuda_stream, and outputs
are allocated with torch. ``import epx`` needs neither torch nor a GPU nor libepx: torch is imported
inside the functions that need it, and libepx is loaded at first use (EPX_LIBRARY, then the
package's _lib/, then the system loader).

    import torch, torch.distributed as dist, epx
    buf = epx.Buffer(dist.group.WORLD, max_tokens_per_rank=4096, hidden=7168, num_experts=256, topk=8)
    d = buf.dispatch(x, topk_idx, topk_weights, layout="expanded")
    y = experts(d.recv_x, d.expert_offsets)          # your grouped GEMMs, [R, hidden] bf16
    out, _ = buf.combine(d.handle, y)                # [T, hidden] bf16
"""

from . import _abi as abi
from ._errors import EpAsyncError, EpError, LibraryNotFoundError, NcclVersionError
from .buffer import Buffer, CombineOutput, DispatchOutput, Handle
from .engram import EngramBuffer
from .event import EventOverlap
from .lb import LoadBalancer
from .low_latency import LowLatencyDispatchOutput, LowLatencyHandle, LowLatencyRecvHook
from .window import GroupBuffers

__version__ = "0.1.0"
EPX_VERSION_CODE = abi.EPX_VERSION_CODE


def library_path():
    """Path of the libepx this package loads (loads it; raises LibraryNotFoundError if absent)."""
    from . import _lib  # noqa: PLC0415
    return _lib.library_path()


def nccl_versions():
    """The NCCL loaded in the process and the one libepx was built against, as a dict:
    ``runtime`` and ``build`` ("2.28.9"), ``libnccl`` (path of the loaded library, "" if unknown)
    and ``compatible``. A libepx built on NCCL 2.28.9 runs on 2.28.9 only; one built on 2.30+ on
    the same or a newer NCCL 2.x. Import torch first to check torch's NCCL (epx does so itself
    when torch is installed). Other calls raise NcclVersionError when ``compatible`` is False."""
    from . import _lib  # noqa: PLC0415
    return _lib.nccl_versions()


def get_last_error():
    """ncclEpGetLastError() of the calling thread ("" if none)."""
    from . import _lib  # noqa: PLC0415
    return _lib.last_error()


__all__ = ["Buffer", "LoadBalancer", "EngramBuffer", "Handle", "DispatchOutput", "CombineOutput", "EventOverlap", "GroupBuffers",
           "LowLatencyHandle", "LowLatencyDispatchOutput", "LowLatencyRecvHook", "EpError", "EpAsyncError", "LibraryNotFoundError",
           "NcclVersionError", "nccl_versions",
           "library_path", "get_last_error", "abi", "EPX_VERSION_CODE", "__version__"]
