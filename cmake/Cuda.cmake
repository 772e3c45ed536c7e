# The CUDA backend: sm_80 (Ampere, mma.sync paths) and sm_90a (Hopper: wgmma,
# TMA, setmaxnreg need the "a" target).
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80-real 90a-real)
endif()
enable_language(CUDA)
# CMake 3.25 does not know nvcc 13's C++20 flag ("requires the language
# dialect CUDA20"): tell it.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION OR CMAKE_CUDA20_STANDARD_COMPILE_OPTION STREQUAL "")
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)
# -Xptxas -v prints registers / spills / shared memory per kernel: read it
# before spending device time.
set(QSERVE_CUDA_FLAGS --expt-relaxed-constexpr -lineinfo)
if(QSERVE_PTXAS_VERBOSE)
  list(APPEND QSERVE_CUDA_FLAGS -Xptxas=-v)
endif()
