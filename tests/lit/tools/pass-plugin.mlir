// rfuse-opt --load-pass-plugin: the example plugin (examples/pass-plugin) registers
// rfuse-example-fold-log-exp, which a pipeline then names; a plugin that does not load, or one
// that registers a pass name already taken (a copy of the same plugin is another library, so
// another pass), stops the tool with the reason.
// RUN: rfuse-opt --load-pass-plugin=%rfuse_lib/libRfuseExamplePlugin.so --pass-pipeline='builtin.module(func.func(rfuse-example-fold-log-exp))' %s | FileCheck %s
// RUN: rfuse-opt --load-pass-plugin=%rfuse_lib/libRfuseExamplePlugin.so --load-pass-plugin=%rfuse_lib/libRfuseExamplePlugin.so --help | FileCheck %s --check-prefix=HELP
// RUN: not rfuse-opt --load-pass-plugin=%t.missing.so %s 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: cp %rfuse_lib/libRfuseExamplePlugin.so %t.copy.so
// RUN: not rfuse-opt --load-pass-plugin=%rfuse_lib/libRfuseExamplePlugin.so --load-pass-plugin=%t.copy.so %s 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not rfuse-opt --load-pass-plugin=%s %s 2>&1 | FileCheck %s --check-prefix=NOTLIB

// HELP: --rfuse-example-fold-log-exp
// MISSING: rfuse-opt: the pass plugin '{{.*}}.missing.so' does not exist
// TWICE: rfuse-opt: the pass plugin '{{.*}}.copy.so' registers a pass under a name another pass already has
// NOTLIB: rfuse-opt: the pass plugin '{{.*}}pass-plugin.mlir' cannot be loaded

// CHECK-LABEL: func.func @log_of_exp
// CHECK-NEXT: %[[S:.*]] = rfuse.sin %arg0
// CHECK-NEXT: return %[[S]]
func.func @log_of_exp(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = rfuse.sin %x : tensor<4xf32>
  %e = rfuse.exp %s : tensor<4xf32>
  %l = rfuse.log %e : tensor<4xf32>
  return %l : tensor<4xf32>
}
