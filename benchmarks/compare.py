#!/usr/bin/env python3
"""Prints rfuse next to PyTorch eager and torch.compile, with the roofline floor, from the JSON files
that benchmarks/rfuse-bench and ../shared/device/torch_baselines*.py wrote into one directory."""
import json, os, sys

d = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", ".")
load = lambda n: json.load(open(os.path.join(d, n))) if os.path.exists(os.path.join(d, n)) else {}
rf, tb, tb2 = load("rfuse_bench.json"), load("torch_baselines.json"), load("torch_baselines2.json")
tbx = load("torch_extra.json")
copy = tb.get("copy_GBps", 4192.0)
gemm32, gemm16 = tb.get("gemm_torch.float32_TFLOPs", 412.0), tb.get("gemm_torch.bfloat16_TFLOPs", 783.0)

def row(name, rfk, eager, compiled, floor):
    r = rf.get(rfk, {}).get("ms")
    f = lambda v: f"{v:9.4f}" if isinstance(v, (int, float)) else f"{'-':>9}"
    print(f"{name:32s} {f(r)} {f(eager)} {f(compiled)} {f(floor)}   "
          + (f"rfuse/floor {r / floor:5.2f}" if r and floor else ""))

print(f"device: {rf.get('device', '?')} | copy {copy:.0f} GB/s, tf32 {gemm32:.0f} TFLOP/s, bf16 {gemm16:.0f} TFLOP/s")
print(f"{'workload (ms, median)':32s} {'rfuse':>9} {'eager':>9} {'compile':>9} {'floor':>9}")
w1, w4 = tb.get("W1_elementwise_chain", {}), tb.get("W4_layernorm_gelu_residual", {})
row("W1 elementwise chain 2^26 f32", "W1_elementwise_chain", w1.get("eager_ms"), w1.get("compiled_ms"),
    4 * 4 * 2**26 / copy / 1e6)
row("W4 layernorm+gelu+res 8192x4096", "W4_layernorm_gelu_residual", w4.get("eager_ms"), w4.get("compiled_ms"),
    2 * 4 * 8192 * 4096 / copy / 1e6)
for k, peak in (("float32", gemm32), ("bfloat16", gemm16)):
    t = tb2.get(f"mm_bias_gelu_{k}", {})
    fl = 2 * 4096**3 / peak / 1e9
    row(f"mm 4096^3 plain {k}", f"mm_plain_{k}", t.get("plain_mm"), None, fl)
    row(f"mm+bias+gelu {k}", f"mm_bias_gelu_{k}", t.get("eager_separate"), t.get("compiled"), fl)
    if f"mm_plain_{k}" in rf and f"mm_bias_gelu_{k}" in rf:
        print(f"  mm+bias+gelu over plain mm ({k}): "
              f"{rf[f'mm_bias_gelu_{k}']['ms'] / rf[f'mm_plain_{k}']['ms']:.3f}x")
w2 = tb.get("W2_mlp_step_fp32", {})
row("W2 MLP train step f32 (tf32)", "W2_mlp_train_step_f32", w2.get("eager_ms"), w2.get("compiled_ms"),
    2 * 4096 * (1024 * 4096 + 4096 * 4096 + 4096 * 1024) * 3 / gemm32 / 1e9)
w3 = tb.get("W3_cnn2_forward_b128", {})
row("W3 CNN-2 forward b128", "W3_cnn2_forward_b128", w3.get("eager_ms"), w3.get("compiled_ms"), None)
w5 = tbx.get("W5_resnet18_step_f32", {})
row("W5 ResNet-18 train step f32", "W5_resnet18_train_step_f32", w5.get("eager_ms"), w5.get("compiled_ms"),
    2 * 37.0e6 * 256 * 3 / gemm32 / 1e9)
w5b = tb.get("W5_resnet18_step_bf16", {})
if w5b:
    print(f"  PyTorch bf16 autocast: eager {w5b.get('eager_ms', 0):.4f}, torch.compile {w5b.get('compiled_ms', 0):.4f}")
if "W3_cnn2_reduce_overhead_ms" in tb2:
    print(f"  torch.compile mode=reduce-overhead (CUDA graphs): {tb2['W3_cnn2_reduce_overhead_ms']:.4f} ms")
if "W1_cold_compile_s" in rf:
    print(f"W1 cold compile (trace+fuse+NVRTC): {rf['W1_cold_compile_s']:.3f} s")
print(f"kernel cache this process: compiled {rf.get('kernel_cache_compiles')}, disk hits {rf.get('kernel_cache_disk_hits')}")
