"""Loading libepx through ctypes, and the prototypes of its C API (ep.h, ep_ll.h, lb.h, engram.h).

Search order (first that exists wins; a set EPX_LIBRARY that fails to load is an error, it does not
fall through to the others, so a typo is not silently replaced by another libepx):
  1. the EPX_LIBRARY environment variable: a path to libepx.so* (or a directory holding one);
  2. a libepx.so* bundled in this package's _lib/ folder;
  3. the system loader: "libepx.so.0" (LD_LIBRARY_PATH, ld.so.cache, ...), then ctypes.util.find_library.

libepx needs libnccl.so.2 and libcudart.so.13. When torch is imported first, the loader reuses
torch's already-loaded copies (same sonames), so epx and torch.distributed share one NCCL library:
this is required for a ncclComm_t taken from a torch process group to be usable by epx.
At load, ncclEpGetNcclVersions checks that the NCCL loaded (torch's, or the one libepx found) can
run this libepx; when it cannot, NcclVersionError names both versions, the library's path and what
to do (nccl_versions() reports them either way).
"""

import ctypes as C
import ctypes.util
import glob
import os
import sys
import threading

from . import _abi
from ._errors import EpError, LibraryNotFoundError, NcclVersionError

_lock = threading.Lock()
_lib = None
_lib_path = None

ENV_VAR = "EPX_LIBRARY"
_PKG_LIB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib")

_HINT = ("Install libepx (cmake --install <build> --prefix <prefix>) and set EPX_LIBRARY=<prefix>/lib/"
         "libepx.so.0, or add <prefix>/lib to LD_LIBRARY_PATH.")


def _candidates_in_dir(d):
    names = sorted(glob.glob(os.path.join(d, "libepx.so*")), key=len)
    return names


def _declare(lib, path):
    P = C.POINTER
    V = C.c_void_p
    R = _abi.ncclResult_t
    protos = {
        "ncclEpGetLastError": (C.c_char_p, []),
        "ncclEpGetNcclVersions": (R, [P(C.c_int), P(C.c_int)]),
        "ncclEpGroupGetAsyncError": (R, [V, P(R), C.c_char_p, C.c_size_t]),
        "ncclEpGetBufferSizeHint": (R, [P(_abi.ncclEpConfig_t), C.c_int, P(C.c_size_t)]),
        "ncclEpGroupCreate": (R, [V, P(_abi.ncclEpConfig_t), P(V)]),
        "ncclEpGroupDestroy": (R, [V]),
        "ncclEpGroupGetSmCount": (R, [V, P(C.c_int)]),
        "ncclEpGroupGetBuffers": (R, [V, P(_abi.ncclEpBuffers_t)]),
        "ncclEpHandleCreate": (R, [V, P(_abi.ncclEpHandleConfig_t), P(V)]),
        "ncclEpHandleDestroy": (R, [V]),
        "ncclEpHandleGetCapacity": (R, [V, P(C.c_int)]),
        "ncclEpHandleGetCounts": (R, [V, P(_abi.ncclEpCounts_t)]),
        "ncclEpDispatchLayout": (R, [V, P(_abi.ncclEpRouting_t), V]),
        "ncclEpDispatch": (R, [V, P(_abi.ncclEpDispatchInputs_t), P(_abi.ncclEpDispatchOutputs_t), V]),
        "ncclEpCombine": (R, [V, P(_abi.ncclEpCombineInputs_t), P(_abi.ncclEpCombineOutputs_t), V]),
        # ep_ll.h
        "ncclEpLowLatencyGetShape": (R, [V, P(_abi.ncclEpLowLatencyShape_t)]),
        "ncclEpLowLatencyGetCombineBuffer": (R, [V, P(V)]),
        "ncclEpLowLatencyDispatch": (R, [V, P(_abi.ncclEpLowLatencyDispatchInputs_t),
                                         P(_abi.ncclEpLowLatencyDispatchOutputs_t), C.c_int, V]),
        "ncclEpLowLatencyCombine": (R, [V, P(_abi.ncclEpLowLatencyCombineInputs_t),
                                        P(_abi.ncclEpLowLatencyCombineOutputs_t), C.c_int, V]),
        # lb.h
        "ncclEpLbGetBufferSizeHint": (R, [V, P(_abi.ncclEpLbPlan_t), P(_abi.ncclEpLbConfig_t), P(C.c_size_t)]),
        "ncclEpLbCreate": (R, [V, P(_abi.ncclEpLbPlan_t), P(_abi.ncclEpLbConfig_t), P(V)]),
        "ncclEpLbDestroy": (R, [V]),
        "ncclEpLbGetSlots": (R, [V, C.c_int, P(V)]),
        "ncclEpLbGetSlotGrads": (R, [V, C.c_int, P(V)]),
        "ncclEpLbPrefetchWeights": (R, [V, V, P(V), V]),
        "ncclEpLbReduceGrads": (R, [V, V, P(V), V]),
        "ncclEpLbGetAsyncError": (R, [V, P(R), C.c_char_p, C.c_size_t]),
        # engram.h
        "ncclEpEngramGetBufferSizeHint": (R, [V, P(_abi.ncclEpEngramPlan_t), P(_abi.ncclEpEngramConfig_t),
                                              P(C.c_size_t)]),
        "ncclEpEngramCreate": (R, [V, P(_abi.ncclEpEngramPlan_t), P(_abi.ncclEpEngramConfig_t), P(V)]),
        "ncclEpEngramDestroy": (R, [V]),
        "ncclEpEngramSetTable": (R, [V, C.c_int, V]),
        "ncclEpEngramFetch": (R, [V, V, C.c_int, V, V]),
        "ncclEpEngramWaitLayer": (R, [V, C.c_int, V]),
        "ncclEpEngramGetAsyncError": (R, [V, P(R), C.c_char_p, C.c_size_t]),
    }
    missing = []
    for name, (res, args) in protos.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        f.restype = res
        f.argtypes = args
    if len(missing) == len(protos):
        raise LibraryNotFoundError("%s has none of the ncclEp* functions (e.g. ncclEpGroupCreate): it is not a "
                                   "libepx. %s" % (path, _HINT))
    if missing:
        raise LibraryNotFoundError("the loaded libepx lacks %s; it is older than this package "
                                   "(epx %d)" % (", ".join(missing), _abi.EPX_VERSION_CODE))


