# Every dependency comes from the system (Debian's -dev packages, or the CUDA
# toolkit); nothing is downloaded at build time. scripts/install_deps.sh
# installs them.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)
# cpp-httplib: Debian ships it as a library with a pkg-config file; some
# machines have only the header. The server is built when either is found.
pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)
if(NOT HTTPLIB_FOUND)
  find_path(HTTPLIB_INCLUDE_DIR httplib.h)
endif()
if(QSERVE_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(QSERVE_BUILD_BENCH)
  find_package(benchmark QUIET)
endif()
