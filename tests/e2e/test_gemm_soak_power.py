"""bench/gemm_soak_power.py: soak spans of bench_gemm --soak-ms matched with nvidia-smi samples."""
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "bench" / "gemm_soak_power.py"

SOAK = """custom    4096x4096 m=8192    soak (3000 ms each, after 2 s idle):
  soak int8  2026/12/03 02:00:00.000 .. 2026/12/03 02:00:03.000  10 replays x 4 launches: 190.0 us at the start, 200.0 us at the end
  soak pc    2026/12/03 02:00:05.000 .. 2026/12/03 02:00:08.000  10 replays x 4 launches: 170.0 us at the start, 180.0 us at the end
"""


def smi_rows():
    rows = ["timestamp, power.draw.instant, power.draw, clocks.sm, clocks_event_reasons.sw_power_cap"]
    for tenth in range(0, 90):  # 02:00:00.0 .. 02:00:08.9, every 100 ms
        sec, frac = divmod(tenth, 10)
        # int8's span: 700 W at 1400 MHz; pc's: 650 W at 1600 MHz, the cap active only after 02:00:07
        watts, mhz, cap = (700, 1400, "Active") if sec < 4 else (650, 1600, "Active" if sec >= 7 else "Not Active")
        rows.append(f"2026/12/03 02:00:0{sec}.{frac}00, {watts}.00 W, 1.00 W, {mhz} MHz, {cap}")
    return "\n".join(rows) + "\n"


def test_power_clock_and_energy_over_the_last_third(tmp_path):
    (tmp_path / "soak.txt").write_text(SOAK)
    (tmp_path / "smi.csv").write_text(smi_rows())
    r = subprocess.run([sys.executable, str(TOOL), str(tmp_path / "soak.txt"), str(tmp_path / "smi.csv"), "--md"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("| custom")]
    assert len(rows) == 2
    # int8: the last third of 02:00:00-03 holds 02:00:02.0-03.0: 700 W (the instant field), 1400 MHz
    assert rows[0] == "| custom | 4096x4096 | 8192 | int8 | 200.0 | 700 | 1400 | 100% | 140.0 | 1.00x |"
    # pc: 02:00:07.0-08.0, cap active throughout; 650 W x 180 us = 117 mJ; 200 / 180 = 1.11x
    assert rows[1] == "| custom | 4096x4096 | 8192 | pc | 180.0 | 650 | 1600 | 100% | 117.0 | 1.11x |"
