# lit configuration for rfuse's FileCheck tests.
import os
import lit.formats

config.name = "rfuse"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.rfuse_obj_root, "tests", "lit")
# rfuse's tools first, then FileCheck, not, count, split-file from LLVM 19.
config.environment["PATH"] = os.pathsep.join(
    [config.rfuse_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.substitutions.append(("%examples", os.path.join(config.rfuse_src_root, "examples")))
config.substitutions.append(("%rfuse_lib", os.path.join(config.rfuse_obj_root, "lib")))

# `llvm-stats`: pass statistics (-mlir-pass-statistics) are recorded. MLIR only records them when
# LLVM was built with assertions or LLVM_FORCE_ENABLE_STATS; in a release LLVM (e.g. the apt
# llvm-19 packages) every statistic stays 0 and the report is empty. Tests that check a statistic
# guard those RUN lines with `%if llvm-stats %{ ... %}`.
def _llvm_stats_enabled():
    import re
    import subprocess
    llvm_config = os.path.join(config.llvm_tools_dir, "llvm-config")
    try:
        mode = subprocess.run([llvm_config, "--assertion-mode"], capture_output=True, text=True)
        if mode.stdout.strip() == "ON":
            return True
        incdir = subprocess.run([llvm_config, "--includedir"], capture_output=True, text=True)
        header = os.path.join(incdir.stdout.strip(), "llvm", "Config", "llvm-config.h")
        with open(header) as f:
            return re.search(r"#define\s+LLVM_FORCE_ENABLE_STATS\s+1", f.read()) is not None
    except OSError:
        return False

if _llvm_stats_enabled():
    config.available_features.add("llvm-stats")
