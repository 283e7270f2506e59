#define BOOST_TEST_MODULE epx_topology
#include <boost/test/unit_test.hpp>