def _torch_first():
    """Import torch (when installed) before libepx, so that libepx's libnccl.so.2 and libcudart.so.13
    resolve to torch's copies. Loaded the other way round, torch would get libepx's NCCL instead of
    its own (the loader reuses a library already loaded under the same soname)."""
    if "torch" in sys.modules:
        return
    try:
        import torch  # noqa: F401, PLC0415
    except ImportError:
        pass


def _load():
    _torch_first()
    tried = []
    env = os.environ.get(ENV_VAR)
    if env:
        paths = _candidates_in_dir(env) if os.path.isdir(env) else [env]
        if not paths:
            raise LibraryNotFoundError("%s=%s is a directory without libepx.so*. %s" % (ENV_VAR, env, _HINT))
        try:
            return C.CDLL(paths[0], mode=C.RTLD_GLOBAL), paths[0]
        except OSError as e:
            raise LibraryNotFoundError("%s=%s: cannot load libepx: %s. %s" % (ENV_VAR, env, e, _HINT)) from e
    tried.append("%s (not set)" % ENV_VAR)
    for p in _candidates_in_dir(_PKG_LIB_DIR):
        try:
            return C.CDLL(p, mode=C.RTLD_GLOBAL), p
        except OSError as e:
            tried.append("%s: %s" % (p, e))
    if not os.path.isdir(_PKG_LIB_DIR):
        tried.append("%s (no bundled library)" % _PKG_LIB_DIR)
    names = ["libepx.so.0", "libepx.so"]
    found = ctypes.util.find_library("epx")
    if found and found not in names:
        names.append(found)
    for n in names:
        try:
            return C.CDLL(n, mode=C.RTLD_GLOBAL), n
        except OSError as e:
            tried.append("%s: %s" % (n, e))
    raise LibraryNotFoundError("cannot find libepx. Tried: %s. %s" % ("; ".join(tried), _HINT))


