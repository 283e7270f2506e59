"""epx.EngramBuffer: the Engram fetch (host/include/epx/engram.h) over a torch.distributed NCCL group.

Embedding-like tables of several layers, each sharded over the ranks (rank r holds rows
[r * R, (r + 1) * R) of every layer, R = num_rows // num_ranks), and a collective fetch that gathers
the rows a batch of tokens names from whichever rank holds them, one completion per layer:

    eb = epx.EngramBuffer(group, num_layers=4, num_rows=1 << 20, row_bytes=(512, torch.bfloat16),
                          max_tokens=4096, entries_per_token=16)
    for layer, shard in enumerate(shards):            # [R, 512] bf16: CUDA, or pinned CPU memory
        eb.set_table(layer, shard)
    out = eb.fetch(indices)                           # int32 CUDA [layers, tokens, entries] -> [.., 512]
    for layer in range(4):
        eb.wait_layer(layer)                          # this stream waits for that layer only
        y = block(y, out[layer])

`row_bytes` is the row size in bytes (the output is then uint8 [..., row_bytes]) or a tuple
(row_elems, dtype) (the output is that dtype [..., row_elems]). An index -1 is "no row" (zeros); an
index outside [-1, num_rows) yields zeros too and is reported by check_async_error() (EpAsyncError,
ncclInvalidArgument). Every fetch is collective (every rank fetches; 0 tokens is allowed) and runs
on torch.cuda.current_stream(). Tables stay where the caller keeps them: this object holds a
reference to each one set, so they stay alive while it may read them.
"""

import ctypes as C

from . import _abi, _checks, _lib, _native


def _check_int(name, v, lo, hi, what):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("%s must be an int, got %r" % (name, v))
    if not lo <= v <= hi:
        raise ValueError("%s=%d does not fit a C %s" % (name, v, what))
    return v


_INT32 = (-2 ** 31, 2 ** 31 - 1)
_INT64 = (-2 ** 63, 2 ** 63 - 1)


def row_spec(row_bytes):
    """(row_bytes, row_elems, dtype) of the row argument: an int (bytes; dtype None = uint8 output) or
    a tuple (row_elems, dtype)."""
    if isinstance(row_bytes, (tuple, list)):
        if len(row_bytes) != 2:
            raise ValueError("row_bytes as a tuple must be (row_elems, dtype)")
        elems, dtype = row_bytes
        _check_int("row_elems", elems, 0, 2 ** 63 - 1, "size_t")
        return elems * _checks.dtype_bytes(dtype), elems, dtype
    _check_int("row_bytes", row_bytes, 0, 2 ** 64 - 1, "size_t")
    return row_bytes, row_bytes, None


def make_plan(num_layers, num_rows, row_bytes, max_tokens, entries_per_token):
    """The ncclEpEngramPlan_t (libepx checks the values; this checks the Python types and C ranges)."""
    p = _abi.ncclEpEngramPlan_t()
    p.numLayers = _check_int("num_layers", num_layers, *_INT32, "int")
    p.numRows = _check_int("num_rows", num_rows, *_INT64, "int64_t")
    p.rowBytes = _check_int("row_bytes", row_bytes, 0, 2 ** 64 - 1, "size_t")
    p.maxTokens = _check_int("max_tokens", max_tokens, *_INT32, "int")
    p.entriesPerToken = _check_int("entries_per_token", entries_per_token, *_INT32, "int")
    return p


def make_config(num_ctas=None, chunk_bytes=None, timeout_ms=None):
    """The ncclEpEngramConfig_t: None leaves a field at the library's default."""
    cfg = _abi.engram_config_initializer()
    if num_ctas is not None:
        cfg.numCtas = _check_int("num_ctas", num_ctas, *_INT32, "int")
    if timeout_ms is not None:
        cfg.timeoutMs = _check_int("timeout_ms", timeout_ms, *_INT32, "int")
    if chunk_bytes is not None:
        cfg.chunkBytes = _check_int("chunk_bytes", chunk_bytes, 0, 2 ** 64 - 1, "size_t")
    return cfg


def _stream_handle(stream):
    """A cudaStream_t from a torch.cuda.Stream / ExternalStream (its .cuda_stream) or an int handle."""
    if isinstance(stream, bool):
        raise TypeError("stream must be a torch.cuda.Stream or an int handle, got %r" % stream)
    if isinstance(stream, int):
        return C.c_void_p(stream)
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        raise TypeError("stream must be a torch.cuda.Stream or an int handle, got %s" % type(stream).__name__)
    return C.c_void_p(int(handle))


