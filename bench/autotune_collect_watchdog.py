"""Run bench/autotune_collect.py with a watchdog: a module that makes no progress for STALL s is
skipped (process killed, restarted after it).

    python autotune_collect_watchdog.py WORK main|rep TOTAL_S START_GROUP [STALL_S]

The H200 and H100 runs of hlorun/autotune/data were collected with
    drive main 320 START 75; drive rep 75 START 50   (H100, START=22)
    autotune_collect.py WORK main 290; ... rep 95     (H200, START=0)
"""
import glob, json, os, signal, subprocess, sys, time
WORK, PHASE, TOTAL, START = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
STALL = float(sys.argv[5]) if len(sys.argv) > 5 else 60
T0 = time.time()
start = START
while time.time() - T0 < TOTAL - 20:
    left = TOTAL - (time.time() - T0)
    log = open(os.path.join(WORK, f"{PHASE}_{start:04d}.log"), "w")
    p = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "autotune_collect.py"), WORK, PHASE, str(left - 15), str(start)],
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
    stuck = base if PHASE == "main" else -(-base // 3) * 3
    nxt = stuck + 1
    print(f"[drive] killed at group after {max(done) if done else None}; restarting at {nxt}", flush=True)
    start = nxt
