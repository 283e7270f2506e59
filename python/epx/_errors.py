"""Exceptions of the epx package (no torch, no libepx needed)."""

from . import _abi


class EpError(RuntimeError):
    """A libepx call returned a non-success ncclResult_t.

    Attributes: ``code`` (int ncclResult_t), ``name`` (e.g. "ncclInvalidArgument"), ``message``
    (ncclEpGetLastError() of the calling thread, or the group's async error text).
    """

    def __init__(self, code, message):
        self.code = int(code)
        self.name = _abi.NCCL_RESULTS.get(self.code, "ncclResult(%d)" % self.code)
        self.message = message or ""
        super().__init__("%s (%d): %s" % (self.name, self.code, self.message or "(no message)"))


class EpAsyncError(EpError):
    """A device-side error of the group (ncclEpGroupGetAsyncError), raised at the next call.

    code ncclRemoteError: a device wait timed out; the group refuses new work: destroy and recreate
    it on every rank. code ncclInvalidArgument: a capacity-mode layout found invalid expert ids
    (those slots were dropped); raised once, the buffer stays usable.
    """


class LibraryNotFoundError(OSError):
    """libepx (or libnccl) could not be loaded; the message says what was tried and how to fix it."""


class NcclVersionError(EpError):
    """The NCCL loaded in the process (torch's, when torch was imported first) cannot run this libepx.

    Attributes besides EpError's: ``runtime`` and ``build`` ("2.28.9"-style strings) and ``libnccl``
    (the path of the loaded libnccl, or "" when unknown). The message says what to do.
    """

    def __init__(self, code, message, runtime, build, libnccl):
        self.runtime = runtime
        self.build = build
        self.libnccl = libnccl
        super().__init__(code, message)
