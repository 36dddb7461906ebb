"""Run bench/autotune_collect.py with a watchdog: a module that makes no progress for STALL s is
skipped (process killed, restarted after it).

    python autotune_collect_watchdog.py WORK main|rep TOTAL_S START_GROUP [STALL_S [EVERY]]

EVERY (default 3) is the rep phase's module stride (autotune_collect.py's EVERY): 1 re-times every
module the main phase compiled, in order, until TOTAL_S.  The child is killed at TOTAL_S at the latest.
The H200 and H100 runs of hlorun/autotune/data were collected with
    drive main 320 START 75; drive rep 75 START 50   (H100, START=22)
    autotune_collect.py WORK main 290; ... rep 95     (H200, START=0)
and session 6's H200 run (tag x13_) with H20_MIX=13, drive main 290 0 60, then drive rep 225 0 60 1.
"""
import glob, json, os, signal, subprocess, sys, time
WORK, PHASE, TOTAL, START = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
STALL = float(sys.argv[5]) if len(sys.argv) > 5 else 60
EVERY = int(sys.argv[6]) if len(sys.argv) > 6 else 3
T0 = time.time()
start = START


def main_ok() -> set:
    ok = set()
    for sf in glob.glob(os.path.join(WORK, "main", "status_*.json")):
        ok |= {m["module"] for m in json.load(open(sf))["modules"] if m["ok"]}
    return ok


while time.time() - T0 < TOTAL - 20:
    left = TOTAL - (time.time() - T0)
    log = open(os.path.join(WORK, f"{PHASE}_{start:04d}.log"), "w")
    p = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "autotune_collect.py"),
                          WORK, PHASE, str(left - 15), str(start), str(EVERY)],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    sf = os.path.join(WORK, PHASE, f"status_{start:04d}.json")
    last, last_t = -1, time.time()
    while p.poll() is None:
        time.sleep(2)
        try:
            mods = json.load(open(sf))["modules"]
            n = len(mods)
        except Exception:
            mods, n = [], 0
        if n != last:
            last, last_t = n, time.time()
        limit = STALL + (30 if n == 0 else 0)
        if time.time() - last_t > limit or time.time() - T0 > TOTAL:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            break
    if p.returncode == 0 or time.time() - T0 > TOTAL - 20:
        break
    # resume after the stuck module
    done = [int(m["module"][1:5]) for m in mods if m["module"][1:5].isdigit()]
    base = max(done) + 1 if done else start
    if PHASE == "main":
        stuck = base
    else:   # the next module the rep phase selects (autotune_collect.py's rule)
        ok = main_ok()
        stuck = next((g for g in range(base, base + 100000) if g % EVERY == 0 and f"m{g:04d}" in ok), base)
    nxt = stuck + 1
    print(f"[drive] killed at group after {max(done) if done else None}; restarting at {nxt}", flush=True)
    start = nxt
