#!/usr/bin/env bash
# `make e2e`: Holdfast against a real sandbox account, end to end, and everything removed
# afterwards, on failure too. Never part of `make test`. docs/testing.md's "End-to-end run"
# section says what it needs (permissions, a bootstrapped account) and what it costs.
#
#   HOLDFAST_E2E_ACCOUNT=123456789012 HOLDFAST_E2E_REGION=eu-west-1 AWS_PROFILE=sandbox make e2e
#
# Steps: preflight (the credentials are that account's) -> the fleet with hard owner
# states and the stop alarm -> `cdk deploy` of Holdfast with the game day on -> snapshot
# -> `holdfast drill --yes` (FIS fails the selected groups' launches in every zone while
# instances are replaced, Holdfast engages, the experiment ends, Holdfast restores) ->
# snapshot -> exact comparison -> clean-up (trap): the fleet, the stack, and what the
# stack retains on delete (the ledger table, log groups, the topic's key).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ -z "${HOLDFAST_E2E_ACCOUNT:-}" || -z "${HOLDFAST_E2E_REGION:-}" || -z "${AWS_PROFILE:-}" ]]; then
  echo "e2e: skipped: set HOLDFAST_E2E_ACCOUNT, HOLDFAST_E2E_REGION and AWS_PROFILE to run against a sandbox account"
  exit 0
fi

PY=.venv/bin/python
CDK=node_modules/.bin/cdk
export AWS_REGION="$HOLDFAST_E2E_REGION" AWS_DEFAULT_REGION="$HOLDFAST_E2E_REGION"
export CDK_DEFAULT_ACCOUNT="$HOLDFAST_E2E_ACCOUNT" CDK_DEFAULT_REGION="$HOLDFAST_E2E_REGION"
RUN="holdfast-e2e-$(date -u +%Y%m%d%H%M%S)"
SELECTOR="holdfast-e2e:protect=$RUN"
STACK="Holdfast-${HOLDFAST_E2E_ACCOUNT}-${HOLDFAST_E2E_REGION}"
OUT="out/e2e/$RUN"
DURATION_MINUTES="${HOLDFAST_E2E_DURATION_MINUTES:-15}"
mkdir -p "$OUT"

CONTEXT=$(cat <<JSON
{"targets": [{"account": "$HOLDFAST_E2E_ACCOUNT", "region": "$HOLDFAST_E2E_REGION"}],
 "selector": "$SELECTOR", "mode": "auto", "hold_minutes": 2, "capacity_hold_minutes": 4,
 "recover_quiet_minutes": 3, "detect_min_groups": 3, "detect_min_zones": 2,
 "game_day_stop_alarm": "$RUN-stop", "game_day_duration_minutes": $DURATION_MINUTES}
JSON
)

cleanup() {
  rc=$?
  trap - EXIT INT TERM
  echo "e2e: cleaning up $RUN (exit $rc so far)"
  [[ -n "${PROVOKER:-}" ]] && kill "$PROVOKER" 2>/dev/null || true
  $PY tests/e2e/e2e.py retained --stack "$STACK" > "$OUT/retained.json" 2>/dev/null || true
  $CDK destroy "$STACK" --force -c holdfast="$CONTEXT" >"$OUT/destroy.log" 2>&1 || echo "e2e: cdk destroy failed, see $OUT/destroy.log"
  $PY tests/e2e/e2e.py destroy --prefix "$RUN" --retained "$OUT/retained.json" >"$OUT/removed.json" || {
    echo "e2e: clean-up incomplete: remove resources tagged holdfast-e2e=$RUN by hand"; rc=1; }
  exit "$rc"
}
trap cleanup EXIT INT TERM

make -s .venv/.installed node_modules/.installed
$PY tests/e2e/e2e.py preflight
$PY tests/e2e/e2e.py prepare --prefix "$RUN" --selector "$SELECTOR" > "$OUT/fleet.json"
$CDK deploy "$STACK" --require-approval never -c holdfast="$CONTEXT" --outputs-file "$OUT/outputs.json" >"$OUT/deploy.log" 2>&1
$PY tests/e2e/e2e.py snapshot --prefix "$RUN" > "$OUT/before.json"

$PY tests/e2e/e2e.py provoke --prefix "$RUN" --selector "$SELECTOR" --minutes "$DURATION_MINUTES" > "$OUT/provoke.log" 2>&1 &
PROVOKER=$!
# The stack publishes its settings (<prefix>/settings), which the drill reads; --settings is
# this run's context too, so a stack deployed before that parameter existed still drills.
echo "$CONTEXT" > "$OUT/settings.json"
.venv/bin/holdfast --region "$HOLDFAST_E2E_REGION" --settings "$OUT/settings.json" drill --yes --json \
  --stack-name "$STACK" --out "$OUT" | tee "$OUT/drill.json"
wait "$PROVOKER" || true
PROVOKER=

$PY tests/e2e/e2e.py snapshot --prefix "$RUN" > "$OUT/after.json"
$PY tests/e2e/e2e.py compare "$OUT/before.json" "$OUT/after.json"
echo "e2e: passed; drill report in $OUT/drill-report.md"
