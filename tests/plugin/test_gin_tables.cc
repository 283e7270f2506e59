// The GIN tables libnccl-net-epx.so exports: v11 (NCCL 2.28), v13 and v14 (NCCL 2.30, 2.32), all
// thin adapters over the one backend (gin/backend.h). No GPU needed: init declines without a CUDA
// driver, and the checks that need an initialized backend run only where it succeeds.
#define BOOST_TEST_MODULE plugin_gin_tables
#include <boost/test/unit_test.hpp>

#include <dlfcn.h>

#include <cstring>
#include <string>

#include "gin_abi.h"
#include "net_harness.h"

namespace {
const ncclGin_v11_t* v11() { return epx::test::pluginSymbol<ncclGin_v11_t>("ncclGinPlugin_v11"); }
const ncclGin_v13_t* v13() { return epx::test::pluginSymbol<ncclGin_v13_t>("ncclGinPlugin_v13"); }
const ncclGin_v14_t* v14() { return epx::test::pluginSymbol<ncclGin_v14_t>("ncclGinPlugin_v14"); }
}  // namespace

BOOST_AUTO_TEST_CASE(every_gin_version_is_exported) {
  BOOST_TEST_REQUIRE(v11() != nullptr);
  BOOST_TEST_REQUIRE(v13() != nullptr);
  BOOST_TEST_REQUIRE(v14() != nullptr);
  BOOST_TEST(std::string(v13()->name) == "EPX");
  BOOST_TEST(std::string(v14()->name) == "EPX");
  // No RMA table of its own: NCCL's RMA v13 loader takes ncclGinPlugin_v13 (docs/plugins.md).
  void* lib = epx::test::openPlugin();
  BOOST_TEST_REQUIRE(lib != nullptr);
  for (const char* rma : {"ncclRmaPlugin_v13", "ncclRmaPlugin_v14", "ncclRmaPlugin_v15", "ncclRmaPlugin_v16"})
    BOOST_TEST(dlsym(lib, rma) == nullptr, rma);
}

BOOST_AUTO_TEST_CASE(v13_table_is_well_formed) {
  const ncclGin_v13_t* g = v13();
  BOOST_TEST_REQUIRE(g != nullptr);
  // NCCL calls these unconditionally (GIN loader, and the RMA v13 loader that reuses this table).
  BOOST_TEST(g->init != nullptr);
  BOOST_TEST(g->devices != nullptr);
  BOOST_TEST(g->getProperties != nullptr);
  BOOST_TEST(g->listen != nullptr);
  BOOST_TEST(g->connect != nullptr);
  BOOST_TEST(g->createContext != nullptr);
  BOOST_TEST(g->regMrSym != nullptr);
  BOOST_TEST(g->regMrSymDmaBuf != nullptr);
  BOOST_TEST(g->deregMrSym != nullptr);
  BOOST_TEST(g->destroyContext != nullptr);
  BOOST_TEST(g->closeColl != nullptr);
  BOOST_TEST(g->closeListen != nullptr);
  BOOST_TEST(g->iput != nullptr);
  BOOST_TEST(g->iputSignal != nullptr);
  BOOST_TEST(g->test != nullptr);
  BOOST_TEST(g->ginProgress != nullptr);
  BOOST_TEST(g->finalize != nullptr);
  // One-sided get and the flush after it (NCCL 2.30+ device get through NCCL's proxy).
  BOOST_TEST(g->iget != nullptr);
  BOOST_TEST(g->iflush != nullptr);
  // Optional, checked by NCCL before use: not offered.
  BOOST_TEST(g->queryLastError == nullptr);
  BOOST_TEST(g->finalize(nullptr) == ncclSuccess);
}

BOOST_AUTO_TEST_CASE(v14_table_is_well_formed) {
  const ncclGin_v14_t* g = v14();
  BOOST_TEST_REQUIRE(g != nullptr);
  BOOST_TEST(g->init != nullptr);
  BOOST_TEST(g->devices != nullptr);
  BOOST_TEST(g->getGinProperties != nullptr);
  BOOST_TEST(g->getProperties != nullptr);
  BOOST_TEST(g->listen != nullptr);
  BOOST_TEST(g->connect != nullptr);
  BOOST_TEST(g->createContext != nullptr);
  BOOST_TEST(g->regMrSym != nullptr);
  BOOST_TEST(g->regMrSymDmaBuf != nullptr);
  BOOST_TEST(g->deregMrSym != nullptr);
  BOOST_TEST(g->destroyContext != nullptr);
  BOOST_TEST(g->closeColl != nullptr);
  BOOST_TEST(g->closeListen != nullptr);
  BOOST_TEST(g->ginProgress != nullptr);
  BOOST_TEST(g->finalize != nullptr);
  ncclGinProperties_v14_t props;
  std::memset(&props, 0, sizeof(props));
  BOOST_TEST_REQUIRE(g->getGinProperties(&props) == ncclSuccess);
  BOOST_TEST(props.supportsStrongSignals);
  BOOST_TEST(props.supportsVASignals);
  BOOST_TEST(g->getGinProperties(nullptr) == ncclInvalidArgument);
  BOOST_TEST(g->finalize(nullptr) == ncclSuccess);
}

