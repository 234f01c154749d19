# CMake generated Testfile for 
# Source directory: /work/main/tests/linearizability
# Build directory: /work/main/tests/linearizability
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test([=[linearizability_checker_test]=] "/usr/local/go/bin/go" "test" "-count=1" "./...")
set_tests_properties([=[linearizability_checker_test]=] PROPERTIES  ENVIRONMENT "GOFLAGS=-mod=readonly" LABELS "unit;nosanitize" TIMEOUT "300" WORKING_DIRECTORY "/work/main/tests/linearizability" _BACKTRACE_TRIPLES "/work/main/tests/linearizability/CMakeLists.txt;8;add_test;/work/main/tests/linearizability/CMakeLists.txt;0;")
add_test([=[linearizability_workload_test]=] "/work/main/tests/linearizability/linearizability_workload_test" "--gtest_color=no")
set_tests_properties([=[linearizability_workload_test]=] PROPERTIES  COST "600" ENVIRONMENT "ASAN_OPTIONS=halt_on_error=1:detect_leaks=1;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1;DLOCK_LIN_LONG=1" LABELS "integration;nosanitize;long" TIMEOUT "1800" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;35;add_test;/work/main/tests/linearizability/CMakeLists.txt;29;dlock_add_test;/work/main/tests/linearizability/CMakeLists.txt;0;")
add_test([=[linearizability_faults_sqlite]=] "/work/main/tests/linearizability/linearizability_workload_test" "--gtest_color=no" "--gtest_filter=*EveryPrimitiveIsLinearizableUnderFaults/sqlite")
set_tests_properties([=[linearizability_faults_sqlite]=] PROPERTIES  COST "20" LABELS "integration;nosanitize" TIMEOUT "180" _BACKTRACE_TRIPLES "/work/main/tests/linearizability/CMakeLists.txt;43;add_test;/work/main/tests/linearizability/CMakeLists.txt;0;")
add_test([=[linearizability_faults_pg]=] "/work/main/tests/linearizability/linearizability_workload_test" "--gtest_color=no" "--gtest_filter=*EveryPrimitiveIsLinearizableUnderFaults/pg")
set_tests_properties([=[linearizability_faults_pg]=] PROPERTIES  COST "20" LABELS "integration;nosanitize" TIMEOUT "180" _BACKTRACE_TRIPLES "/work/main/tests/linearizability/CMakeLists.txt;43;add_test;/work/main/tests/linearizability/CMakeLists.txt;0;")
add_test([=[linearizability_faults_etcd]=] "/work/main/tests/linearizability/linearizability_workload_test" "--gtest_color=no" "--gtest_filter=*EveryPrimitiveIsLinearizableUnderFaults/etcd")
set_tests_properties([=[linearizability_faults_etcd]=] PROPERTIES  COST "20" LABELS "integration;nosanitize" TIMEOUT "180" _BACKTRACE_TRIPLES "/work/main/tests/linearizability/CMakeLists.txt;43;add_test;/work/main/tests/linearizability/CMakeLists.txt;0;")
