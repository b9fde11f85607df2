# The library's layers, bottom to top (docs/design.md):
#
#   base  <  kernels < device, topology  <  bootstrap  <  transport  <  collectives  <  sim  <  core  <  compat
#   (sim, gyre-sim's engine, lives in sim/ beside src/: core's estimates run gyre's plans on it)
#   (transport also sees device, for the device memory it registers; collectives do not)
#
# Every source file includes by layer ("transport/transport.h"), so one include
# root holding all of src/ would let any file reach any layer. Instead each
# layer compiles against a view: a folder in the build tree that holds one link
# per layer it may use (itself and those below it) and nothing else, so
# including a header from a layer above is "file not found", a build error.

set(GYRE_VIEWS_DIR ${PROJECT_BINARY_DIR}/views)

function(_gyre_layer_source_dir layer out)
  if(layer STREQUAL "kernels" OR layer STREQUAL "bench" OR layer STREQUAL "harness" OR layer STREQUAL "flexsp"
     OR layer STREQUAL "sim")
    set(${out} ${PROJECT_SOURCE_DIR}/${layer} PARENT_SCOPE)
  else()
    set(${out} ${PROJECT_SOURCE_DIR}/src/${layer} PARENT_SCOPE)
  endif()
endfunction()

# gyre_view(<name> <layer>...): ${GYRE_VIEWS_DIR}/<name>/ with a link for each
# layer (kernels, bench, harness and flexsp live beside src/, the rest under it).
function(gyre_view name)
  set(dir ${GYRE_VIEWS_DIR}/${name})
  file(MAKE_DIRECTORY ${dir})
  # Links from an earlier configure that this one no longer lists go; only
  # the links themselves are removed, never what they point at.
  file(GLOB old LIST_DIRECTORIES true ${dir}/*)
  foreach(entry ${old})
    get_filename_component(layer ${entry} NAME)
    if(NOT layer IN_LIST ARGN AND IS_SYMLINK ${entry})
      file(REMOVE ${entry})
    endif()
  endforeach()
  foreach(layer ${ARGN})
    _gyre_layer_source_dir(${layer} src)
    if(NOT IS_SYMLINK ${dir}/${layer})
      file(CREATE_LINK ${src} ${dir}/${layer} SYMBOLIC)
    endif()
  endforeach()
endfunction()

# What each layer may include: itself and the layers it builds on.
set(GYRE_LAYER_base        base)
set(GYRE_LAYER_kernels     base kernels)
set(GYRE_LAYER_device      base kernels device)
set(GYRE_LAYER_topology    base topology)
set(GYRE_LAYER_bootstrap   base topology bootstrap)
set(GYRE_LAYER_transport   base kernels device topology bootstrap transport)
set(GYRE_LAYER_collectives base kernels topology transport collectives)
set(GYRE_LAYER_sim         base kernels topology transport collectives sim)
set(GYRE_LAYER_core        base kernels device topology bootstrap transport collectives sim core)
foreach(layer base kernels device topology bootstrap transport collectives sim core)
  gyre_view(${layer} ${GYRE_LAYER_${layer}})
endforeach()

# gyre_layer(<layer> <sources>...): the layer's objects (gyre_<layer>),
# compiled against its view and the public headers, hidden by default.
function(gyre_layer layer)
  add_library(gyre_${layer} OBJECT ${ARGN})
  target_include_directories(gyre_${layer} PRIVATE ${GYRE_VIEWS_DIR}/${layer} ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(gyre_${layer} PRIVATE gyre_flags Threads::Threads)
  set_target_properties(gyre_${layer} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
                                                 POSITION_INDEPENDENT_CODE ON)
endfunction()

# gyre_internal_<layer>: a small named internal API for tools, benchmarks and
# tests that need more than the C ABI: that layer's view (and so the layers
# below it), linked with the static library. Defined once the library exists.
function(gyre_internal_apis)
  foreach(layer base kernels device topology bootstrap transport collectives sim core)
    add_library(gyre_internal_${layer} INTERFACE)
    target_include_directories(gyre_internal_${layer} INTERFACE ${GYRE_VIEWS_DIR}/${layer})
    target_link_libraries(gyre_internal_${layer} INTERFACE gyre_static)
  endforeach()
endfunction()
