// MLIR pass plugins (mlir::PassPlugin): a researcher's passes, loaded into rfuse-opt and the R
// package, then named in pipeline strings. A plugin is code that runs in the process: only load
// what you trust (docs/passes.md).
#include "rfuse/Passes/Passes.h"

#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

namespace rfuse {

namespace {
[[noreturn]] void childFatal(void *, const char *, bool) { _exit(3); }
} // namespace

bool loadPassPlugin(const std::string &path, std::string &error) {
  static std::mutex mutex;
  static std::set<std::string> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  llvm::SmallString<256> real;
  if (llvm::sys::fs::real_path(path, real)) {
    error = "the pass plugin '" + path + "' does not exist";
    return false;
  }
  if (loaded.count(real.str().str()))
    return true; // its passes are registered already
  registerPassesForPipelines();
  auto plugin = mlir::PassPlugin::load(real.str().str());
  if (!plugin) {
    llvm::raw_string_ostream os(error);
    os << "the pass plugin '" << path << "' cannot be loaded: " << plugin.takeError();
    return false;
  }
  // Registering a pass under a name another pass has is a fatal error in MLIR (it would end the
  // process, an R session with it): try the registration in a child process first.
  pid_t child = fork();
  if (child < 0) {
    error = "cannot check the pass plugin '" + path + "' (fork failed)";
    return false;
  }
  if (child == 0) {
    llvm::remove_fatal_error_handler();
    llvm::install_fatal_error_handler(childFatal);
    plugin->registerPassRegistryCallbacks();
    _exit(0);
  }
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      error = "the pass plugin '" + path + "' did not finish registering its passes";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error = "the pass plugin '" + path + "' " +
            (WIFEXITED(status) && WEXITSTATUS(status) == 3
                 ? "registers a pass under a name another pass already has"
                 : "failed while registering its passes");
    return false;
  }
  plugin->registerPassRegistryCallbacks();
  loaded.insert(real.str().str());
  return true;
}

} // namespace rfuse
