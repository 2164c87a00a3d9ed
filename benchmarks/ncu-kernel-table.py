# Folds Nsight Compute's CSV (gpu-run.sh ncu-r with RFUSE_NCU_METRICS=gpu__time_duration.sum) into
# one line a kernel name: launches, total and mean device time, largest first, and the total.
#   python3 benchmarks/ncu-kernel-table.py ncu.csv [steps] [top]
# `steps`: how many training steps the profiled launches cover (per-step totals divide by it).
import csv, sys
from collections import defaultdict

path = sys.argv[1]
steps = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
top = int(sys.argv[3]) if len(sys.argv) > 3 else 40
total, count = defaultdict(float), defaultdict(int)
with open(path, newline="") as f:
    rows = [line for line in f if line.startswith('"')]  # (ncu's own lines are not CSV)
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    ns = float(r["Metric Value"].replace(",", ""))
    name = r["Kernel Name"][:90]
    total[name] += ns
    count[name] += 1
grand = sum(total.values())
print(f"{sum(count.values())} launches, {grand / 1e6 / steps:.4f} ms of device time a step ({steps:g} steps)")
for name in sorted(total, key=total.get, reverse=True)[:top]:
    print(f"{total[name] / 1e6 / steps:9.4f} ms  {count[name] / steps:6.1f}x  {total[name] / count[name] / 1e3:8.2f} us  {name}")
