# SPDX-License-Identifier: BSD-3-Clause
"""Spack package for hugepool, kept with its source (packaging/spack is a
Spack package repository: `spack repo add packaging/spack`).

A release is a tarball made by packaging/dist from the commit that
packaging/releases names for it (the same bytes on any machine: the sha256
pinned below).  The project has no public download site yet, so the recipe
fetches like Spack's recipes for sources that are not public: from a
mirror (`spack mirror add NAME file://DIR`, the tarball in DIR/hugepool/),
or else from the directory spack runs in.  A checkout builds with
`spack develop --path <checkout> hugepool@=0.1.0` in an environment, then
`spack install`.  tests/tools/spack.sh does both, offline, against
externals for Debian's packages.  The build uses only what the spec
provides: what the variants leave out is switched off in CMake, never left
to be found on the system (an MPI, Slurm's spank.h, a Fortran compiler,
Python with numpy)."""

import os

try:  # Spack 1.x: build systems live in the builtin repository
    from spack_repo.builtin.build_systems.cmake import CMakePackage
except ImportError:  # Spack 0.x
    pass
from spack.package import *  # noqa: F401,F403


class Hugepool(CMakePackage):
    """Guaranteed hugetlb buffers for HPC communication: a C API and STL
    allocator on explicit 2 MB / 1 GB hugetlb mappings with a reuse cache,
    an LD_PRELOAD interposer (hugepool-run) for unmodified programs and MPI
    jobs, a setgid helper that lets users size the node's pool within site
    limits (with a Slurm SPANK plugin), node-shared segments for the ranks
    of an MPI communicator, and a doctor that says what to fix."""

    license("BSD-3-Clause")

    # packaging/dist 0.1.0 (tag v0.1.0); no public URL: see the docstring.
    manual_download = True
    version("0.1.0", sha256="2146c5dea7b4fbc5b0e65342ce60dac519ef92b8e484d0b400ee4db832822ea1")

    def url_for_version(self, version):
        return "file://{0}/hugepool-{1}.tar.gz".format(os.getcwd(), version)

    variant("mpi", default=True, description="MPI layer (libhugepool_mpi) and MPI_Alloc_mem under hugepool-run")
    variant("preload", default=True, description="LD_PRELOAD interposer and the hugepool-run launcher")
    variant("helper", default=True, description="hugepool-reserve, the pool helper (made setgid by the site)")
    variant("slurm", default=False, when="+helper", description="Slurm SPANK plugin: srun --hugepages=N")
    variant("tools", default=True, description="hugepool doctor, hugepool-stats, man pages")
    variant("fortran", default=False, description="Fortran modules hugepool (and hugepool_mpi with +mpi)")
    variant("python", default=False, description="Python package hugepool (numpy arrays on hugepool buffers)")
    # The helper's compiled-in paths: never read from the environment.
    # "project": the project's own (cmake/helper-paths.cmake, where they are
    # written once).
    variant("reserve_conf", default="project", when="+helper",
            description="the helper's site config (project: the project's default)")
    variant("state_dir", default="project", when="+helper",
            description="the helper's lock and grant table (project: the project's default)")
    variant("jobs_dir", default="project", when="+helper",
            description="the Slurm job registry (project: the project's default)")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build", when="+fortran")
    depends_on("cmake@3.25:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("mpi", when="+mpi")
    # The small heap is a private copy of jemalloc 5.3's libjemalloc_pic.a.
    depends_on("jemalloc@5.3", when="+preload")
    depends_on("slurm", when="+slurm")
    depends_on("python@3:", type="run", when="+tools")
    # The package goes into the prefix's site directory: `spack load` puts it
    # on PYTHONPATH.
    extends("python", when="+python")
    depends_on("py-numpy", type=("build", "run"), when="+python")

    conflicts("platform=darwin", msg="hugetlb pages are a Linux kernel feature")
    conflicts("platform=windows", msg="hugetlb pages are a Linux kernel feature")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("HUGEPOOL_BUILD_MPI", "mpi"),
            self.define_from_variant("HUGEPOOL_BUILD_PRELOAD", "preload"),
            self.define_from_variant("HUGEPOOL_BUILD_HELPER", "helper"),
            self.define_from_variant("HUGEPOOL_BUILD_TOOLS", "tools"),
            self.define_from_variant("HUGEPOOL_BUILD_FORTRAN", "fortran"),
            self.define_from_variant("HUGEPOOL_BUILD_PYTHON", "python"),
            # The variant is conditional (when="+helper"): ~helper has none.
            self.define("HUGEPOOL_BUILD_SLURM", spec.satisfies("+slurm")),
            # The spec's MPI only, never a second one found on the system.
            self.define("HUGEPOOL_BUILD_OPENMPI", False),
            self.define("HUGEPOOL_BUILD_BENCH", False),
            # Spack writes its own modulefiles.
            self.define("HUGEPOOL_INSTALL_MODULEFILES", False),
            self.define("HUGEPOOL_BUILD_TESTS", self.run_tests),
        ]
        if spec.satisfies("+helper"):
            for cache, variant in (("HUGEPOOL_RESERVE_CONF", "reserve_conf"),
                                   ("HUGEPOOL_RESERVE_STATE_DIR", "state_dir"),
                                   ("HUGEPOOL_RESERVE_JOBS_DIR", "jobs_dir")):
                if spec.variants[variant].value != "project":
                    args.append(self.define_from_variant(cache, variant))
        if spec.satisfies("+slurm"):
            args.append(self.define("HUGEPOOL_SPANK_INCLUDE", spec["slurm"].prefix.include))
        if spec.satisfies("+python"):
            args.append(self.define("Python3_EXECUTABLE", spec["python"].command.path))
        # jemalloc's libjemalloc_pic.a is found through CMAKE_PREFIX_PATH
        # (Debian's external keeps it in the multiarch directory).
        return args

    @run_after("install")
    def check_bindings(self):
        """A binding the spec asks for is installed: the build leaves out the
        Python package when its interpreter cannot import numpy, and the
        Fortran modules without a Fortran compiler, with a message only."""
        wanted = []
        if self.spec.satisfies("+fortran"):
            wanted.append("hugepool.mod")
        if self.spec.satisfies("+python"):
            wanted.append("__init__.py")
        for name in wanted:
            if not find(self.prefix, name):
                raise InstallError("{0} was not installed: see the CMake output".format(name))

    @run_after("install")
    def check_install(self):
        """The installed doctor runs and gives its verdict (it only reads)."""
        if self.spec.satisfies("+tools"):
            doctor = Executable(join_path(self.prefix.bin, "hugepool"))
            out = doctor("doctor", output=str, error=str, fail_on_error=False)
            if "verdict:" not in out:
                raise InstallError("hugepool doctor printed no verdict:\n" + out)
