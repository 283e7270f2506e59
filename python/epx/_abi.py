"""ctypes mirror of host/include/epx/ep.h, ep_ll.h, lb.h and engram.h (the C ABI of libepx).

Every structure below lists the fields of its C counterpart in the same order with the same types;
tests/test_cpu.py compiles a C program against ep.h and compares sizeof and every field offset with
these classes, and compares the field names with the header's, so a change to ep.h that is not
mirrored here fails the CPU tests (CTest label "python").

No torch, no CUDA, no libepx needed to import this module.
"""

import ctypes as C

# --- constants (ep.h) -------------------------------------------------------------------------
EPX_VERSION_CODE = 100  # 0.1.0
NCCL_EP_CONFIG_MAGIC = 0x45505831  # "EPX1"
NCCL_EP_UNDEF_INT = -2147483647 - 1

# ncclEpAlgo_t
ncclEpAlgoAuto = 0
ncclEpAlgoHighThroughput = 1
ncclEpAlgoLowLatency = 2
# ncclEpForwarding_t
ncclEpForwardAuto = 0
ncclEpForwardDirect = 1
ncclEpForwardHybrid = 2

# ncclEpLayout_t
ncclEpLayoutExpanded = 0
ncclEpLayoutDeduplicated = 1

# ncclEpMode_t
ncclEpModeExact = 0
ncclEpModeCapacity = 1

# ncclEpCombinePrecision_t
ncclEpCombineBf16Partials = 0
ncclEpCombineFp32 = 1

# --- NCCL (nccl.h) values used by ep.h --------------------------------------------------------
# ncclResult_t
NCCL_RESULTS = {
    0: "ncclSuccess",
    1: "ncclUnhandledCudaError",
    2: "ncclSystemError",
    3: "ncclInternalError",
    4: "ncclInvalidArgument",
    5: "ncclInvalidUsage",
    6: "ncclRemoteError",
    7: "ncclInProgress",
}
ncclSuccess = 0
ncclUnhandledCudaError = 1
ncclSystemError = 2
ncclInternalError = 3
ncclInvalidArgument = 4
ncclInvalidUsage = 5
ncclRemoteError = 6
ncclInProgress = 7

# ncclDataType_t (the ones ep.h accepts)
ncclInt32 = 2
ncclInt64 = 4
ncclFloat32 = 7
ncclBfloat16 = 9
ncclFloat8e4m3 = 10

NCCL_UNIQUE_ID_BYTES = 128

# C enums are int-sized on the ABI epx targets (x86-64 / aarch64 Linux); the layout test checks it.
c_enum = C.c_int
ncclResult_t = c_enum
ncclDataType_t = c_enum
ncclComm_t = C.c_void_p
ncclEpGroup_t = C.c_void_p
ncclEpHandle_t = C.c_void_p
cudaStream_t = C.c_void_p


class ncclUniqueId(C.Structure):
    _fields_ = [("internal", C.c_char * NCCL_UNIQUE_ID_BYTES)]


class ncclEpConfig_t(C.Structure):
    _fields_ = [
        ("size", C.c_size_t),
        ("magic", C.c_uint),
        ("version", C.c_uint),
        ("maxTokensPerRank", C.c_int),
        ("hidden", C.c_int),
        ("topk", C.c_int),
        ("numExperts", C.c_int),
        ("fp8Dispatch", C.c_int),
        ("algorithm", C.c_int),
        ("smBudget", C.c_int),
        ("qpBudget", C.c_int),
        ("slIndex", C.c_int),
        ("timeoutMs", C.c_int),
        ("exactCombine", C.c_int),
        ("forwarding", C.c_int),
        ("forwardNodeSize", C.c_int),
    ]


class ncclEpHandleConfig_t(C.Structure):
    _fields_ = [
        ("size", C.c_size_t),
        ("magic", C.c_uint),
        ("version", C.c_uint),
        ("layout", C.c_int),
        ("mode", C.c_int),
        ("expertAlignment", C.c_int),
        ("zeroGaps", C.c_int),
        ("combinePrecision", C.c_int),
    ]


class ncclEpRouting_t(C.Structure):
    _fields_ = [
        ("topkIdx", C.c_void_p),
        ("topkIdxType", ncclDataType_t),
        ("numTokens", C.c_int),
    ]


class ncclEpDispatchInputs_t(C.Structure):
    _fields_ = [
        ("x", C.c_void_p),
        ("xType", ncclDataType_t),
        ("xScales", C.c_void_p),  # const float*
        ("topkWeights", C.c_void_p),  # const float*
        ("hidden", C.c_int),
    ]