// Thin adapters: the calls whose signature did not change are the backend's own functions in every
// table, so there is one backend and no copy of it.
BOOST_AUTO_TEST_CASE(the_tables_share_one_backend) {
  const ncclGin_v11_t* a = v11();
  const ncclGin_v13_t* b = v13();
  const ncclGin_v14_t* c = v14();
  BOOST_TEST_REQUIRE((a && b && c));
  BOOST_TEST((b->devices == a->devices && c->devices == a->devices));
  BOOST_TEST((b->listen == a->listen && c->listen == a->listen));
  BOOST_TEST((b->deregMrSym == a->deregMrSym && c->deregMrSym == a->deregMrSym));
  BOOST_TEST((b->closeColl == a->closeColl && c->closeColl == a->closeColl));
  BOOST_TEST((b->closeListen == a->closeListen && c->closeListen == a->closeListen));
  BOOST_TEST(b->test == a->test);
  BOOST_TEST((b->ginProgress == a->ginProgress && c->ginProgress == a->ginProgress));
}

// v13/v14 createContext: the GIN context is the connection itself, with a proxy device handle.
BOOST_AUTO_TEST_CASE(create_context_returns_the_connection) {
  const ncclGin_v13_t* g = v13();
  BOOST_TEST_REQUIRE(g != nullptr);
  int fakeCollComm = 0;
  void* ctx = nullptr;
  ncclNetDeviceHandle_v11_t* dev = nullptr;
  ncclGinConfig_v13_t cfg13 = {};
  cfg13.nContexts = 4;
  BOOST_TEST_REQUIRE(g->createContext(&fakeCollComm, &cfg13, &ctx, &dev) == ncclSuccess);
  BOOST_TEST(ctx == static_cast<void*>(&fakeCollComm));
  BOOST_TEST_REQUIRE(dev != nullptr);
  BOOST_TEST(dev->netDeviceType == NCCL_NET_DEVICE_GIN_PROXY);
  BOOST_TEST(dev->needsProxyProgress == 1);
  BOOST_TEST(g->destroyContext(ctx) == ncclSuccess);
  BOOST_TEST(g->createContext(nullptr, &cfg13, &ctx, &dev) == ncclInvalidArgument);
  // NCCL's RMA v13 loader passes its own devHandle pointer and ignores it; v14 likewise.
  const ncclGin_v14_t* h = v14();
  ncclGinConfig_v14_t cfg14 = {};
  void* ctx14 = nullptr;
  BOOST_TEST_REQUIRE(h->createContext(&fakeCollComm, &cfg14, &ctx14, &dev) == ncclSuccess);
  BOOST_TEST(ctx14 == static_cast<void*>(&fakeCollComm));
}

// v12 properties carry the backend's v11 ones; NCCL's RMA v13 loader insists on the proxy type.
BOOST_AUTO_TEST_CASE(v12_properties_match_the_backend) {
  const ncclGin_v11_t* a = v11();
  const ncclGin_v13_t* b = v13();
  BOOST_TEST_REQUIRE((a && b));
  void* ctx = nullptr;
  ncclResult_t r = b->init(&ctx, 1, epx::test::captureLog);
  if (r != ncclSuccess) {
    BOOST_TEST_MESSAGE("no CUDA driver here: GIN init declined (" << r << "), as it must without a GPU");
    BOOST_TEST(ctx == nullptr);
    return;
  }
  ncclNetProperties_v11_t p11;
  ncclNetProperties_v12_t p12;
  BOOST_TEST_REQUIRE(a->getProperties(0, &p11) == ncclSuccess);
  BOOST_TEST_REQUIRE(b->getProperties(0, &p12) == ncclSuccess);
  BOOST_TEST(p12.netDeviceType == NCCL_NET_DEVICE_GIN_PROXY);
  BOOST_TEST(p12.netDeviceType == p11.netDeviceType);
  BOOST_TEST(p12.ptrSupport == p11.ptrSupport);
  BOOST_TEST(p12.maxRecvs == p11.maxRecvs);
  BOOST_TEST(p12.speed == p11.speed);
  BOOST_TEST(p12.maxComms == p11.maxComms);
  BOOST_TEST(p12.vProps.ndevs == p11.vProps.ndevs);
  BOOST_TEST(p12.railId == NCCL_NET_ID_UNDEF);
  BOOST_TEST(p12.planeId == NCCL_NET_ID_UNDEF);
}
