"""Mutates valid dstack configurations into near-misses.

usage: mutate.py OUT_DIR SEED COUNT SOURCE_GLOB...
Each mutation replaces a value with one from a pool of tricky values,
deletes or misspells a key, or adds a field; one file per directory.
"""
import copy
import glob
import os
import random
import sys

import yaml

out, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(seed)
docs = []
for pattern in sys.argv[4:]:
    for p in glob.glob(pattern):
        try:
            d = yaml.safe_load(open(p))
        except Exception:  # noqa: BLE001
            continue
        if isinstance(d, dict) and "type" in d:
            docs.append(d)

POOL = [None, True, False, 0, 1, -1, 2, 8, 2.5, 1.0, "", "abc", "2..", "..", "..8", "8..2", "off", "on",
        "A100:8", "A100:80GB:8:8", "24GB..", "5m", "2x", "1..4", "*:8080", "80:8080", "8080", "/abs:/path",
        "name:/path", [], {}, ["x"], [1], {"min": 1}, {"min": 4, "max": 2}, {"min": 1, "max": 4}, "3.10", 3.1, 3.12,
        "nvidia", "arm:8", "x86:4..", "ARM:8", "auto", "cluster", "spot", "aws", "vscode", "rps", 70000, "MI300X:8",
        "tpu-v2-8", "1h", "-5", "1d", "A100,H100", "H100:1..", "0..", "16GB", "8GB..", "1TB", "512MB",
        {"count": 2}, {"name": "A100"}, {"vendor": "amd"}, {"metric": "rps", "target": 1}, "ubuntu", "my-fleet",
        "Bad_Name", "x", ["A=1", "A=2"], ["1A=1"], {"A": 1}, {"A": None}, {"A": True}, "${{ secrets.x }}",
        [{"type": "http"}], [{"prefix": "/", "rps": 1}], {"on_events": []}, {"duration": "1h"},
        {"cron": "0 * * * *"}, {"cron": "bad"}, "10.0.0.1", ["10.0.0.1"], {"type": "acm"}, {"type": "lets-encrypt"},
        "0", "1.5", "nodes", [{"count": 1}], [{"name": "a", "commands": ["x"]}], "reuse", "master-done"]
FIELDS = ["name", "image", "python", "nvcc", "docker", "commands", "ports", "port", "replicas", "scaling", "nodes",
          "groups", "resources", "env", "volumes", "files", "repos", "retry", "max_duration", "stop_duration",
          "idle_duration", "spot_policy", "backends", "regions", "max_price", "fleets", "schedule", "ide", "init",
          "inactivity_duration", "gateway", "model", "auth", "https", "probes", "rate_limits", "placement", "blocks",
          "ssh_config", "backend", "region", "size", "volume_id", "domain", "certificate", "public_ip", "default",
          "privileged", "working_dir", "user", "shell", "priority", "utilization_policy", "startup_order",
          "stop_criteria", "creation_policy", "instance_types", "tags", "entrypoint", "registry_auth", "dstack",
          "reservation", "availability_zones", "instances", "claim_name", "access_modes", "auto_cleanup_duration"]


def paths(v, pre=()):
    yield pre
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths(x, pre + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from paths(x, pre + (i,))


def get(d, p):
    for k in p:
        d = d[k]
    return d


made = 0
while made < count:
    d = copy.deepcopy(random.choice(docs))
    ps = [p for p in paths(d) if p and p[0] != "type"]
    op = random.random()
    if op < 0.55 and ps:
        p = random.choice(ps)
        get(d, p[:-1])[p[-1]] = copy.deepcopy(random.choice(POOL))
    elif op < 0.7 and ps:
        p = random.choice(ps)
        parent = get(d, p[:-1])
        if isinstance(parent, dict):
            del parent[p[-1]]
        else:
            parent.pop(p[-1])
    elif op < 0.8:
        d[random.choice(FIELDS)] = copy.deepcopy(random.choice(POOL))
    elif ps:
        p = random.choice([p for p in ps if isinstance(p[-1], str)] or ps)
        parent = get(d, p[:-1])
        if isinstance(parent, dict) and isinstance(p[-1], str) and len(p[-1]) > 3:
            k = p[-1]
            i = random.randrange(len(k))
            parent[k[:i] + k[i + 1:]] = parent.pop(k)
    dd = os.path.join(out, "%05d" % made)
    os.makedirs(dd, exist_ok=True)
    with open(os.path.join(dd, "m.dstack.yml"), "w") as f:
        f.write(yaml.safe_dump(d, sort_keys=False))
    made += 1
