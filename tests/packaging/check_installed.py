"""Run by tox's ``pkg`` environment after a plain (non-editable) install of the three distributions.

Fails unless ``tierlog plugins --json`` finds both plugins through their entry points, each
with its distribution and version.
"""

from __future__ import annotations

import json
import subprocess
import sys


def main() -> int:
    output = subprocess.run(
        ["tierlog", "plugins", "--json"], check=True, capture_output=True, text=True
    ).stdout
    plugins = {row["name"]: row for row in json.loads(output)}
    expected = {"fsspec": "tierlog-fsspec", "spark": "tierlog-spark"}
    for name, distribution in expected.items():
        row = plugins.get(name)
        if row is None or row["distribution"] != distribution or not row["version"]:
            print(f"plugin {name!r} from {distribution!r} not found: {plugins}", file=sys.stderr)
            return 1
    print(f"found {', '.join(sorted(expected))} through their entry points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
