"""Accept/reject oracle: dstack's own configuration parser.

Reads YAML file paths from argv and prints one JSON line per file:
{"path": ..., "ok": bool, "err": str}. Needs dstack's and gpuhunt's sources
on PYTHONPATH (see README.md), pydantic v2 and PyYAML.
"""
import json
import re
import sys

import yaml
from dstack._internal.core.models.configurations import parse_apply_configuration

NAME = re.compile(r"^[a-z][a-z0-9-]{1,40}$")


def check(src):
    try:
        data = yaml.safe_load(src)
    except Exception as e:  # noqa: BLE001 - any parse failure is a reject
        return False, "yaml: %s" % e
    if not isinstance(data, dict):
        return False, "not a mapping"
    try:
        conf = parse_apply_configuration(data)
    except Exception as e:  # noqa: BLE001
        return False, str(e).replace("\n", " | ")[:300]
    name = getattr(conf, "name", None)
    if name is not None and not NAME.match(name):
        return False, "server: invalid name"
    return True, ""


for path in sys.argv[1:]:
    with open(path) as f:
        ok, err = check(f.read())
    print(json.dumps({"path": path, "ok": ok, "err": err}))
