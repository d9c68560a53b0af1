"""Where a chain CRF's training process spends its resident memory.

Trains in this process (crftk.commands.train.train, the benchmark's options: c2=1, min-freq 1,
supported features, L-BFGS history 6) and reports, in MB of VmRSS / VmHWM:

- the stages: interpreter start, numpy imported, crftk's training imported, data read and encoded
  (the first log line), the first and last iterations, the end;
- the peak, from a thread sampling VmRSS every millisecond, with the main thread's stack at that
  moment (the code that was running when the peak was reached);
- with --arrays, every numpy array reachable from the training job at the first evaluation
  (corpus, feature space), largest first.

    PYTHONPATH=. python3 benchmarks/train_memory.py --data /work/shared/data/conll2000/train.txt \\
        --template templates/chunking-crfpp.tmpl --threads 1 --iterations 30

Run it under another checkout's PYTHONPATH to compare. Sampling adds about 0.5 MB (its thread).
"""

import argparse
import sys
import threading
import time
import traceback


def status():
    """(VmRSS, VmHWM) of this process in MB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":")
                out[key] = int(value.split()[0]) / 1024
    return out["VmRSS"], out["VmHWM"]


def stage(name):
    rss, hwm = status()
    print(f"{name:44s} RSS {rss:7.1f}  HWM {hwm:7.1f}", flush=True)


class PeakSampler(threading.Thread):
    """Samples VmRSS; remembers the highest and where the main thread was then."""

    def __init__(self, interval=0.001):
        super().__init__(daemon=True)
        self.interval, self.main = interval, threading.main_thread().ident
        self.peak, self.where = 0.0, ""

    def run(self):
        while True:
            rss, _ = status()
            if rss > self.peak:
                frame = sys._current_frames().get(self.main)
                if frame is not None:
                    stack = [f"{f.f_code.co_filename.rsplit('/', 2)[-1]}:{n}" for f, n in traceback.walk_stack(frame)]
                    self.peak, self.where = rss, " < ".join(stack[:8])
                del frame           # a frame held here would keep its temporaries alive
            time.sleep(self.interval)


def reachable_arrays(root, limit=15):
    """(bytes, path, dtype, shape) of the numpy arrays that own their memory, reachable from root."""
    import numpy as np
    seen, out = set(), []

    def walk(obj, path, depth):
        if id(obj) in seen or depth > 6:
            return
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            if obj.base is None:
                out.append((obj.nbytes, path, obj.dtype, obj.shape))
            return
        if isinstance(obj, dict):
            for k, v in list(obj.items())[:500]:
                walk(v, f"{path}[{k!r}]", depth + 1)
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj[:500]):
                walk(v, f"{path}[{i}]", depth + 1)
        elif hasattr(obj, "__dict__"):
            for k, v in vars(obj).items():
                walk(v, f"{path}.{k}", depth + 1)

    walk(root, "inference", 0)
    out.sort(key=lambda a: -a[0])
    return sum(a[0] for a in out), out[:limit]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="training file (CoNLL)")
    p.add_argument("--template", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--arrays", action="store_true",
                   help="also list the arrays alive at the first evaluation (the walk itself adds a few MB "
                        "of Python objects: run the peak without it)")
    args = p.parse_args(argv)
    stage("start")
    import numpy  # noqa: F401
    stage("numpy imported")
    from crftk.commands.train import train
    import crftk.structures.chain as chain
    stage("crftk.commands.train imported")
    sampler = PeakSampler()
    sampler.start()
    first_pass = chain.ChainInference.loglik

    def loglik(self, *a, **k):              # the arrays alive at the first evaluation
        if not getattr(loglik, "done", False):
            loglik.done = True
            total, top = reachable_arrays(self)
            print(f"arrays reachable from the training job: {total / 2**20:.1f} MB", flush=True)
            for nbytes, path, dtype, shape in top:
                print(f"  {nbytes / 2**20:7.2f} {path} {dtype} {shape}", flush=True)
        return first_pass(self, *a, **k)

    if args.arrays:
        chain.ChainInference.loglik = loglik
    last = args.iterations

    def log(msg):
        if msg.startswith("read ") or msg.startswith("iter ") and int(msg.split()[1]) in (1, last):
            stage(msg[:44])

    train([args.data], args.template, None, log=log, threads=args.threads, max_iter=args.iterations, c1=0.0,
          c2=1.0, period=10, history=6, min_freq=1, feature_set="supported")
    stage("end")
    time.sleep(0.01)
    print(f"peak RSS {sampler.peak:.1f} MB while running {sampler.where}")


if __name__ == "__main__":
    main()