class EngramBuffer(_native.GroupObject):
    """The Engram fetch over `group` (None: the default group). Creating it is collective."""

    _what = "epx.EngramBuffer"

    def __init__(self, group, num_layers, num_rows, row_bytes, max_tokens, entries_per_token, num_ctas=None,
                 chunk_bytes=None, timeout_ms=None, use_group_comm=True):
        self._ptr = None  # first: __del__ (destroy) runs even when __init__ raises
        self._own_comm = None
        self._tables = []
        self._import_torch()
        nbytes, elems, dtype = row_spec(row_bytes)
        plan = make_plan(num_layers, num_rows, nbytes, max_tokens, entries_per_token)
        cfg = make_config(num_ctas, chunk_bytes, timeout_ms)
        torch = self._bind_group(group)
        self.num_layers = num_layers
        self.num_rows = num_rows
        self.rows_per_rank = num_rows // self.num_ranks if self.num_ranks else 0
        self.row_bytes = nbytes
        self.row_elems = elems
        self.dtype = torch.uint8 if dtype is None else dtype
        self.max_tokens = max_tokens
        self.entries_per_token = entries_per_token
        self._dtype_name = None if dtype is None else _checks.name_of_dtype(dtype)
        self._create(lambda lib, comm, h: lib.ncclEpEngramCreate(comm, C.byref(plan), C.byref(cfg), h), use_group_comm)
        self._tables = [None] * num_layers

    def destroy(self):
        """Destroy the native object (collective; waits for the device), drop the tables' references
        and an own communicator."""
        try:
            self._release(lambda lib, p: lib.ncclEpEngramDestroy(p))
        finally:
            self._tables = []

    close = destroy

    def _layer(self, layer):
        _check_int("layer", layer, *_INT32, "int")
        if not 0 <= layer < self.num_layers:
            raise ValueError("layer %d is not in 0 .. %d" % (layer, self.num_layers - 1))
        return layer

    # --- the tables ---------------------------------------------------------------------------------
    def set_table(self, layer, table):
        """This rank's shard of table `layer`: [num_rows // num_ranks, row] of the buffer's dtype (any
        dtype of row_bytes bytes per row when created with bytes), contiguous, 16-byte aligned; a CUDA
        tensor on this rank's device or a pinned CPU tensor (read over PCIe by this rank's kernel).
        Kept referenced until another set_table of that layer or destroy(); its contents may change
        between fetches (stream-ordered with them). Not while a fetch is queued."""
        layer = self._layer(layer)
        ptr = _checks.check_engram_table(table, self.rows_per_rank, self.row_bytes, self._dtype_name, self.device)
        _lib.check(_lib.lib().ncclEpEngramSetTable(self._native(), layer, C.c_void_p(ptr)))
        self._tables[layer] = table

    def table(self, layer):
        """The tensor last given to set_table(layer), or None."""
        return self._tables[self._layer(layer)]

    # --- the calls ----------------------------------------------------------------------------------
    def fetch(self, indices, out=None):
        """Fetch the rows `indices` names (int32 CUDA [num_layers, tokens, entries_per_token], global
        row numbers; tokens <= max_tokens, 0 allowed) into `out` ([num_layers, tokens,
        entries_per_token, row] of the buffer's dtype; allocated when None) on the current stream.
        Collective. Returns out; wait_layer(l) orders another stream after layer l only."""
        import torch  # noqa: PLC0415
        native = self._native()
        tokens = _checks.check_engram_indices(indices, self.num_layers, self.max_tokens, self.entries_per_token,
                                              self.device)
        shape = (self.num_layers, tokens, self.entries_per_token, self.row_elems)
        if out is None:
            out = torch.empty(shape, dtype=self.dtype, device=self.device)
        else:
            _checks.check_tensor("out", out, shape, (_checks.name_of_dtype(self.dtype),), align=16, device=self.device)
        ip = indices.data_ptr() if tokens else 0
        op = out.data_ptr() if tokens else 0
        _lib.check(_lib.lib().ncclEpEngramFetch(native, C.c_void_p(ip), tokens, C.c_void_p(op),
                                               C.c_void_p(torch.cuda.current_stream().cuda_stream)))
        return out

    def wait_layer(self, layer, stream=None):
        """`stream` (default: the current stream) waits until layer `layer` of the last fetch is in
        its output. Does not block the host; capturable."""
        layer = self._layer(layer)
        if stream is None:
            import torch  # noqa: PLC0415
            stream = torch.cuda.current_stream()
        _lib.check(_lib.lib().ncclEpEngramWaitLayer(self._native(), layer, _stream_handle(stream)))

    # --- errors -------------------------------------------------------------------------------------
    def get_async_error(self):
        """(code, message) of the device-side error; code 0 when none. Does not synchronize."""
        return _native.async_error(_lib.lib().ncclEpEngramGetAsyncError, self._native())
