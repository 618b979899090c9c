"""SALib's side of tests/salib.rs: reads memlink's responses, design, resamples and results
(JSON on standard input), runs SALib itself on them and prints the largest absolute
difference of each statistic. Exits 1 when any exceeds the tolerance."""
import json
import sys

import numpy as np
from scipy.stats import norm
from SALib.analyze import morris, sobol

TOL = 1e-9
case = json.load(sys.stdin)
Z = norm.ppf(0.5 + 0.95 / 2)
worst = {}


def record(name, mine, theirs):
    diff = float(np.max(np.abs(np.asarray(mine, dtype=float) - np.asarray(theirs, dtype=float))))
    worst[name] = max(worst.get(name, 0.0), diff)


# Sobol: SALib's analyze on the responses in SALib's order; its confidence formula on memlink's
# resamples of the base rows (numpy's random draws are not memlink's).
s = case["sobol"]
d, n = s["d"], s["n"]
problem = {"num_vars": d, "names": [f"x{i}" for i in range(d)], "bounds": [[0.0, 1.0]] * d}
y = np.asarray(s["y_salib"], dtype=float)
si = sobol.analyze(problem, y, calc_second_order=False, num_resamples=len(s["resamples"]))
record("sobol S1", s["s1"], si["S1"])
record("sobol ST", s["st"], si["ST"])
yn = (y - y.mean()) / y.std()
A, B, AB, _ = sobol.separate_output_values(yn, d, n, False)
r = np.asarray(s["resamples"], dtype=int).T  # N x resamples, as SALib's `r`
s1_conf = [Z * sobol.first_order(A[r], AB[r, j], B[r]).std(ddof=1) for j in range(d)]
st_conf = [Z * sobol.total_order(A[r], AB[r, j], B[r]).std(ddof=1) for j in range(d)]
record("sobol S1_conf", s["s1_conf"], s1_conf)
record("sobol ST_conf", s["st_conf"], st_conf)

# Morris: SALib's analyze on the design and responses; mu_star_conf by its formula on
# memlink's resamples of each factor's elementary effects.
m = case["morris"]
d = m["d"]
problem = {"num_vars": d, "names": [f"x{i}" for i in range(d)], "bounds": [[0.0, 1.0]] * d}
X = np.asarray(m["x"], dtype=float)
Y = np.asarray(m["y"], dtype=float)
mi = morris.analyze(problem, X, Y, num_resamples=10, num_levels=m["levels"])
record("morris mu", m["mu"], mi["mu"])
record("morris mu_star", m["mu_star"], mi["mu_star"])
record("morris sigma", m["sigma"], mi["sigma"])
delta = m["levels"] / (2.0 * (m["levels"] - 1))
ee = morris._compute_elementary_effects(X, Y, d + 1, delta)
conf = []
for j in range(d):
    idx = np.asarray(m["resamples"][j], dtype=int)
    conf.append(Z * np.average(np.abs(ee[j, :][idx]), axis=1).std(ddof=1))
record("morris mu_star_conf", m["mu_star_conf"], conf)

for k, v in worst.items():
    print(f"{k}: largest difference {v:.3e}")
bad = {k: v for k, v in worst.items() if not v <= TOL}
if bad:
    print(f"differ from SALib by more than {TOL}: {bad}")
    sys.exit(1)