class ncclEpDispatchOutputs_t(C.Structure):
    _fields_ = [
        ("recvX", C.c_void_p),
        ("recvScales", C.c_void_p),  # float*
        ("recvTopkWeights", C.c_void_p),  # float*
        ("recvTopkIdx", C.c_void_p),  # int32_t*
        ("recvSrcInfo", C.c_void_p),  # int32_t*
        ("expertCounts", C.c_void_p),  # int32_t*
        ("expertOffsets", C.c_void_p),  # int32_t*
        ("numRecvRows", C.c_void_p),  # int32_t*
        ("numRows", C.c_int),
    ]


class ncclEpCombineInputs_t(C.Structure):
    _fields_ = [
        ("x", C.c_void_p),
        ("xType", ncclDataType_t),
        ("bias0", C.c_void_p),
        ("bias1", C.c_void_p),
        ("topkWeights", C.c_void_p),  # const float*
        ("numRows", C.c_int),
        ("hidden", C.c_int),
    ]


class ncclEpCombineOutputs_t(C.Structure):
    _fields_ = [
        ("out", C.c_void_p),
        ("combinedTopkWeights", C.c_void_p),  # float*
        ("numTokens", C.c_int),
    ]


class ncclEpBuffers_t(C.Structure):
    _fields_ = [
        ("recvX", C.c_void_p),
        ("recvScales", C.c_void_p),
        ("recvTopkIdx", C.c_void_p),
        ("recvTopkWeights", C.c_void_p),
        ("recvSrcInfo", C.c_void_p),
        ("combineX", C.c_void_p),
        ("rows", C.c_int),
    ]


class ncclEpCounts_t(C.Structure):
    _fields_ = [
        ("numRows", C.c_int),
        ("numTokens", C.c_int),
        ("numLocalExperts", C.c_int),
        ("expertCounts", C.POINTER(C.c_int)),
    ]


# --- ep_ll.h (low-latency mode) ------------------------------------------------------------------
NCCL_EP_LL_SEND = 0x1
NCCL_EP_LL_RECV = 0x2
NCCL_EP_LL_SEND_RECV = NCCL_EP_LL_SEND | NCCL_EP_LL_RECV


class ncclEpLowLatencyDispatchInputs_t(C.Structure):
    _fields_ = [
        ("x", C.c_void_p),
        ("topkIdx", C.c_void_p),
        ("topkIdxType", ncclDataType_t),
        ("numTokens", C.c_int),
        ("useFp8", C.c_int),
        ("roundScale", C.c_int),
    ]


class ncclEpLowLatencyDispatchOutputs_t(C.Structure):
    _fields_ = [
        ("recvX", C.c_void_p),
        ("recvScales", C.c_void_p),  # float*
        ("recvCount", C.c_void_p),  # int32_t*
        ("recvSrcInfo", C.c_void_p),  # int32_t*
    ]


class ncclEpLowLatencyCombineInputs_t(C.Structure):
    _fields_ = [
        ("x", C.c_void_p),
        ("topkWeights", C.c_void_p),  # const float*
    ]


class ncclEpLowLatencyCombineOutputs_t(C.Structure):
    _fields_ = [
        ("out", C.c_void_p),
    ]


class ncclEpLowLatencyShape_t(C.Structure):
    _fields_ = [
        ("numLocalExperts", C.c_int),
        ("rowsPerExpert", C.c_int),
        ("hidden", C.c_int),
        ("scaleCols", C.c_int),
    ]


LL_STRUCTS = {
    "ncclEpLowLatencyDispatchInputs_t": ncclEpLowLatencyDispatchInputs_t,
    "ncclEpLowLatencyDispatchOutputs_t": ncclEpLowLatencyDispatchOutputs_t,
    "ncclEpLowLatencyCombineInputs_t": ncclEpLowLatencyCombineInputs_t,
    "ncclEpLowLatencyCombineOutputs_t": ncclEpLowLatencyCombineOutputs_t,
    "ncclEpLowLatencyShape_t": ncclEpLowLatencyShape_t,
}

# --- lb.h (expert load balancing) ---------------------------------------------------------------
NCCL_EP_LB_CONFIG_MAGIC = 0x4550584C  # "EPXL"
NCCL_EP_LB_MAX_TENSORS = 8


