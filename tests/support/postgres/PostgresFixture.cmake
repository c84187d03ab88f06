# A CTest fixture named `postgres`: a throwaway PostgreSQL 15 started before the tests that need
# it and stopped after them (tests/support/postgres/postgres_fixture.sh; as root it runs the server
# as the postgres user through runuser).
#
# Tests that need it read the connection URL from the file named by the environment variable
# WEIR_TEST_POSTGRES_URL_FILE. Attach them with
#
#   weir_postgres_test(my_test)                    # a test made with add_test
#   gtest_discover_tests(my_tests TEST_FILTER "*Postgres*"
#                        PROPERTIES ${WEIR_POSTGRES_TEST_PROPERTIES} LABELS postgres)
#
# Include it from any CMakeLists.txt; it defines its tests once.
set(WEIR_POSTGRES_FIXTURE_DIR ${CMAKE_BINARY_DIR}/postgres-fixture)
set(WEIR_POSTGRES_URL_FILE ${WEIR_POSTGRES_FIXTURE_DIR}/url)
set(WEIR_POSTGRES_TEST_PROPERTIES
  FIXTURES_REQUIRED postgres
  ENVIRONMENT WEIR_TEST_POSTGRES_URL_FILE=${WEIR_POSTGRES_URL_FILE})
# The variables above are per directory; the tests below are defined once.
include_guard(GLOBAL)

add_test(NAME postgres_fixture_start
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/postgres_fixture.sh start ${WEIR_POSTGRES_FIXTURE_DIR})
set_tests_properties(postgres_fixture_start PROPERTIES FIXTURES_SETUP postgres LABELS postgres
  TIMEOUT 180)
add_test(NAME postgres_fixture_stop
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/postgres_fixture.sh stop ${WEIR_POSTGRES_FIXTURE_DIR})
set_tests_properties(postgres_fixture_stop PROPERTIES FIXTURES_CLEANUP postgres LABELS postgres
  TIMEOUT 120)

# Makes the add_test test `name` use the fixture.
function(weir_postgres_test name)
  set_property(TEST ${name} APPEND PROPERTY FIXTURES_REQUIRED postgres)
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT
    WEIR_TEST_POSTGRES_URL_FILE=${WEIR_POSTGRES_URL_FILE})
  set_property(TEST ${name} APPEND PROPERTY LABELS postgres)
endfunction()