def version_string(code):
    """"2.32.3" for the NCCL_VERSION_CODE 23203 (and the pre-2.9 encoding, 2804 = 2.8.4)."""
    code = int(code)
    if code >= 10000:
        return "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100)
    return "%d.%d.%d" % (code // 1000, code % 1000 // 100, code % 100)


def _loaded_libnccl():
    """Path of the libnccl mapped into this process ("" when none is, or not on Linux)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                if "/libnccl.so" in path:
                    return path
    except OSError:
        pass
    return ""


def _torch_nccl():
    """"torch X built with NCCL Y" when torch is imported and reports it, else ""."""
    t = sys.modules.get("torch")
    try:
        v = t.cuda.nccl.version()  # (2, 28, 9) in recent torch, an int in old ones
        v = ".".join(str(x) for x in v) if isinstance(v, tuple) else version_string(v)
        return "torch %s was built with NCCL %s" % (t.__version__, v)
    except Exception:  # noqa: BLE001 -- no torch, a CPU-only torch, or an older API
        return ""


_nccl_info = None


def _check_nccl(handle):
    """Fill _nccl_info; raise NcclVersionError when the loaded NCCL cannot run this libepx."""
    global _nccl_info
    runtime, build = C.c_int(0), C.c_int(0)
    rc = handle.ncclEpGetNcclVersions(C.byref(runtime), C.byref(build))
    _nccl_info = {"runtime": version_string(runtime.value) if runtime.value else "unknown",
                  "build": version_string(build.value), "libnccl": _loaded_libnccl(),
                  "compatible": rc == _abi.ncclSuccess}
    if rc != _abi.ncclSuccess:
        msg = (handle.ncclEpGetLastError() or b"").decode("utf-8", "replace")
        where = [x for x in ("loaded libnccl: " + _nccl_info["libnccl"] if _nccl_info["libnccl"] else "",
                             _torch_nccl()) if x]
        if where:
            msg += " (%s)" % "; ".join(where)
        raise NcclVersionError(rc, msg, _nccl_info["runtime"], _nccl_info["build"], _nccl_info["libnccl"])


def lib():
    """The loaded libepx (ctypes.CDLL) with its prototypes declared; loads it on first use and
    checks that the NCCL in the process can run it (NcclVersionError otherwise, on every call)."""
    global _lib, _lib_path
    if _lib is None:
        with _lock:
            if _lib is None:
                handle, path = _load()
                _declare(handle, path)
                _check_nccl(handle)
                _lib_path = path
                _lib = handle
    return _lib


def nccl_versions():
    """{"runtime", "build", "libnccl", "compatible"}: the NCCL loaded in the process, the one this
    libepx was built against, the loaded library's path, and whether it can run this libepx.
    Loads libepx; does not raise NcclVersionError (LibraryNotFoundError when there is no libepx)."""
    try:
        lib()
    except NcclVersionError:
        pass
    return dict(_nccl_info)


def library_path():
    """Path (or soname) of the loaded libepx, loading it if needed."""
    lib()
    return _lib_path


def _reset_for_tests():
    global _lib, _lib_path, _nccl_info
    _lib = None
    _lib_path = None
    _nccl_info = None


def last_error():
    msg = lib().ncclEpGetLastError()
    return msg.decode("utf-8", "replace") if msg else ""


def check(rc):
    """Raise EpError(rc, ncclEpGetLastError()) for a non-success ncclResult_t."""
    if rc != _abi.ncclSuccess:
        raise EpError(rc, last_error())


# --- libnccl, for a communicator of our own -------------------------------------------------
_nccl = None


def nccl():
    """libnccl.so.2 as libepx sees it (the copy already loaded with libepx, or torch's)."""
    global _nccl
    if _nccl is None:
        lib()  # load libepx first: its NEEDED libnccl.so.2 is then the copy we get here
        try:
            n = C.CDLL("libnccl.so.2", mode=C.RTLD_GLOBAL)
        except OSError as e:
            raise LibraryNotFoundError("cannot load libnccl.so.2: %s" % e) from e
        n.ncclGetUniqueId.restype = _abi.ncclResult_t
        n.ncclGetUniqueId.argtypes = [C.POINTER(_abi.ncclUniqueId)]
        n.ncclCommInitRank.restype = _abi.ncclResult_t
        n.ncclCommInitRank.argtypes = [C.POINTER(C.c_void_p), C.c_int, _abi.ncclUniqueId, C.c_int]
        n.ncclCommDestroy.restype = _abi.ncclResult_t
        n.ncclCommDestroy.argtypes = [C.c_void_p]
        n.ncclGetErrorString.restype = C.c_char_p
        n.ncclGetErrorString.argtypes = [_abi.ncclResult_t]
        n.ncclGetLastError.restype = C.c_char_p
        n.ncclGetLastError.argtypes = [C.c_void_p]
        n.ncclGetVersion.restype = _abi.ncclResult_t
        n.ncclGetVersion.argtypes = [C.POINTER(C.c_int)]
        _nccl = n
    return _nccl


def nccl_check(rc, what):
    if rc != _abi.ncclSuccess:
        n = nccl()
        detail = (n.ncclGetLastError(None) or b"").decode("utf-8", "replace")
        raise EpError(rc, "%s: %s %s" % (what, (n.ncclGetErrorString(rc) or b"").decode(), detail).strip())
