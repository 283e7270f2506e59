// libibverbs entry points, loaded with dlopen at run time so that libnccl-net-epx.so loads on
// machines without rdma-core (it then offers the socket transport). Only libibverbs' headers are
// needed at build time. NEVER RUN ON A NIC: no machine of the project has one.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace epx::plugin::verbs {

struct VerbsApi {
  // Member names differ from the libibverbs names on purpose: verbs.h defines ibv_reg_mr and
  // ibv_query_port as function-like macros.
  ibv_device** (*getDeviceList)(int*) = nullptr;
  void (*freeDeviceList)(ibv_device**) = nullptr;
  const char* (*getDeviceName)(ibv_device*) = nullptr;
  ibv_context* (*openDevice)(ibv_device*) = nullptr;
  int (*closeDevice)(ibv_context*) = nullptr;
  int (*queryDevice)(ibv_context*, ibv_device_attr*) = nullptr;
  int (*queryPort)(ibv_context*, uint8_t, ibv_port_attr*) = nullptr;
  int (*queryGid)(ibv_context*, uint8_t, int, ibv_gid*) = nullptr;
  ibv_pd* (*allocPd)(ibv_context*) = nullptr;
  int (*deallocPd)(ibv_pd*) = nullptr;
  ibv_cq* (*createCq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroyCq)(ibv_cq*) = nullptr;
  ibv_qp* (*createQp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*modifyQp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  int (*destroyQp)(ibv_qp*) = nullptr;
  ibv_mr* (*regMr)(ibv_pd*, void*, size_t, int) = nullptr;
  ibv_mr* (*regDmabufMr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int) = nullptr;  // optional (rdma-core >= 34)
  int (*deregMr)(ibv_mr*) = nullptr;
};

// Loads libibverbs.so.1 once (EPX_IBVERBS_LIBRARY overrides the name); null with *why filled when
// it is absent or lacks an entry point.
const VerbsApi* verbsApi(std::string* why);

// Tests: every later verbsApi() returns `api` (a fake device, tests/plugin/fake_verbs.h) instead
// of loading libibverbs. Call before the transport's init.
void setVerbsApiForTesting(const VerbsApi* api);

}  // namespace epx::plugin::verbs
