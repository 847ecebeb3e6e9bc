#!/usr/bin/env bash
# Regenerate everything derived from the pydantic models and the metric table: crds/, the README's CRD
# reference, and the chart's CRDs, Prometheus rules and Grafana dashboard. Tests fail until this has
# been run after a change to either.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m kvpilot crd --write crds
python3 -m kvpilot crd --write charts/kvpilot/crds
python3 - <<'PY'
from pathlib import Path
from kvpilot.observability import dashboard_json, prometheus_rules_yaml
files = Path("charts/kvpilot/files")
(files / "prometheus-rules.yaml").write_text(prometheus_rules_yaml())
(files / "dashboard.json").write_text(dashboard_json())
PY
python3 - <<'PY'
from pathlib import Path
from kvpilot.api.crd import reference_markdown
readme = Path("README.md")
text = readme.read_text()
start, end = "<!-- crd-reference:start -->\n", "<!-- crd-reference:end -->"
head, rest = text.split(start, 1)
readme.write_text(head + start + reference_markdown() + end + rest.split(end, 1)[1])
PY
echo "regenerated crds/, the README's CRD reference and the chart's CRDs, rules and dashboard"
