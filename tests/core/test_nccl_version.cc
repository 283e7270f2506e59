// Which NCCL runtimes can run a build (core/nccl_version.h): a table of header version x runtime
// version -> accept, or refuse with a message naming both versions and what to do.
#include <boost/test/unit_test.hpp>

#include <string>

#include "core/nccl_version.h"

using namespace epx;

namespace {
constexpr unsigned kMagic = 0xcafebeef;  // NCCL_API_MAGIC of NCCL 2.30+

struct Row {
  int headers, runtime;
  bool accept;
  const char* says;  // a phrase the refusal contains
};

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

BOOST_AUTO_TEST_SUITE(nccl_version)

BOOST_AUTO_TEST_CASE(gin_get_needs_2_30_3) {
  const std::string why = ginGetUnsupported(22809, "ncclEpSomething");
  BOOST_TEST(has(why, "ncclEpSomething"));
  BOOST_TEST(has(why, "2.30.3"));
  BOOST_TEST(has(why, "built against NCCL 2.28.9"));
  BOOST_TEST(has(why, "EPX_NCCL_HOME"));
  BOOST_TEST(!ginGetUnsupported(23002, "x").empty());  // 2.30.2 had no get yet
  BOOST_TEST(ginGetUnsupported(23003, "x").empty());
  BOOST_TEST(ginGetUnsupported(23007, "x").empty());
  BOOST_TEST(ginGetUnsupported(23203, "x").empty());
}

BOOST_AUTO_TEST_CASE(version_strings) {
  BOOST_TEST(ncclVersionString(22809) == "2.28.9");
  BOOST_TEST(ncclVersionString(23007) == "2.30.7");
  BOOST_TEST(ncclVersionString(23203) == "2.32.3");
  BOOST_TEST(ncclVersionString(2804) == "2.8.4");  // the encoding before 2.9
}

BOOST_AUTO_TEST_CASE(versions_epx_builds_against) {
  BOOST_TEST(ncclVersionSupportedForBuild(22809));
  BOOST_TEST(ncclVersionSupportedForBuild(23000));
  BOOST_TEST(ncclVersionSupportedForBuild(23007));
  BOOST_TEST(ncclVersionSupportedForBuild(23203));
  BOOST_TEST(ncclVersionSupportedForBuild(29999));
  BOOST_TEST(!ncclVersionSupportedForBuild(22803));  // another ncclDevComm, no GIN
  BOOST_TEST(!ncclVersionSupportedForBuild(22907));  // 2.29: not supported by epx's host code
  BOOST_TEST(!ncclVersionSupportedForBuild(30000));  // an unknown major version
  BOOST_TEST(!ncclVersionSupportedForBuild(2804));
}

BOOST_AUTO_TEST_CASE(runtime_table) {
  const Row rows[] = {
      // 2.28.9 headers: exactly 2.28.9.
      {22809, 22809, true, ""},
      {22809, 22803, false, "only the 2.28.9 library"},
      {22809, 22907, false, "only the 2.28.9 library"},
      {22809, 23007, false, "rebuild epx against NCCL 2.30.7's headers"},
      {22809, 23203, false, "rebuild epx against NCCL 2.32.3's headers"},
      // 2.30.7 headers: 2.30.7 and every newer 2.x.
      {23007, 23007, true, ""},
      {23007, 23009, true, ""},
      {23007, 23203, true, ""},
      {23007, 29900, true, ""},
      {23007, 23004, false, "is older than the NCCL 2.30.7 headers"},
      {23007, 22907, false, "is older than the NCCL 2.30.7 headers"},
      {23007, 22809, false, "rebuild epx against NCCL 2.28.9's headers"},
      {23007, 30000, false, "another major version"},
      // 2.32.3 headers: not 2.30.7.
      {23203, 23203, true, ""},
      {23203, 23300, true, ""},
      {23203, 23007, false, "Load NCCL 2.32.3 or newer"},
      {23203, 22809, false, "is older than the NCCL 2.32.3 headers"},
      // Headers epx does not build against.
      {22803, 22803, false, "which it does not support"},
      {22907, 23007, false, "which it does not support"},
  };
  for (const Row& row : rows) {
    const std::string m = checkNcclVersion(row.runtime, row.headers);
    BOOST_TEST_CONTEXT("headers " << row.headers << ", runtime " << row.runtime << ": " << m) {
      BOOST_TEST(m.empty() == row.accept);
      if (!row.accept) {
        BOOST_TEST(has(m, row.says));
        BOOST_TEST(has(m, ncclVersionString(row.headers)));  // both versions are named
        BOOST_TEST(has(m, ncclVersionString(row.runtime)));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(refusals_say_what_to_do) {
  // A runtime epx can be built against: load the headers' version, or rebuild for the runtime.
  const std::string older = checkNcclVersion(23007, 23203);
  BOOST_TEST(has(older, "LD_LIBRARY_PATH"));
  BOOST_TEST(has(older, "EPX_NCCL_HOME"));
  // A runtime epx cannot be built against (2.29): no advice to rebuild against it.
  const std::string v229 = checkNcclVersion(22907, 22809);
  BOOST_TEST(!has(v229, "against NCCL 2.29.7's headers"));
  BOOST_TEST(has(v229, "2.28.9, or 2.30.0 and newer"));
}

BOOST_AUTO_TEST_CASE(device_communicator_abi) {
  // 2.28.9 headers: no magic or version in ncclDevComm, nothing to check.
  BOOST_TEST(checkDevCommAbi(0, 0, kMagic, 22809) == "");
  // 2.30+ headers: the runtime must fill the headers' layout (magic, and the headers' version).
  BOOST_TEST(checkDevCommAbi(kMagic, 23007, kMagic, 23007) == "");
  const std::string noMagic = checkDevCommAbi(0, 23007, kMagic, 23007);
  BOOST_TEST(has(noMagic, "ABI magic"));
  BOOST_TEST(has(noMagic, "2.30.7"));
  const std::string other = checkDevCommAbi(kMagic, 23203, kMagic, 23007);
  BOOST_TEST(has(other, "ABI version 2.32.3"));
  BOOST_TEST(has(other, "2.30.7"));
}

BOOST_AUTO_TEST_SUITE_END()