class ncclEpLbPlan_t(C.Structure):
    _fields_ = [
        ("numExperts", C.c_int),
        ("numSlots", C.c_int),
        ("numWeightTensors", C.c_int),
        ("weightRowBytes", C.c_size_t * NCCL_EP_LB_MAX_TENSORS),
        ("numGradTensors", C.c_int),
        ("gradRowElems", C.c_size_t * NCCL_EP_LB_MAX_TENSORS),
    ]


class _ChunkedCollConfig(C.Structure):
    """The config layout that lb.h and engram.h share: header, numCtas, timeoutMs, chunkBytes."""
    _fields_ = [
        ("size", C.c_size_t),
        ("magic", C.c_uint),
        ("version", C.c_uint),
        ("numCtas", C.c_int),
        ("timeoutMs", C.c_int),
        ("chunkBytes", C.c_size_t),
    ]

    @classmethod
    def initializer(cls, magic):
        """The header's INITIALIZER: size, magic, version set; numCtas and timeoutMs undefined,
        chunkBytes 0 (the library's default)."""
        return cls(C.sizeof(cls), magic, EPX_VERSION_CODE, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, 0)


class ncclEpLbConfig_t(_ChunkedCollConfig):
    pass


LB_STRUCTS = {
    "ncclEpLbPlan_t": ncclEpLbPlan_t,
    "ncclEpLbConfig_t": ncclEpLbConfig_t,
}


def lb_config_initializer():
    """NCCL_EP_LB_CONFIG_INITIALIZER."""
    return ncclEpLbConfig_t.initializer(NCCL_EP_LB_CONFIG_MAGIC)


# --- engram.h (Engram: embedding-like tables sharded over the ranks) -----------------------------
NCCL_EP_ENGRAM_CONFIG_MAGIC = 0x45505845  # "EPXE"
NCCL_EP_ENGRAM_MAX_LAYERS = 64
ncclEpEngram_t = C.c_void_p


class ncclEpEngramPlan_t(C.Structure):
    _fields_ = [
        ("numLayers", C.c_int),
        ("numRows", C.c_int64),
        ("rowBytes", C.c_size_t),
        ("maxTokens", C.c_int),
        ("entriesPerToken", C.c_int),
    ]


class ncclEpEngramConfig_t(_ChunkedCollConfig):
    pass


ENGRAM_STRUCTS = {
    "ncclEpEngramPlan_t": ncclEpEngramPlan_t,
    "ncclEpEngramConfig_t": ncclEpEngramConfig_t,
}


def engram_config_initializer():
    """NCCL_EP_ENGRAM_CONFIG_INITIALIZER."""
    return ncclEpEngramConfig_t.initializer(NCCL_EP_ENGRAM_CONFIG_MAGIC)


# Every mirrored structure of ep.h, by its C name (the layout test walks this and LL_STRUCTS).
STRUCTS = {
    "ncclEpConfig_t": ncclEpConfig_t,
    "ncclEpHandleConfig_t": ncclEpHandleConfig_t,
    "ncclEpRouting_t": ncclEpRouting_t,
    "ncclEpDispatchInputs_t": ncclEpDispatchInputs_t,
    "ncclEpDispatchOutputs_t": ncclEpDispatchOutputs_t,
    "ncclEpCombineInputs_t": ncclEpCombineInputs_t,
    "ncclEpCombineOutputs_t": ncclEpCombineOutputs_t,
    "ncclEpBuffers_t": ncclEpBuffers_t,
    "ncclEpCounts_t": ncclEpCounts_t,
}


def config_initializer():
    """NCCL_EP_CONFIG_INITIALIZER: size, magic, version set; every other field NCCL_EP_UNDEF_INT."""
    n_undef = len(ncclEpConfig_t._fields_) - 3
    return ncclEpConfig_t(C.sizeof(ncclEpConfig_t), NCCL_EP_CONFIG_MAGIC, EPX_VERSION_CODE,
                          *([NCCL_EP_UNDEF_INT] * n_undef))


def handle_config_initializer():
    """NCCL_EP_HANDLE_CONFIG_INITIALIZER: size, magic, version set; every other field undefined."""
    n_undef = len(ncclEpHandleConfig_t._fields_) - 3
    return ncclEpHandleConfig_t(C.sizeof(ncclEpHandleConfig_t), NCCL_EP_CONFIG_MAGIC,
                                EPX_VERSION_CODE, *([NCCL_EP_UNDEF_INT] * n_undef))
