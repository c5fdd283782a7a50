# Finds the Debian-packaged dependencies (scripts/setup.sh installs them) and defines imported targets.
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Threads REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(ZLIB REQUIRED)  # reading enwik8.zip as distributed
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)

# OpenBLAS in its OpenMP build, so BLAS and our elementwise kernels share one thread pool.
find_library(OPENBLAS_LIBRARY NAMES openblas
  PATH_SUFFIXES openblas-openmp x86_64-linux-gnu/openblas-openmp REQUIRED)
find_path(OPENBLAS_INCLUDE_DIR NAMES cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-openmp
  PATH_SUFFIXES x86_64-linux-gnu/openblas-openmp openblas-openmp openblas REQUIRED)
add_library(sru_openblas INTERFACE)
target_link_libraries(sru_openblas INTERFACE ${OPENBLAS_LIBRARY})
target_include_directories(sru_openblas SYSTEM INTERFACE ${OPENBLAS_INCLUDE_DIR})
message(STATUS "OpenBLAS: ${OPENBLAS_LIBRARY} (headers ${OPENBLAS_INCLUDE_DIR})")

if(SRU_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
