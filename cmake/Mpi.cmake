# Decides whether data-parallel training across processes is built (SRU_MPI = AUTO | ON | OFF) and,
# on top of it and CUDA, the NCCL all-reduce for GPUs (SRU_NCCL = AUTO | ON | OFF). Sets SRU_HAVE_MPI
# (target MPI::MPI_C, MPIEXEC_EXECUTABLE for the tests) and SRU_HAVE_NCCL (target sru_nccl). Without
# MPI the library uses its single-process communicator: world size 1, every all-reduce the identity.
set(SRU_HAVE_MPI OFF)
if(NOT SRU_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(SRU_HAVE_MPI ON)
    message(STATUS "MPI: ${MPI_C_LIBRARIES} (MPI ${MPI_C_VERSION}); launcher ${MPIEXEC_EXECUTABLE}")
  elseif(SRU_MPI STREQUAL "ON")
    message(FATAL_ERROR "SRU_MPI=ON but no MPI was found (Debian: libopenmpi-dev openmpi-bin)")
  else()
    message(STATUS "MPI: not found, data-parallel training is single-process only (SRU_MPI=AUTO)")
  endif()
endif()

# NCCL ships with the CUDA toolkit here (/usr/local/cuda: nccl.h, libnccl.so); its unique id travels
# over MPI, so it needs both.
set(SRU_HAVE_NCCL OFF)
if(NOT SRU_NCCL STREQUAL "OFF" AND SRU_HAVE_CUDA AND SRU_HAVE_MPI)
  find_path(NCCL_INCLUDE_DIR NAMES nccl.h HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
               ${CUDAToolkit_LIBRARY_ROOT} PATH_SUFFIXES lib64 lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(SRU_HAVE_NCCL ON)
    add_library(sru_nccl INTERFACE)
    target_link_libraries(sru_nccl INTERFACE ${NCCL_LIBRARY})
    target_include_directories(sru_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
    message(STATUS "NCCL: ${NCCL_LIBRARY}")
  else()
    message(STATUS "NCCL: not found, CUDA gradients are summed through host memory over MPI")
  endif()
endif()
if(SRU_NCCL STREQUAL "ON" AND NOT SRU_HAVE_NCCL)
  message(FATAL_ERROR "SRU_NCCL=ON but NCCL is not usable (it needs CUDA, MPI and nccl.h / libnccl.so)")
endif()
