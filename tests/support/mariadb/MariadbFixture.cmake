# A CTest fixture named `mariadb`: a throwaway MariaDB 10.11 started before the tests that need
# it and stopped after them (tests/support/mariadb/mariadb_fixture.sh; as root it runs the server
# as the mysql user through runuser).
#
# Tests that need it read the connection string from the file named by the environment variable
# WEIR_TEST_MARIADB_CONN_FILE. Attach them with
#
#   weir_mariadb_test(my_test)                    # a test made with add_test
#   gtest_discover_tests(my_tests TEST_FILTER "*Mariadb*"
#                        PROPERTIES ${WEIR_MARIADB_TEST_PROPERTIES} LABELS mariadb)
#
# Include it from any CMakeLists.txt; it defines its tests once.
set(WEIR_MARIADB_FIXTURE_DIR ${CMAKE_BINARY_DIR}/mariadb-fixture)
set(WEIR_MARIADB_CONN_FILE ${WEIR_MARIADB_FIXTURE_DIR}/conn)
# The tests share the server's one binlog, and some read back exactly what they wrote to it: they
# run one at a time (RESOURCE_LOCK), the other tests beside them.
set(WEIR_MARIADB_TEST_PROPERTIES
  FIXTURES_REQUIRED mariadb
  RESOURCE_LOCK mariadb_binlog
  ENVIRONMENT WEIR_TEST_MARIADB_CONN_FILE=${WEIR_MARIADB_CONN_FILE})
# The variables above are per directory; the tests below are defined once.
include_guard(GLOBAL)

add_test(NAME mariadb_fixture_start
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/mariadb_fixture.sh start ${WEIR_MARIADB_FIXTURE_DIR})
set_tests_properties(mariadb_fixture_start PROPERTIES FIXTURES_SETUP mariadb LABELS mariadb
  TIMEOUT 180)
add_test(NAME mariadb_fixture_stop
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/mariadb_fixture.sh stop ${WEIR_MARIADB_FIXTURE_DIR})
set_tests_properties(mariadb_fixture_stop PROPERTIES FIXTURES_CLEANUP mariadb LABELS mariadb
  TIMEOUT 120)

# Makes the add_test test `name` use the fixture.
function(weir_mariadb_test name)
  set_property(TEST ${name} APPEND PROPERTY FIXTURES_REQUIRED mariadb)
  set_property(TEST ${name} APPEND PROPERTY RESOURCE_LOCK mariadb_binlog)
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT
    WEIR_TEST_MARIADB_CONN_FILE=${WEIR_MARIADB_CONN_FILE})
  set_property(TEST ${name} APPEND PROPERTY LABELS mariadb)
endfunction()
