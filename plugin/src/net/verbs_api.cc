// NEVER RUN ON A NIC (see verbs_api.h); the loader itself runs in the CPU tests (no device found).
#include "net/verbs_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace epx::plugin::verbs {

namespace {

template <typename F>
bool load(void* lib, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (!*out && missing) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

}  // namespace

namespace {
const VerbsApi* gTestApi = nullptr;
}  // namespace

void setVerbsApiForTesting(const VerbsApi* api) { gTestApi = api; }

const VerbsApi* verbsApi(std::string* why) {
  if (gTestApi) return gTestApi;
  static std::once_flag once;
  static VerbsApi api;
  static const VerbsApi* loaded = nullptr;
  static std::string error;
  std::call_once(once, [] {
    const char* name = std::getenv("EPX_IBVERBS_LIBRARY");
    if (!name || !*name) name = "libibverbs.so.1";
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      error = std::string("cannot load ") + name + ": " + (e ? e : "unknown error");
      return;
    }
    std::string missing;
    load(lib, "ibv_get_device_list", &api.getDeviceList, &missing);
    load(lib, "ibv_free_device_list", &api.freeDeviceList, &missing);
    load(lib, "ibv_get_device_name", &api.getDeviceName, &missing);
    load(lib, "ibv_open_device", &api.openDevice, &missing);
    load(lib, "ibv_close_device", &api.closeDevice, &missing);
    load(lib, "ibv_query_device", &api.queryDevice, &missing);
    load(lib, "ibv_query_port", &api.queryPort, &missing);
    load(lib, "ibv_query_gid", &api.queryGid, &missing);
    load(lib, "ibv_alloc_pd", &api.allocPd, &missing);
    load(lib, "ibv_dealloc_pd", &api.deallocPd, &missing);
    load(lib, "ibv_create_cq", &api.createCq, &missing);
    load(lib, "ibv_destroy_cq", &api.destroyCq, &missing);
    load(lib, "ibv_create_qp", &api.createQp, &missing);
    load(lib, "ibv_modify_qp", &api.modifyQp, &missing);
    load(lib, "ibv_destroy_qp", &api.destroyQp, &missing);
    load(lib, "ibv_reg_mr", &api.regMr, &missing);
    load(lib, "ibv_dereg_mr", &api.deregMr, &missing);
    load(lib, "ibv_reg_dmabuf_mr", &api.regDmabufMr, static_cast<std::string*>(nullptr));
    if (!missing.empty()) {
      error = std::string(name) + " lacks " + missing;
      dlclose(lib);
      return;
    }
    loaded = &api;
  });
  if (!loaded && why) *why = error;
  return loaded;
}

}  // namespace epx::plugin::verbs
