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
