# SPDX-License-Identifier: BSD-3-Clause
# Environment modules for an installed prefix: an Lmod (Lua) and a Tcl
# modulefile for hugepool (PATH, MANPATH, CMAKE_PREFIX_PATH, PKG_CONFIG_PATH,
# PYTHONPATH when the Python package is built;
# no LD_LIBRARY_PATH: installed programs find the library by RUNPATH,
# programs built with find_package by theirs, and those built with
# `pkg-config --libs hugepool` by the -rpath in its Libs) and for hugepool-preload
# (every program runs under the interposer, as hugepool-run runs one).
#   module use PREFIX/share/lmod/modulefiles     (Lmod)
#   module use PREFIX/share/modulefiles          (Tcl: environment-modules, or Lmod)
#   module load hugepool [hugepool-preload]
# Not installed into /usr (the Debian packages), where nothing needs them.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_hp_mod_default OFF)
else()
  set(_hp_mod_default ON)
endif()
option(HUGEPOOL_INSTALL_MODULEFILES "Install Lmod and Tcl modulefiles (share/lmod/modulefiles, share/modulefiles)"
  ${_hp_mod_default})
if(NOT HUGEPOOL_INSTALL_MODULEFILES)
  return()
endif()

set(_src ${CMAKE_CURRENT_LIST_DIR})
set(_out ${PROJECT_BINARY_DIR}/modulefiles)
set(HP_MODULE_MPI_HELP "")
set(HP_MODULE_MPI_LUA "")
set(HP_MODULE_MPI_TCL "")
if(TARGET hugepool_mpi_preload)
  set(HP_MODULE_MPI_HELP " and its MPI entry points (MPI_Alloc_mem on\nhugetlb pages)")
  set(HP_MODULE_MPI_LUA "prepend_path(\"LD_PRELOAD\", pathJoin(lib, \"libhugepool_mpi_preload.so\"))\n")
  set(HP_MODULE_MPI_TCL "prepend-path LD_PRELOAD $lib/libhugepool_mpi_preload.so\n")
endif()
# The Python package: importable by any interpreter of its version once the
# module is loaded, wherever the prefix is (python/CMakeLists.txt).
set(HP_MODULE_PY_LUA "")
set(HP_MODULE_PY_TCL "")
if(TARGET hugepool_python)
  set(HP_MODULE_PY_LUA "prepend_path(\"PYTHONPATH\", pathJoin(prefix, \"${HUGEPOOL_PYTHON_SITEDIR}\"))\n")
  set(HP_MODULE_PY_TCL "prepend-path PYTHONPATH $prefix/${HUGEPOOL_PYTHON_SITEDIR}\n")
endif()
set(_lua_dir ${CMAKE_INSTALL_DATAROOTDIR}/lmod/modulefiles)
set(_tcl_dir ${CMAKE_INSTALL_DATAROOTDIR}/modulefiles)
set(HP_MODULE_REL ${_lua_dir})
set(_names hugepool)
if(TARGET hugepool_preload)
  list(APPEND _names hugepool-preload)
endif()
foreach(name IN LISTS _names)
  configure_file(${_src}/${name}.lua.in ${_out}/lua/${name}/${PROJECT_VERSION}.lua @ONLY)
  install(FILES ${_out}/lua/${name}/${PROJECT_VERSION}.lua DESTINATION ${_lua_dir}/${name} COMPONENT tools)
  # From share/modulefiles/NAME/ up to the prefix.
  file(RELATIVE_PATH HP_MODULE_UP /prefix/${_tcl_dir}/${name} /prefix)
  configure_file(${_src}/${name}.tcl.in ${_out}/tcl/${name}/${PROJECT_VERSION} @ONLY)
  install(FILES ${_out}/tcl/${name}/${PROJECT_VERSION} DESTINATION ${_tcl_dir}/${name} COMPONENT tools)
endforeach()
