"""epx.LoadBalancer: expert load balancing (host/include/epx/lb.h) over a torch.distributed NCCL group.

Redundant copies of hot experts on other ranks (DeepSeek-V3's EPLB), over NVLink and across nodes:

    lb = epx.LoadBalancer(group, num_experts=256, num_slots=2,
                          weight_row_bytes=[w.nbytes // local, s.nbytes // local],   # per expert
                          grad_row_elems=[g.numel() // local])
    slots = lb.slot_weights(0, torch.float8_e4m3fn)    # [num_slots, row] view of the window
    lb.prefetch_weights(mapping, [w, s])               # before the experts run
    ...                                                # replicas' backward writes lb.slot_grads(0)
    lb.reduce_grads(mapping, [g])                      # g += replicas' gradients, (rank, slot) order

`mapping` is an int32 CUDA tensor of num_ranks * num_slots entries (or [num_ranks, num_slots]), the
same on every rank: the original expert each slot holds, or -1. Every call is collective and runs
on torch.cuda.current_stream(); an entry outside [-1, num_experts) is skipped and reported by
check_async_error() (EpAsyncError, ncclInvalidArgument). Expert e is owned by rank
e // num_local_experts; its rows in `weights` / `grads` are at e % num_local_experts.
"""

import ctypes as C

from . import _abi, _checks, _lib, _native
from .window import window_tensor


def _int_list(name, v):
    if isinstance(v, (int, str, bytes)) or not hasattr(v, "__iter__"):
        raise TypeError("%s must be a list of ints" % name)
    out = [int(x) for x in v]
    if len(out) > _abi.NCCL_EP_LB_MAX_TENSORS:
        raise ValueError("%s has %d entries, at most %d" % (name, len(out), _abi.NCCL_EP_LB_MAX_TENSORS))
    return out


def make_plan(num_experts, num_slots, weight_row_bytes, grad_row_elems):
    """The ncclEpLbPlan_t (libepx checks the values; this checks the Python types)."""
    for name, v in (("num_experts", num_experts), ("num_slots", num_slots)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError("%s must be an int, got %r" % (name, v))
    w = _int_list("weight_row_bytes", weight_row_bytes)
    g = _int_list("grad_row_elems", grad_row_elems)
    p = _abi.ncclEpLbPlan_t()
    p.numExperts = num_experts
    p.numSlots = num_slots
    p.numWeightTensors = len(w)
    for i, b in enumerate(w):
        p.weightRowBytes[i] = b
    p.numGradTensors = len(g)
    for i, e in enumerate(g):
        p.gradRowElems[i] = e
    return p


class LoadBalancer(_native.GroupObject):
    """Expert load balancing over `group` (None: the default group). Creating it is collective."""

    _what = "epx.LoadBalancer"

    def __init__(self, group, num_experts, num_slots, weight_row_bytes=(), grad_row_elems=(), num_ctas=0,
                 timeout_ms=10000, chunk_bytes=0, use_group_comm=True):
        self._ptr = None  # first: __del__ (destroy) runs even when __init__ raises
        self._own_comm = None
        self._import_torch()
        plan = make_plan(num_experts, num_slots, weight_row_bytes, grad_row_elems)
        cfg = _abi.lb_config_initializer()
        if num_ctas:
            cfg.numCtas = int(num_ctas)
        cfg.timeoutMs = int(timeout_ms)
        cfg.chunkBytes = int(chunk_bytes)
        self._bind_group(group)
        self.num_experts = num_experts
        self.num_slots = num_slots
        self.num_local_experts = num_experts // self.num_ranks if self.num_ranks else 0
        self.weight_row_bytes = list(plan.weightRowBytes[:plan.numWeightTensors])
        self.grad_row_elems = list(plan.gradRowElems[:plan.numGradTensors])
        self._create(lambda lib, comm, h: lib.ncclEpLbCreate(comm, C.byref(plan), C.byref(cfg), h), use_group_comm)

    def destroy(self):
        """Destroy the native object (collective; waits for the device) and an own communicator."""
        self._release(lambda lib, p: lib.ncclEpLbDestroy(p))

    # --- the slots (views of the window, valid while the object lives) -----------------------------
    def slot_weights(self, t, dtype=None):
        """Weight tensor t of this rank's slots, [num_slots, row] of `dtype` (default uint8: bytes)."""
        import torch  # noqa: PLC0415
        dtype = torch.uint8 if dtype is None else dtype
        p = C.c_void_p()
        _lib.check(_lib.lib().ncclEpLbGetSlots(self._native(), int(t), C.byref(p)))
        size = torch.empty((), dtype=dtype).element_size()
        row = self.weight_row_bytes[t]
        if row % size:
            raise ValueError("weight tensor %d's rows (%d bytes) are not a whole number of %s" % (t, row, dtype))
        return window_tensor(torch, p.value, (self.num_slots, row // size), dtype, self.device, self)

    def slot_grads(self, t):
        """Gradient tensor t of this rank's slots, float32 [num_slots, row_elems]: the replicas'
        backward writes here; reduce_grads reads it."""
        import torch  # noqa: PLC0415
        p = C.c_void_p()
        _lib.check(_lib.lib().ncclEpLbGetSlotGrads(self._native(), int(t), C.byref(p)))
        return window_tensor(torch, p.value, (self.num_slots, self.grad_row_elems[t]), torch.float32, self.device, self)

    # --- the calls ----------------------------------------------------------------------------------
    def _stream(self):
        import torch  # noqa: PLC0415
        return C.c_void_p(torch.cuda.current_stream().cuda_stream)

    def prefetch_weights(self, mapping, weights):
        """Copy every used slot's expert rows from its owner's `weights` (one tensor per planned
        weight tensor, [num_local_experts, ...] holding num_local_experts rows of its row bytes)."""
        _checks.check_lb_mapping(mapping, self.num_ranks, self.num_slots, self.device)
        ptrs = _checks.check_lb_rows("weights", weights, self.weight_row_bytes, self.num_local_experts, False,
                                     self.device)
        arr = (C.c_void_p * max(1, len(ptrs)))(*ptrs)
        _lib.check(_lib.lib().ncclEpLbPrefetchWeights(self._native(), C.c_void_p(mapping.data_ptr()), arr,
                                                     self._stream()))

    def reduce_grads(self, mapping, grads):
        """Add every replica's slot gradient to its original's row of `grads` (float32, one tensor
        per planned gradient tensor, num_local_experts rows), in place, in (rank, slot) order."""
        _checks.check_lb_mapping(mapping, self.num_ranks, self.num_slots, self.device)
        ptrs = _checks.check_lb_rows("grads", grads, self.grad_row_elems, self.num_local_experts, True, self.device)
        arr = (C.c_void_p * max(1, len(ptrs)))(*ptrs)
        _lib.check(_lib.lib().ncclEpLbReduceGrads(self._native(), C.c_void_p(mapping.data_ptr()), arr,
                                                 self._stream()))

    # --- errors -------------------------------------------------------------------------------------
    def get_async_error(self):
        """(code, message) of the device-side error; code 0 when none. Does not synchronize."""
        return _native.async_error(_lib.lib().ncclEpLbGetAsyncError, self._native())
