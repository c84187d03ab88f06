#!/usr/bin/env python3
"""Soak of exactly-once under faults (issue 15): `weir ingest` with injected store faults, killed
and restarted, one incarnation stopped while the next one starts.

    bench/soak/ingest_faults.py [--seconds 600] [--kills 10] [--faults 0.05] [--workers 2]
                                [--rate 2000] [--weir build/release/tools/weir/weir] [--keep DIR]

1. A reference: one uninterrupted run without faults, to the same offset.
2. The soak, for --seconds: incarnations stream at --rate with --inject-faults; --kills of them
   are killed with SIGKILL (at random moments, the last at the deadline); half-way one is stopped
   with SIGSTOP (at a moment it holds no SQLite write lock: a stopped holder would block every
   process, which is SQLite's design), the next incarnation starts and runs, and the stopped one
   is resumed with SIGCONT while its successor goes on. A final incarnation, still with faults,
   catches up to the end at --rate 0.
3. Checks: every shard reads (`weir persist cat`) equal to the reference's; the status shard holds
   the last incarnation's `ceased` rows and nothing else; no incarnation backed off more than once
   per second on average (a storm) and every backoff sequence grows.
Prints a summary and exits non-zero on a failed check. CI runs a 60-second smoke of it.
"""

import argparse
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

TABLES = ("users", "auctions", "bids")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--faults", type=float, default=0.05)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rate", type=float, default=2000, help="upstream offsets per second")
    p.add_argument("--seed", type=int, default=20261202)
    p.add_argument("--weir", default="build/release/tools/weir/weir")
    p.add_argument("--keep", help="leave the shards and logs in this directory")
    return p.parse_args()


