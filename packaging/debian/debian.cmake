# SPDX-License-Identifier: BSD-3-Clause
# Debian packages with cpack (run `cpack -G DEB` in a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr):
#   libhugepool0         the shared library                          (component lib)
#   libhugepool-dev      headers, static library, CMake/pkg-config, man 3 (dev)
#   libhugepool-mpi0     libhugepool_mpi.so.0                        (mpi)
#   libhugepool-mpi-dev  mpi.h, mpi.hpp, its link, CMake targets, pkg-config file, hugepool_mpi(3) (mpidev)
#   hugepool-tools       hugepool, hugepool-stats, hugepool-run + the interposers, the demo, man 1 (tools)
#   hugepool-helper      hugepool-reserve, setgid by its postinst, reserve.conf (conffile), man 8 (helper)
#   hugepool-slurm       the SPANK plugin and its plugstack.conf.d snippet (conffile)  (slurm)
#   python3-hugepool     the Python package                          (python)
#   libhugepool-fortran0 libhugepool_fortran.so.0 (and _fortran_mpi) (fortran)
#   libhugepool-fortran-dev  the .mod files, links, CMake targets, pkg-config (fortrandev)
# Every package carries /usr/share/doc/<package>/copyright (DEP-5) and
# changelog.gz.  Who maintains the packages and the project's homepage are
# cache variables: HUGEPOOL_PACKAGE_MAINTAINER (default: DEBFULLNAME and
# DEBEMAIL, as dch takes them, else the source repository's git identity)
# and HUGEPOOL_PACKAGE_HOMEPAGE (default: none, and no Homepage field).

# The Debian layout (files under /etc, per-package doc directories, the
# tmpfiles.d rule) is installed only into /usr, the prefix the packages are
# built for: an install into any other prefix never writes to /etc.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_hp_debian_default ON)
else()
  set(_hp_debian_default OFF)
endif()
option(HUGEPOOL_INSTALL_DEBIAN_LAYOUT "Install the Debian packages' files outside the prefix (/etc conffiles, doc, tmpfiles.d)"
  ${_hp_debian_default})

# Who maintains the packages: DEBFULLNAME/DEBEMAIL (Debian's convention for
# the person who builds a package), else the identity the source tree's git
# repository is configured with.
set(_hp_maint "")
if(DEFINED ENV{DEBEMAIL})
  set(_hp_maint "$ENV{DEBEMAIL}")
  if(DEFINED ENV{DEBFULLNAME})
    set(_hp_maint "$ENV{DEBFULLNAME} <$ENV{DEBEMAIL}>")
  endif()
