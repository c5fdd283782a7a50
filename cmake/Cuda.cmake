# Decides whether the CUDA backend is built (SRU_CUDA = AUTO | ON | OFF) and sets it up:
# sets SRU_HAVE_CUDA and, when on, the targets CUDA::cudart, CUDA::cublas and sru_cudnn.
set(SRU_HAVE_CUDA OFF)
if(NOT SRU_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(SRU_NVCC nvcc PATHS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
    if(SRU_NVCC)
      set(CMAKE_CUDA_COMPILER ${SRU_NVCC})
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SRU_HAVE_CUDA ON)
  elseif(SRU_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SRU_CUDA=ON but no working nvcc was found (looked in PATH and /usr/local/cuda/bin)")
  else()
    message(STATUS "CUDA: nvcc not found, building the CPU backend only (SRU_CUDA=AUTO)")
  endif()
endif()

if(SRU_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    # Machine code for V100 (70), T4 (75), A100 (80), A10 / RTX 30 (86), L4 / RTX 40 (89) and H100 (90),
    # each that this nvcc can still build (`nvcc --list-gpu-arch`; CUDA 13 dropped 70), and PTX of the
    # newest on top, which the driver compiles for later GPUs. cuda_arch.h says which device runs what.
    execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch OUTPUT_VARIABLE SRU_NVCC_ARCHS
                    RESULT_VARIABLE SRU_NVCC_ARCHS_RC ERROR_QUIET)
    set(SRU_CUDA_DEFAULT_ARCHS 70 75 80 86 89 90)
    set(CMAKE_CUDA_ARCHITECTURES "")
    set(SRU_CUDA_ARCHS_DROPPED "")
    foreach(arch ${SRU_CUDA_DEFAULT_ARCHS})
      if(SRU_NVCC_ARCHS_RC EQUAL 0 AND NOT SRU_NVCC_ARCHS MATCHES "compute_${arch}")
        list(APPEND SRU_CUDA_ARCHS_DROPPED ${arch})
      else()
        list(APPEND CMAKE_CUDA_ARCHITECTURES ${arch}-real)
      endif()
    endforeach()
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      list(JOIN SRU_CUDA_DEFAULT_ARCHS " " SRU_CUDA_DEFAULT_ARCHS_TEXT)
      message(FATAL_ERROR "CUDA: ${CMAKE_CUDA_COMPILER} builds none of the architectures ${SRU_CUDA_DEFAULT_ARCHS_TEXT} "
                          "(nvcc --list-gpu-arch); set -DCMAKE_CUDA_ARCHITECTURES=... or configure with -DSRU_CUDA=OFF")
    endif()
    list(POP_BACK CMAKE_CUDA_ARCHITECTURES SRU_CUDA_NEWEST)
    string(REPLACE "-real" "" SRU_CUDA_NEWEST ${SRU_CUDA_NEWEST})
    list(APPEND CMAKE_CUDA_ARCHITECTURES ${SRU_CUDA_NEWEST})  # machine code and PTX
    if(SRU_CUDA_ARCHS_DROPPED)
      message(STATUS "CUDA: this nvcc cannot build for ${SRU_CUDA_ARCHS_DROPPED} (not in nvcc --list-gpu-arch): "
                     "left out; a CUDA 12 toolkit builds them")
    endif()
  endif()
  enable_language(CUDA)
  # Recorded in the binary for --device-info and the device check (core/cuda_arch.h), as enable_language
  # settled it (the list above, -DCMAKE_CUDA_ARCHITECTURES, or the CUDAARCHS environment variable).
  string(REPLACE ";" " " SRU_CUDA_ARCHITECTURES_TEXT "${CMAKE_CUDA_ARCHITECTURES}")
  # CMake 3.25 has no C++20 dialect table for nvcc 13 (which supports it): teach it the flags.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  # cuDNN: beside the toolkit, or where CUDNN_ROOT (CMake or environment variable) points, e.g. a pip
  # wheel's nvidia/cudnn folder, which ships only the versioned libcudnn.so.9.
  find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
               HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib64 lib REQUIRED)
  find_path(CUDNN_INCLUDE_DIR NAMES cudnn.h
            HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include REQUIRED)
  add_library(sru_cudnn INTERFACE)
  target_link_libraries(sru_cudnn INTERFACE ${CUDNN_LIBRARY})
  target_include_directories(sru_cudnn SYSTEM INTERFACE ${CUDNN_INCLUDE_DIR})
  message(STATUS "CUDA: ${CMAKE_CUDA_COMPILER} (${CMAKE_CUDA_COMPILER_VERSION}), archs ${CMAKE_CUDA_ARCHITECTURES}, cuDNN ${CUDNN_LIBRARY}")
endif()
