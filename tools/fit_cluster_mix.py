"""Fit the distributions of data/cluster_mixes/default.yaml (prints the numbers that file records).

* inference, development, fine-tuning: the GPU pods of the Alibaba cluster-trace-gpu-v2023 sample
  (data/traces/alibaba-openb-gpu-sample.csv), classes by QoS (hnplan.cluster.jobs.openb_class):
  GPU-count and GPU-share frequencies; durations (deletion - scheduled) fitted with
  scipy.stats.lognorm (location 0, maximum likelihood).
* training: durations log-normal through the median and mean run time of GPU jobs in the Philly trace
  (AcmeTrace data/cluster_summary.csv: med 874 s, mean 18,006 s): mu = ln(median),
  sigma = sqrt(2 ln(mean / median)); GPU counts on the power-of-two ladder 8..1024 with geometric
  weights q^i, q solved (scipy.optimize.brentq) so the mix's mean GPUs per job equals Helios's 3.716
  (AcmeTrace cluster_summary.csv, avg_gpu_num).

Run: .venv/bin/python tools/fit_cluster_mix.py
"""

from pathlib import Path

import numpy as np
from scipy import optimize, stats

from hnplan.cluster.jobs import read_openb

ROOT = Path(__file__).resolve().parents[1]
TRAIN_SHARE = 0.05  # labelled assumption in default.yaml
LADDER = 2 ** np.arange(3, 11)  # 8..1024 GPUs
HELIOS_MEAN_GPUS = 3.716
PHILLY_MED_S, PHILLY_MEAN_S = 874.0, 18006.055


def main():
    jobs = read_openb(ROOT / "data/traces/alibaba-openb-gpu-sample.csv")
    n = len(jobs)
    small_mean = 0.0
    for cls in ("inference", "development", "fine-tuning"):
        j = jobs[jobs["cls"] == cls]
        share = len(j) / n * (1 - TRAIN_SHARE)
        g, c = np.unique(j["gpus"], return_counts=True)
        one = j[j["gpus"] == 1]
        frac = float((one["gpu_milli"] < 1000).mean())
        m, mc = np.unique(
            np.round(one.loc[one["gpu_milli"] < 1000, "gpu_milli"], -2).clip(100, 900), return_counts=True
        )
        sigma, _, scale = stats.lognorm.fit(j["duration_s"], floc=0)
        small_mean += len(j) / n * float(np.dot(g, c) / c.sum())
        print(
            f"{cls}: n={len(j)} share={share:.4f} gpus={dict(zip(g.tolist(), c.tolist()))} fractional={frac:.4f} "
            f"milli={dict(zip(m.astype(int).tolist(), mc.tolist()))} duration mu={np.log(scale):.4f} sigma={sigma:.4f}"
        )
    target = (HELIOS_MEAN_GPUS - (1 - TRAIN_SHARE) * small_mean) / TRAIN_SHARE

    def mean_for(q):
        w = q ** np.arange(len(LADDER))
        return float(np.dot(LADDER, w) / w.sum()) - target

    q = optimize.brentq(mean_for, 1e-6, 0.999)
    w = q ** np.arange(len(LADDER))
    print(f"training: target mean {target:.2f} GPUs, q={q:.4f}, weights={np.round(w / w.sum(), 4).tolist()}")
    print(
        f"training duration mu={np.log(PHILLY_MED_S):.4f} sigma={np.sqrt(2 * np.log(PHILLY_MEAN_S / PHILLY_MED_S)):.4f}"
    )


if __name__ == "__main__":
    main()
