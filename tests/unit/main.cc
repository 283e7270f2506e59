// Boost.Test entry point of the CPU unit tests (epx_unit_tests).
#define BOOST_TEST_MODULE epx_unit_tests
#include <boost/test/unit_test.hpp>
