# The client side: the library engines link, its two dependencies and the
# Python module. It needs a C++20 compiler, threads and OpenSSL's libcrypto
# only (TIERKV_CLIENT_ONLY builds just this, on hosts without the manager's
# libraries: scripts/gpu-check.sh).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

add_library(tierkv_common STATIC
  src/common/status.cc src/common/types.cc src/common/units.cc src/common/clock.cc src/common/scheduler.cc src/common/work_queue.cc src/common/metric_sink.cc
  src/common/prefault.cc src/common/shared_memory.cc src/common/memory_piece.cc src/common/tracer.cc)
tierkv_box(tierkv_common common)
include(GNUInstallDirs)
target_include_directories(tierkv_common PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

add_library(tierkv_protocol STATIC
  src/protocol/frame.cc src/protocol/messages.cc src/protocol/socket_io.cc)
tierkv_box(tierkv_protocol protocol)
target_link_libraries(tierkv_protocol PUBLIC tierkv_common)

# GPUs (docs/hbm.md): the Device seam, its host-memory fake, and the CUDA
# driver loaded at run time (the client copies to and from GPU memory with
# it, the manager keeps its HBM tier with it). Only the toolkit's headers are
# used at build time (found under /usr/local/cuda or $CUDA_HOME); nothing of
# CUDA is linked.
find_path(TIERKV_CUDA_INCLUDE cuda.h HINTS ENV CUDA_HOME PATHS /usr/local/cuda
          PATH_SUFFIXES include)
add_library(tierkv_device STATIC src/device/host_device.cc src/device/cuda_device.cc)
tierkv_box(tierkv_device device)
target_link_libraries(tierkv_device PUBLIC tierkv_common PRIVATE ${CMAKE_DL_LIBS})
if(TIERKV_CUDA_INCLUDE)
  target_compile_definitions(tierkv_device PRIVATE TIERKV_WITH_CUDA)
  target_include_directories(tierkv_device SYSTEM PRIVATE ${TIERKV_CUDA_INCLUDE})
  message(STATUS "CUDA driver support: on (${TIERKV_CUDA_INCLUDE}/cuda.h)")
else()
  message(STATUS "CUDA driver support: off (no cuda.h)")
endif()

add_library(tierkv_client STATIC src/client/connection.cc src/client/client.cc
  src/client/client_get.cc src/client/client_registered.cc
  src/client/client_pin.cc
  src/client/client_device.cc
  src/client/namespace.cc)
tierkv_box(tierkv_client client)
target_link_libraries(tierkv_client PUBLIC tierkv_protocol Threads::Threads
  PRIVATE tierkv_device OpenSSL::Crypto)
# The public headers need C++20 (std::span): the requirement travels with the
# installed tierkv::client, so a consumer that sets no standard still builds.
target_compile_features(tierkv_client PUBLIC cxx_std_20)
# cmake --install: the public headers, the client library (with the three
# it builds on), a CMake package (find_package(tierkv) -> tierkv::client) and a
# pkg-config file (docs/cpp.md).
set_target_properties(tierkv_client PROPERTIES EXPORT_NAME client)
set_target_properties(tierkv_protocol PROPERTIES EXPORT_NAME protocol)
set_target_properties(tierkv_common PROPERTIES EXPORT_NAME common)
set_target_properties(tierkv_device PROPERTIES EXPORT_NAME device)
install(TARGETS tierkv_client tierkv_protocol tierkv_device tierkv_common EXPORT tierkvTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/tierkv DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tierkvTargets NAMESPACE tierkv:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tierkv)
include(CMakePackageConfigHelpers)
configure_package_config_file(cmake/tierkvConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tierkvConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tierkv)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tierkvConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tierkvConfig.cmake ${PROJECT_BINARY_DIR}/tierkvConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tierkv)
configure_file(cmake/tierkv.pc.in ${PROJECT_BINARY_DIR}/tierkv.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tierkv.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The Python module: build/python/tierkv is an importable package.
option(TIERKV_BUILD_PYTHON "Build the Python module" ON)
if(TIERKV_BUILD_PYTHON)
  find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
  set(PYBIND11_PYTHON_VERSION ${Python3_VERSION})
  set(PYTHON_EXECUTABLE ${Python3_EXECUTABLE})
  find_package(pybind11 CONFIG REQUIRED)
  pybind11_add_module(_tierkv NO_EXTRAS python/tierkv_ext.cc python/value_view.cc
    python/registered_buffer.cc)
  target_link_libraries(_tierkv PRIVATE tierkv_client)
  set_target_properties(_tierkv PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/python/tierkv)
  file(GLOB TIERKV_PY_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/tierkv/*.py
       ${PROJECT_SOURCE_DIR}/python/tierkv/*.pyi ${PROJECT_SOURCE_DIR}/python/tierkv/py.typed)
  file(GLOB TIERKV_PY_INTEGRATIONS CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/python/tierkv/integrations/*.py)
  set(TIERKV_PY_STAMP ${PROJECT_BINARY_DIR}/python/tierkv/.sources)
  add_custom_command(OUTPUT ${TIERKV_PY_STAMP}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/python/tierkv/integrations
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${TIERKV_PY_SOURCES} ${PROJECT_BINARY_DIR}/python/tierkv/
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${TIERKV_PY_INTEGRATIONS}
            ${PROJECT_BINARY_DIR}/python/tierkv/integrations/
    COMMAND ${CMAKE_COMMAND} -E touch ${TIERKV_PY_STAMP}
    DEPENDS ${TIERKV_PY_SOURCES} ${TIERKV_PY_INTEGRATIONS}
    COMMENT "Copying the tierkv Python package")
  add_custom_target(tierkv_python ALL DEPENDS ${TIERKV_PY_STAMP} _tierkv)
endif()