class Soak:
    def __init__(self, args, base):
        self.args = args
        self.base = base
        self.until = int(args.rate * args.seconds)  # Not reached while streaming at the rate.
        self.logs = []  # (incarnation index, log path)
        self.rng = random.Random(args.seed)

    def ingest_args(self, directory, faults, rate):
        args = [self.args.weir, "ingest", "--source", "loadgen:auction", "--scale", "10",
                "--persist", directory, "-w", str(self.args.workers), "--until", str(self.until),
                "--rate", str(rate)]
        if faults > 0:
            args += ["--inject-faults", str(faults)]
        return args

    def spawn(self, directory, faults, rate):
        log = os.path.join(self.base, f"run-{len(self.logs)}.log")
        self.logs.append(log)
        with open(log, "w") as out:
            return subprocess.Popen(self.ingest_args(directory, faults, rate), stdout=out,
                                    stderr=subprocess.STDOUT)

    def cat(self, directory, shard):
        out = subprocess.run([self.args.weir, "persist", "--persist", directory, "cat", shard],
                             check=True, capture_output=True, text=True).stdout
        # DATA<tab>TIME<tab>DIFF, consolidated at the latest time: the rows and their counts.
        rows = {}
        for line in out.splitlines():
            data, _, diff = line.rsplit("\t", 2)
            rows[data] = rows.get(data, 0) + int(diff)
        return rows

    def stop_outside_write_lock(self, proc, db_path):
        """SIGSTOP `proc` at a moment it holds no write lock on `db_path`; True once stopped."""
        db = sqlite3.connect(db_path, timeout=0, isolation_level=None)
        try:
            for _ in range(1000):
                os.kill(proc.pid, signal.SIGSTOP)
                # SIGSTOP is asynchronous: look at the lock only once every thread has stopped.
                _, status = os.waitpid(proc.pid, os.WUNTRACED)
                if not os.WIFSTOPPED(status):
                    return False
                try:
                    db.execute("BEGIN IMMEDIATE")
                    db.execute("ROLLBACK")
                    return True
                except sqlite3.OperationalError:
                    os.kill(proc.pid, signal.SIGCONT)
                    time.sleep(0.001)
            return False
        finally:
            db.close()

    def run(self):
        a = self.args
        reference = os.path.join(self.base, "reference")
        soak = os.path.join(self.base, "soak")
        t0 = time.time()
        ref = subprocess.run(self.ingest_args(reference, 0, 0) + ["--quiet"], capture_output=True,
                             text=True)
        if ref.returncode != 0:
            sys.exit(f"soak: the reference run failed: {ref.stdout}{ref.stderr}")
        print(f"reference: until {self.until} in {time.time() - t0:.1f} s", flush=True)

        start = time.time()
        # The last kill is at the deadline; the others at random moments before it.
        kills = sorted(self.rng.uniform(0.05, 0.95) * a.seconds for _ in range(a.kills - 1))
        kills.append(a.seconds)
        stop_at = 0.5 * a.seconds
        events = []
        proc = self.spawn(soak, a.faults, a.rate)
        stopped = None  # (process, the time to resume it)
        while kills or stop_at is not None:
            now = time.time() - start
            if stopped and now >= stopped[1]:
                os.kill(stopped[0].pid, signal.SIGCONT)
                events.append(f"{now:6.1f} s: SIGCONT the stopped incarnation")
                self.resumed = stopped[0]
                stopped = None
            if stop_at is not None and now >= stop_at:
                if self.stop_outside_write_lock(proc, os.path.join(soak, "consensus.db")):
                    events.append(f"{now:6.1f} s: SIGSTOP run {len(self.logs) - 1}, "
                                  f"run {len(self.logs)} starts")
                    stopped = (proc, now + min(20, a.seconds / 20))
                    proc = self.spawn(soak, a.faults, a.rate)
                stop_at = None
                continue
            if kills and now >= kills[0]:
                kills.pop(0)
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                    events.append(f"{now:6.1f} s: SIGKILL run {len(self.logs) - 1}")
                # After the last kill, a final incarnation catches up at full speed (the data
                # at each offset does not depend on the rate).
                proc = self.spawn(soak, a.faults, a.rate if kills else 0)
                continue
            time.sleep(0.05)
        if stopped:
            os.kill(stopped[0].pid, signal.SIGCONT)
            self.resumed = stopped[0]
        last = len(self.logs) - 1
        remaining = 300.0
        try:
            rc = proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            proc.kill()
            sys.exit(f"soak: the last run did not finish within {remaining:.0f} s")
        resumed_rc = self.resumed.wait(timeout=120) if hasattr(self, "resumed") else None
        print(f"soak: {len(self.logs)} runs in {time.time() - start:.1f} s; last exited {rc}, "
              f"the resumed one {resumed_rc}")
        for e in events:
            print("  " + e)
        return self.check(reference, soak, last, rc)

    def check(self, reference, soak, last, rc):
        failures = []
        if rc != 0:
            failures.append(f"the last run exited {rc}")
        for table in TABLES:
            shard = "auction." + table
            expected, got = self.cat(reference, shard), self.cat(soak, shard)
            bad = [r for r, n in got.items() if n != 1]
            status = "equal" if got == expected and not bad else "DIFFERS"
            print(f"  {shard:16} {len(got):8} rows, reference {len(expected):8}: {status}")
            if status != "equal":
                failures.append(f"{shard} differs from the reference ({len(bad)} rows not once)")
        incarnation = None
        with open(self.logs[last]) as f:
            for line in f:
                # A log line: "<date> <time> info  [main] incarnation N".
                m = re.search(r"(?:^|\] )incarnation (\d+)$", line.strip())
                if m:
                    incarnation = m.group(1)
        status_rows = self.cat(soak, "auction.status")
        for row, n in sorted(status_rows.items()):
            print(f"  status: {row} x{n}")
        want = {f"{t} ceased incarnation={incarnation} " for t in TABLES}
        if len(status_rows) != 3 or not all(
                n == 1 and any(row.startswith(w) for w in want) for row, n in status_rows.items()):
            failures.append(f"the status shard does not hold incarnation {incarnation}'s "
                            "ceased rows alone")
        print("  backoffs per run (count, seconds run, delays in ms):")
        for i, log in enumerate(self.logs):
            with open(log) as f:
                text = f.read()
            delays = [int(d) for d in re.findall(r"retrying in (\d+) ms", text)]
            secs = re.search(r"in ([\d.]+) s \(", text)
            secs = float(secs.group(1)) if secs else None
            print(f"    run {i}: {len(delays)} backoffs"
                  + (f" in {secs:.1f} s" if secs else " (killed or stopped)")
                  + (f": {delays[:8]}{' ...' if len(delays) > 8 else ''}" if delays else ""))
            if secs and len(delays) > max(3, secs):
                failures.append(f"run {i}: {len(delays)} backoffs in {secs:.1f} s (a storm)")
        for f in failures:
            print("soak: FAILED: " + f)
        return not failures


def main():
    args = parse_args()
    base = args.keep or tempfile.mkdtemp(prefix="weir-soak-")
    if args.keep:
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
    ok = Soak(args, base).run()
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    print("soak: " + ("passed" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
