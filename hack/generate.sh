#!/usr/bin/env bash
# Regenerate everything derived from the pydantic models: crds/, the README's CRD reference and,
# when the chart exists, its copy of the CRDs. Tests fail until this has been run after a model change.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m kvpilot crd --write crds
if [ -d charts/kvpilot/crds ]; then python3 -m kvpilot crd --write charts/kvpilot/crds; fi
python3 - <<'PY'
from pathlib import Path
from kvpilot.api.crd import reference_markdown
readme = Path("README.md")
text = readme.read_text()
start, end = "<!-- crd-reference:start -->\n", "<!-- crd-reference:end -->"
head, rest = text.split(start, 1)
readme.write_text(head + start + reference_markdown() + end + rest.split(end, 1)[1])
PY
echo "regenerated crds/ and the README's CRD reference"