else()
  find_program(_hp_git git)
  if(_hp_git)
    execute_process(COMMAND ${_hp_git} -C ${PROJECT_SOURCE_DIR} config user.name OUTPUT_VARIABLE _hp_name
      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    execute_process(COMMAND ${_hp_git} -C ${PROJECT_SOURCE_DIR} config user.email OUTPUT_VARIABLE _hp_mail
      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_hp_name AND _hp_mail)
      set(_hp_maint "${_hp_name} <${_hp_mail}>")
    endif()
  endif()
endif()
if(NOT _hp_maint)
  message(WARNING "hugepool packages: no maintainer known (set HUGEPOOL_PACKAGE_MAINTAINER, or DEBFULLNAME and DEBEMAIL)")
  set(_hp_maint "hugepool developers <hugepool@${CMAKE_HOST_SYSTEM_NAME}.invalid>")
endif()
set(HUGEPOOL_PACKAGE_MAINTAINER "${_hp_maint}" CACHE STRING "Maintainer of the Debian packages: Name <address>")
set(HUGEPOOL_PACKAGE_HOMEPAGE "" CACHE STRING "The project's homepage (Homepage field of the packages; empty: none)")
set(HUGEPOOL_PACKAGE_DATE "Wed, 25 Nov 2026 00:00:00 +0000" CACHE STRING "Release date in the packages' changelog (RFC 5322)")
set(HUGEPOOL_PACKAGE_VERSION ${PROJECT_VERSION})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hugepool)
set(CPACK_PACKAGE_VENDOR "hugepool")
set(CPACK_PACKAGE_CONTACT "${HUGEPOOL_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${HUGEPOOL_PACKAGE_MAINTAINER}")
# Each package's first description line is its own synopsis: CPackDeb puts
# the summary in front unless it is CPack's default one.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_NAME} built using CMake")
set(CPACK_PACKAGE_VERSION ${HUGEPOOL_PACKAGE_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# libhugepool.so.0 is ours: dpkg-shlibdeps finds it in the build tree (the
# packages name libhugepool0 explicitly).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/lib ${CMAKE_BINARY_DIR}/mpi ${CMAKE_BINARY_DIR}/fortran)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
if(HUGEPOOL_PACKAGE_HOMEPAGE)
  set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${HUGEPOOL_PACKAGE_HOMEPAGE}")
  set(HUGEPOOL_COPYRIGHT_SOURCE "Source: ${HUGEPOOL_PACKAGE_HOMEPAGE}\n")
else()
  set(HUGEPOOL_COPYRIGHT_SOURCE "")
endif()

set(_v "${HUGEPOOL_PACKAGE_VERSION}")
set(_long_lib "hugepool hands out buffers on explicit hugetlb mappings (2 MB pages, 1 GB on\nrequest) that the kernel reserved when they were mapped, so they never fault\nwith SIGBUS, and keeps freed buffers in a bounded cache for reuse without\nsystem calls: for NIC and intra-node MPI communication buffers.")
set(CPACK_COMPONENTS_ALL lib dev tools helper)
set(CPACK_DEBIAN_LIB_PACKAGE_NAME libhugepool0)
set(CPACK_DEBIAN_LIB_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_LIB_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (library)\n${_long_lib}\n.\nThis package holds the shared library.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libhugepool-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libhugepool0 (= ${_v})")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (development files)\n${_long_lib}\n.\nThis package holds the headers, the static library, the CMake package and\nthe pkg-config file, and hugepool(3).")
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME hugepool-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "libhugepool0 (= ${_v}), python3")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS "python3-matplotlib, hugepool-helper")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (tools)\n${_long_lib}\n.\nThis package holds hugepool-run and its LD_PRELOAD interposers (large\nallocations of unmodified programs and MPI jobs on hugetlb pages), hugepool\ndoctor (will it work here, and the fix), hugepool-stats and hugepool-demo.")
set(CPACK_DEBIAN_HELPER_PACKAGE_NAME hugepool-helper)
set(CPACK_DEBIAN_HELPER_PACKAGE_SECTION admin)
# adduser: addgroup --system for the groups (Debian policy 9.2.2);
# passwd: groupdel when a purge removes them.
set(CPACK_DEBIAN_HELPER_PACKAGE_DEPENDS "adduser, passwd")
set(CPACK_DEBIAN_HELPER_DESCRIPTION "lets users size the hugepage pool within site limits\n${_long_lib}\n.\nThis package holds hugepool-reserve, a small audited setgid helper that\nlets the users of a group grow the node's hugepage pool within the limits\nof /etc/hugepool/reserve.conf and give the pages back.\n.\nThe package creates the system group hugepool-users, the group that\nreserve.conf admits. No user is in it at first: an administrator admits a\nuser with `adduser USER hugepool-users` (effective at the user's next\nlogin), and sets the limits in /etc/hugepool/reserve.conf.")
if(TARGET hugepool_mpi)
  list(APPEND CPACK_COMPONENTS_ALL mpi mpidev)
  set(CPACK_DEBIAN_MPI_PACKAGE_NAME libhugepool-mpi0)
  set(CPACK_DEBIAN_MPI_PACKAGE_GENERATE_SHLIBS ON)
  set(CPACK_DEBIAN_MPI_PACKAGE_DEPENDS "libhugepool0 (= ${_v})")
  set(CPACK_DEBIAN_MPI_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (MPI layer)\n${_long_lib}\n.\nThis package holds libhugepool_mpi: node-shared hugetlb segments for the\nranks of an MPI communicator.")
  set(CPACK_DEBIAN_MPIDEV_PACKAGE_NAME libhugepool-mpi-dev)
  set(CPACK_DEBIAN_MPIDEV_PACKAGE_SECTION libdevel)
  set(CPACK_DEBIAN_MPIDEV_PACKAGE_DEPENDS "libhugepool-mpi0 (= ${_v}), libhugepool-dev (= ${_v}), libmpich-dev")
  set(CPACK_DEBIAN_MPIDEV_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (MPI development files)\n${_long_lib}\n.\nThis package holds hugepool/mpi.h, hugepool/mpi.hpp, the CMake targets\n(find_package(hugepool COMPONENTS mpi)) and hugepool-mpi.pc.")
endif()
# The MPI layer built for Open MPI beside MPICH: packages of its own, so that
# each site installs the runtime of the MPI it runs and no other.
if(TARGET hugepool_mpi_openmpi)
  list(APPEND CPACK_COMPONENTS_ALL mpiopenmpi mpiopenmpidev)
  set(CPACK_DEBIAN_MPIOPENMPI_PACKAGE_NAME libhugepool-mpi-openmpi0)
  set(CPACK_DEBIAN_MPIOPENMPI_PACKAGE_GENERATE_SHLIBS ON)
  set(CPACK_DEBIAN_MPIOPENMPI_PACKAGE_DEPENDS "libhugepool0 (= ${_v})")
  set(CPACK_DEBIAN_MPIOPENMPI_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (MPI layer, Open MPI)\n${_long_lib}\n.\nThis package holds libhugepool_mpi_openmpi: node-shared hugetlb segments for\nthe ranks of an Open MPI communicator.")
  set(CPACK_DEBIAN_MPIOPENMPIDEV_PACKAGE_NAME libhugepool-mpi-openmpi-dev)
  set(CPACK_DEBIAN_MPIOPENMPIDEV_PACKAGE_SECTION libdevel)
  set(CPACK_DEBIAN_MPIOPENMPIDEV_PACKAGE_DEPENDS
    "libhugepool-mpi-openmpi0 (= ${_v}), libhugepool-mpi-dev (= ${_v}), libopenmpi-dev")
  set(CPACK_DEBIAN_MPIOPENMPIDEV_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (Open MPI development files)\n${_long_lib}\n.\nThis package holds the CMake targets (find_package(hugepool COMPONENTS\nmpi_openmpi)) and hugepool-mpi-openmpi.pc for the Open MPI build of the\nMPI layer.")
endif()
if(TARGET hugepool_python)
  list(APPEND CPACK_COMPONENTS_ALL python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-hugepool)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
  # The extension is built for one Python 3.X (python3 >= 3.X~, << 3.X+1).
  string(REGEX REPLACE "^([0-9]+)[.]([0-9]+)$" "\\1;\\2" _py "${HUGEPOOL_PYTHON_VERSION}")
  list(GET _py 0 _py_major)
  list(GET _py 1 _py_minor)
  math(EXPR _py_next "${_py_minor} + 1")
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "libhugepool0 (= ${_v}), python3 (>= ${_py_major}.${_py_minor}~), python3 (<< ${_py_major}.${_py_next}), python3-numpy")
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SUGGESTS "python3-mpi4py")
  set(CPACK_DEBIAN_PYTHON_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (Python 3)\n${_long_lib}\n.\nThis package holds the Python 3 package hugepool: numpy arrays on hugepool\nbuffers, and hugepool.mpi for node-shared segments with mpi4py.")
endif()
if(TARGET hugepool_fortran)
  list(APPEND CPACK_COMPONENTS_ALL fortran fortrandev)
  string(REGEX MATCH "^[0-9]+" _fc_major "${CMAKE_Fortran_COMPILER_VERSION}")
  set(CPACK_DEBIAN_FORTRAN_PACKAGE_NAME libhugepool-fortran0)
  set(CPACK_DEBIAN_FORTRAN_PACKAGE_GENERATE_SHLIBS ON)
  set(CPACK_DEBIAN_FORTRAN_PACKAGE_DEPENDS "libhugepool0 (= ${_v})")
  set(CPACK_DEBIAN_FORTRAN_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (Fortran)\n${_long_lib}\n.\nThis package holds the library behind the Fortran module hugepool; it needs\nno MPI (the module hugepool_mpi is in libhugepool-fortran-mpi0).")
  set(CPACK_DEBIAN_FORTRANDEV_PACKAGE_NAME libhugepool-fortran-dev)
  set(CPACK_DEBIAN_FORTRANDEV_PACKAGE_SECTION libdevel)
  # .mod files are read only by the compiler that wrote them.
  set(CPACK_DEBIAN_FORTRANDEV_PACKAGE_DEPENDS
    "libhugepool-fortran0 (= ${_v}), libhugepool-dev (= ${_v})")
  if(CMAKE_Fortran_COMPILER_ID STREQUAL "GNU")
    string(APPEND CPACK_DEBIAN_FORTRANDEV_PACKAGE_DEPENDS ", gfortran-${_fc_major}")
  endif()
  set(CPACK_DEBIAN_FORTRANDEV_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (Fortran development)\n${_long_lib}\n.\nThis package holds the Fortran module hugepool (a .mod file for\n${CMAKE_Fortran_COMPILER_ID} Fortran ${_fc_major}), the CMake targets (find_package(hugepool\nCOMPONENTS fortran)) and hugepool-fortran.pc.")
  if(TARGET hugepool_fortran_mpi)
    list(APPEND CPACK_COMPONENTS_ALL fortranmpi fortranmpidev)
    set(CPACK_DEBIAN_FORTRANMPI_PACKAGE_NAME libhugepool-fortran-mpi0)
    set(CPACK_DEBIAN_FORTRANMPI_PACKAGE_GENERATE_SHLIBS ON)
    set(CPACK_DEBIAN_FORTRANMPI_PACKAGE_DEPENDS "libhugepool-fortran0 (= ${_v}), libhugepool-mpi0 (= ${_v})")
    set(CPACK_DEBIAN_FORTRANMPI_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (Fortran, MPI)\n${_long_lib}\n.\nThis package holds the library behind the Fortran module hugepool_mpi\n(node-shared segments for the ranks of an MPI communicator).")
    set(CPACK_DEBIAN_FORTRANMPIDEV_PACKAGE_NAME libhugepool-fortran-mpi-dev)
    set(CPACK_DEBIAN_FORTRANMPIDEV_PACKAGE_SECTION libdevel)
    set(CPACK_DEBIAN_FORTRANMPIDEV_PACKAGE_DEPENDS
      "libhugepool-fortran-mpi0 (= ${_v}), libhugepool-fortran-dev (= ${_v}), libhugepool-mpi-dev (= ${_v})")
    set(CPACK_DEBIAN_FORTRANMPIDEV_DESCRIPTION "guaranteed hugetlb buffers for HPC communication (Fortran MPI development)\n${_long_lib}\n.\nThis package holds the Fortran module hugepool_mpi (a .mod file for\n${CMAKE_Fortran_COMPILER_ID} Fortran ${_fc_major}), the CMake targets (find_package(hugepool\nCOMPONENTS fortran_mpi)) and hugepool-fortran-mpi.pc.")
  endif()
endif()
if(TARGET hugepool_spank)
  list(APPEND CPACK_COMPONENTS_ALL slurm)
  set(CPACK_DEBIAN_SLURM_PACKAGE_NAME hugepool-slurm)
  # Login nodes load the plugin too (srun, sbatch, salloc read plugstack.conf)
  # and run no slurmd: the package needs neither, and enables nothing.
  set(CPACK_DEBIAN_SLURM_PACKAGE_DEPENDS "hugepool-helper (= ${_v})")
  set(CPACK_DEBIAN_SLURM_PACKAGE_ENHANCES "slurmd, slurm-client")
  set(CPACK_DEBIAN_SLURM_PACKAGE_SECTION admin)
  set(CPACK_DEBIAN_SLURM_DESCRIPTION "Slurm SPANK plugin for hugepool: srun --hugepages=N\n${_long_lib}\n.\nThis package holds the Slurm SPANK plugin (srun/sbatch --hugepages=N: the\njob's pages are reserved in its prolog and released in its epilog). It is\nenabled by the administrator: /etc/slurm/plugstack.conf.d/hugepool.conf holds\nthe line to uncomment, on every node and login node.")
endif()

# Shared libraries in the linker's path: the ldconfig trigger (Debian
# policy 8.1.1).
file(WRITE ${PROJECT_BINARY_DIR}/packaging/debian/lib/triggers "activate-noawait ldconfig\n")
foreach(comp LIB MPI MPIOPENMPI TOOLS FORTRAN FORTRANMPI)
  set(CPACK_DEBIAN_${comp}_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/packaging/debian/lib/triggers)
endforeach()

# CPackDeb adds postinst/postrm scripts that only call ldconfig: taken out
# of the packages after they are built (the trigger above does that work).
set(CPACK_POST_BUILD_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/no-ldconfig-scripts.cmake)

# Per-package copyright and changelog (Debian policy 12.5 and 12.7).
set(_deb ${PROJECT_BINARY_DIR}/packaging/debian)
configure_file(${CMAKE_CURRENT_LIST_DIR}/copyright.in ${_deb}/copyright @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/changelog.in ${_deb}/changelog @ONLY)
execute_process(COMMAND gzip -9n -c ${_deb}/changelog OUTPUT_FILE ${_deb}/changelog.gz RESULT_VARIABLE _gz)
if(HUGEPOOL_INSTALL_DEBIAN_LAYOUT)
  foreach(comp IN LISTS CPACK_COMPONENTS_ALL)
    string(TOUPPER ${comp} _C)
    install(FILES ${_deb}/copyright ${_deb}/changelog.gz
      DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${CPACK_DEBIAN_${_C}_PACKAGE_NAME} COMPONENT ${comp})
  endforeach()
  # The README (what hugepool-run --help and the man pages point to beyond
  # themselves), compressed as Debian policy 12.3 wants it.
  execute_process(COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/README.md OUTPUT_FILE ${_deb}/README.md.gz)
  install(FILES ${_deb}/README.md.gz DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/hugepool-tools COMPONENT tools)
  # lintian's overrides, each with the reason in its comment.
  foreach(comp IN LISTS CPACK_COMPONENTS_ALL)
    string(TOUPPER ${comp} _C)
    set(_ovr ${CMAKE_CURRENT_LIST_DIR}/lintian/${CPACK_DEBIAN_${_C}_PACKAGE_NAME})
    if(EXISTS ${_ovr})
      install(FILES ${_ovr} DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides COMPONENT ${comp})
    endif()
  endforeach()
else()
  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT lib)
  install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT tools)
endif()

# The helper's config (a conffile), its boot rule and maintainer scripts,
# with the compiled-in paths.
set(HUGEPOOL_PKG_BIN ${CMAKE_INSTALL_FULL_BINDIR})
configure_file(${CMAKE_CURRENT_LIST_DIR}/tmpfiles.conf.in ${_deb}/tmpfiles.conf @ONLY)
set(_ctl ${_deb}/helper)
foreach(script preinst postinst postrm)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/helper-${script}.in ${_ctl}/${script} @ONLY
    FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()
file(WRITE ${_ctl}/conffiles "${HUGEPOOL_RESERVE_CONF}\n")
set(CPACK_DEBIAN_HELPER_PACKAGE_CONTROL_EXTRA "${_ctl}/preinst;${_ctl}/postinst;${_ctl}/postrm;${_ctl}/conffiles")
set(CPACK_DEBIAN_HELPER_PACKAGE_CONTROL_STRICT_PERMISSION ON)
if(HUGEPOOL_INSTALL_DEBIAN_LAYOUT AND TARGET hugepool-reserve)
  get_filename_component(_confdir ${HUGEPOOL_RESERVE_CONF} DIRECTORY)
  get_filename_component(_confname ${HUGEPOOL_RESERVE_CONF} NAME)
  install(FILES ${CMAKE_CURRENT_LIST_DIR}/reserve.conf DESTINATION ${_confdir} RENAME ${_confname}
    COMPONENT helper)
  install(FILES ${_deb}/tmpfiles.conf DESTINATION ${CMAKE_INSTALL_PREFIX}/lib/tmpfiles.d RENAME hugepool.conf
    COMPONENT helper)
endif()
if(TARGET hugepool_spank)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/plugstack.conf.in ${_deb}/slurm/hugepool.conf @ONLY)
  file(WRITE ${_deb}/slurm-control/conffiles "/etc/slurm/plugstack.conf.d/hugepool.conf\n")
  set(CPACK_DEBIAN_SLURM_PACKAGE_CONTROL_EXTRA "${_deb}/slurm-control/conffiles")
  if(HUGEPOOL_INSTALL_DEBIAN_LAYOUT)
    install(FILES ${_deb}/slurm/hugepool.conf DESTINATION /etc/slurm/plugstack.conf.d COMPONENT slurm)
  endif()
endif()

include(CPack)
