"""What epx's Python objects over a native libepx object share (epx.Buffer, epx.LoadBalancer,
epx.EngramBuffer): `with` support and destroy() at garbage collection, and reading the object's
async error."""

import ctypes as C

from . import _abi, _lib


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
