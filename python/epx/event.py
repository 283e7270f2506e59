"""epx.EventOverlap: the completion of an epx call issued on a Buffer's communication stream.

dispatch/combine with async_finish=True run on the Buffer's own CUDA stream (Buffer.comm_stream)
instead of the current stream and return one of these: the caller goes on with other work on its
stream (attention, a shared expert) and calls current_stream_wait() before it uses the outputs.
previous_event= (an EventOverlap, e.g. EventOverlap.capture(), or a torch.cuda.Event) makes the call
start after that event instead of after everything issued so far on the current stream.

It wraps a torch.cuda.Event recorded on the communication stream after the call, and keeps the
call's tensors referenced until current_stream_wait() (their memory is also marked as used on the
communication stream, record_stream, so PyTorch's allocator does not hand it out early).
"""


def _torch():
    import torch  # noqa: PLC0415 (lazy: import epx works without torch)
    return torch


class EventOverlap:
    """Completion of an epx call on another stream (over a torch.cuda.Event).

    Attributes: event (torch.cuda.Event, or None for "nothing to wait for").
    """

    def __init__(self, event=None, tensors=()):
        self.event = event
        self._tensors = tuple(t for t in tensors if t is not None)

    @classmethod
    def capture(cls, stream=None):
        """An event recorded now on `stream` (default: the current stream): pass it as
        previous_event= to start an epx call after the work issued so far on that stream."""
        torch = _torch()
        ev = torch.cuda.Event()
        ev.record(stream if stream is not None else torch.cuda.current_stream())
        return cls(ev)

    def current_stream_wait(self):
        """Make the current stream wait for the call (stream-ordered, no host sync; capturable).
        The outputs may be used on the current stream afterwards."""
        self.wait(_torch().cuda.current_stream())

    def wait(self, stream):
        """Make `stream` wait for the call."""
        if self.event is not None:
            stream.wait_event(self.event)
        self._tensors = ()

    def synchronize(self):
        """Block the host until the call finished on the device."""
        if self.event is not None:
            self.event.synchronize()

    def query(self):
        """True when the call finished on the device (does not block)."""
        return self.event is None or bool(self.event.query())

    def __repr__(self):
        return "EventOverlap(%r)" % (self.event,)


def as_cuda_event(ev):
    """The torch.cuda.Event inside previous_event= (an EventOverlap or a torch.cuda.Event)."""
    if isinstance(ev, EventOverlap):
        return ev.event
    if hasattr(ev, "record") and hasattr(ev, "query"):
        return ev
    raise TypeError("previous_event must be an epx.EventOverlap or a torch.cuda.Event, got %s" % type(ev).__name__)
