"""What epx's Python objects over a native libepx object share (epx.Buffer, epx.LoadBalancer,
epx.EngramBuffer): `with` support and destroy() at garbage collection, and reading the object's
async error; for the collective objects on a torch.distributed group (LoadBalancer, EngramBuffer)
also the group, the communicator (borrowed from torch or an own one), creation and destruction."""

import ctypes as C

from . import _abi, _comm, _lib
from ._errors import EpAsyncError


class NativeObject:
    """Subclasses define destroy() (idempotent: a second call does nothing)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        try:
            self.destroy()
        except Exception:  # noqa: BLE001
            pass


def async_error(getter, ptr):
    """(code, message) from a ncclEp*GetAsyncError `getter` of the native object `ptr`."""
    code = _abi.ncclResult_t()
    msg = C.create_string_buffer(1024)
    _lib.check(getter(ptr, C.byref(code), msg, len(msg)))
    return code.value, msg.value.decode("utf-8", "replace")


def import_torch(what, hint=""):
    """(torch, torch.distributed), or ImportError naming `what` needs them (then `hint`)."""
    try:
        import torch  # noqa: PLC0415
        import torch.distributed as dist  # noqa: PLC0415
    except ImportError as e:
        raise ImportError("%s needs PyTorch (torch with CUDA and torch.distributed), which cannot be imported: %s%s"
                          % (what, e, hint), name=getattr(e, "name", None)) from e
    return torch, dist


def bind_group(obj, group, torch, dist):
    """obj.group (None: the default group), obj.rank, obj.num_ranks and obj.device (this rank's)."""
    if group is None:
        group = dist.group.WORLD
    obj.group = group
    obj.rank = dist.get_rank(group)
    obj.num_ranks = dist.get_world_size(group)
    obj.device = torch.device("cuda", torch.cuda.current_device())


class GroupObject(NativeObject):
    """A native object created collectively over a torch.distributed group. Subclasses call
    _bind_group, then _create, and define destroy() with _release; get_async_error() is theirs."""

    _what = "epx object"  # the class's public name, in errors

    def _import_torch(self):
        """(torch, torch.distributed), or ImportError naming what needs them."""
        return import_torch(self._what)

    def _bind_group(self, group):
        """group (None: the default group), rank, num_ranks and this rank's device; returns torch."""
        torch, dist = self._import_torch()
        bind_group(self, group, torch, dist)
        return torch

    def _create(self, create, use_group_comm):
        """self._ptr from create(lib, comm, byref(handle)) (a ncclEp*Create call) on the group's NCCL
        communicator (borrowed from torch, else an own one, destroyed again if the creation fails)."""
        self._clib = _lib.lib()  # after torch: libepx then shares torch's libnccl/libcudart
        comm = _comm.borrow_comm(self.group) if use_group_comm else 0
        if not comm:
            self._own_comm = _comm.OwnComm(self.group)
            comm = self._own_comm.ptr
        self.comm_borrowed = self._own_comm is None
        h = C.c_void_p()
        try:
            _lib.check(create(self._clib, C.c_void_p(comm), C.byref(h)))
        except BaseException:
            if self._own_comm:
                self._own_comm.destroy()
                self._own_comm = None
            raise
        self._ptr = h.value

    def _native(self):
        if not self._ptr:
            raise RuntimeError("this %s was destroyed" % self._what)
        return self._ptr

    def _release(self, destroy):
        """destroy(lib, ptr) of the native object once (collective), then the own communicator."""
        if self._ptr:
            p, self._ptr = self._ptr, None
            _lib.check(destroy(self._clib, p))
        if self._own_comm:
            self._own_comm.destroy()
            self._own_comm = None

    def check_async_error(self):
        """Raise EpAsyncError for a device-side error (get_async_error())."""
        code, msg = self.get_async_error()
        if code != _abi.ncclSuccess:
            raise EpAsyncError(code, msg)
