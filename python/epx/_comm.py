"""The ncclComm_t epx runs on: borrowed from a torch.distributed NCCL process group when PyTorch
exposes it, else a communicator of epx's own over the same ranks.

PyTorch (>= 2.8) binds ProcessGroupNCCL::getCommPtr() as ``_comm_ptr()`` on the NCCL backend object
(``group._get_backend(torch.device("cuda"))``). It returns the communicator of the *current* CUDA
device as an int, and 0 when that communicator does not exist yet (PyTorch creates it lazily at the
first collective unless init_process_group got device_id=...). A borrowed communicator stays owned
by PyTorch: epx never destroys it, and the process group must outlive the epx.Buffer.
"""

import ctypes as C

from . import _abi, _lib


def _torch():
    import torch  # noqa: PLC0415 (lazy: import epx works without torch)
    import torch.distributed as dist  # noqa: PLC0415
    return torch, dist


def _read(get):
    try:
        return int(get() if callable(get) else get)
    except Exception:  # noqa: BLE001 (some versions raise before the communicator exists)
        return 0


def borrow_comm(group):
    """The group's ncclComm_t as an int, or 0 when PyTorch does not expose it."""
    torch, dist = _torch()
    try:
        backend = group._get_backend(torch.device("cuda", torch.cuda.current_device()))
    except Exception:  # noqa: BLE001 (not an NCCL group, or an old PyTorch)
        return 0
    get = getattr(backend, "_comm_ptr", None)
    if get is None:
        return 0
    ptr = _read(get)
    if ptr == 0:
        # Lazily created communicator: one tiny collective on the group creates it.
        t = torch.zeros(1, device="cuda")
        dist.all_reduce(t, group=group)
        torch.cuda.current_stream().synchronize()
        ptr = _read(get)
    return ptr


class OwnComm:
    """A communicator of epx's own over the group's ranks (unique id broadcast over the group)."""

    def __init__(self, group):
        torch, dist = _torch()
        nccl = _lib.nccl()
        rank = dist.get_rank(group)
        size = dist.get_world_size(group)
        uid = _abi.ncclUniqueId()
        if rank == 0:
            _lib.nccl_check(nccl.ncclGetUniqueId(C.byref(uid)), "ncclGetUniqueId")
        box = [C.string_at(C.addressof(uid), _abi.NCCL_UNIQUE_ID_BYTES) if rank == 0 else None]
        src = dist.get_global_rank(group, 0)
        dist.broadcast_object_list(box, src=src, group=group)
        C.memmove(C.addressof(uid), box[0], _abi.NCCL_UNIQUE_ID_BYTES)
        comm = C.c_void_p()
        _lib.nccl_check(nccl.ncclCommInitRank(C.byref(comm), size, uid, rank), "ncclCommInitRank")
        self.ptr = comm.value

    def destroy(self):
        if self.ptr:
            _lib.nccl().ncclCommDestroy(self.ptr)
            self.ptr = None
